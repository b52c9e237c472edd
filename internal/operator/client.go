package operator

import (
	"net/http"

	"github.com/grantretry/grantretry"
	"github.com/grantretry/grantretry/deadletter"
)

// NewClient returns the client a redeliver run sends through: a
// grantretry Transport whose attempts and dispositions go to the audit
// sink, with the policy of f (WithBudget of -budget and -deadline; -rules
// classifying the funder's answers first), adding the operator's headers
// to a clone of each request, and following no redirect, which would
// carry those headers to another host. Unless -trust-key, an attempt that
// may have been applied is not sent again: the Transport's reconciler is
// CannotAsk. Call closeIdle when the run is over.
func (f *RedeliverFlags) NewClient(sink grantretry.AuditSink) (client *http.Client, closeIdle func()) {
	opts := []grantretry.Option{grantretry.WithAuditTrail(sink), grantretry.WithBudget(f.Budget, f.Deadline)}
	if !f.TrustKey {
		opts = append(opts, grantretry.WithReconciler(CannotAsk))
	}
	if len(f.Rules) > 0 {
		opts = append(opts, grantretry.WithClassifier(grantretry.ClassifyRules(f.Rules...)))
	}
	tr := grantretry.New(nil, opts...)
	return &http.Client{
		Transport:     WithHeaders{Next: tr, Header: f.Creds.Header},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}, tr.CloseIdleConnections
}

// reconciler is the reconcile a run passes to Store.Send: deadletter's
// TrustKey with -trust-key, nil (an ambiguous keyed letter is not sent)
// without.
func (f *RedeliverFlags) reconciler() grantretry.ReconcileFunc {
	if f.TrustKey {
		return deadletter.TrustKey
	}
	return nil
}
