package grantsgov

import (
	"time"

	"github.com/grantretry/grantretry"
)

// The retry policy Profile gives an S2S host. docs/grantsgov.md says why
// each value, with the storm simulator's runs behind them.
const (
	// ProfileBackoffBase and ProfileBackoffCap are the profile's backoff
	// (grantretry.WithBackoff): each retry is a whole upload, and a
	// generic server error is the service failing, not a request lost on
	// the way.
	ProfileBackoffBase = 5 * time.Second
	ProfileBackoffCap  = time.Minute
	// ProfileMaxRetries and ProfileDeadline are its budget
	// (grantretry.WithBudget); the reconciler's questions after an
	// ambiguous attempt are asked within it.
	ProfileMaxRetries = 3
	ProfileDeadline   = 25 * time.Minute
	// ProfileAttemptTimeout bounds one attempt, upload included
	// (grantretry.WithAttemptTimeout).
	ProfileAttemptTimeout = 5 * time.Minute
	// ProfileBreakerThreshold, ProfileBreakerCooldown and
	// ProfileBreakerProbe are its breaker (grantretry.WithBreaker,
	// grantretry.WithBreakerProbe): a probe is a real submission, so
	// during a maintenance window of hours it should be rare.
	ProfileBreakerThreshold = 5
	ProfileBreakerCooldown  = 2 * time.Minute
	ProfileBreakerProbe     = 15 * time.Second
)

// Profile returns the retry policy for calls to the Grants.gov S2S host
// host (as grantretry.ForHost takes it: ws07.grants.gov, or
// trainingws.grants.gov for training), built with grantretry.ForHost:
//
//   - grantretry.WithClassifier(ClassifyFault): a refusal, which the same
//     request meets again, ends the call after one attempt and is not
//     counted by the breaker; the generic server error is retried;
//   - grantretry.WithReconciler(r.Reconcile): an ambiguous
//     SubmitApplication is looked up by its SubmissionTitle before it is
//     sent again;
//   - the backoff, budget, attempt timeout and breaker of the Profile
//     constants.
//
// opts, policy options too, apply after these and so override them (a
// test's shorter backoff, say). A nil r makes the Transport invalid
// (grantretry.ErrInvalidOption, as WithReconciler(nil) does): without its
// reconciler the profile would resend an ambiguous submission, which
// Grants.gov records twice.
//
// Every ambiguous call to host is asked about: a SubmitApplication by its
// title, a query (a SOAPAction of Get... or Authenticate...) answered not
// applied and sent again. Any other operation without a SubmissionTitle
// cannot be told, and ends DeadLetter (StopUnreconciled) rather than be
// sent twice.
func Profile(host string, r *Reconciler, opts ...grantretry.Option) grantretry.Option {
	reconcile := grantretry.ReconcileFunc(nil)
	if r != nil {
		reconcile = r.Reconcile
	}
	policy := []grantretry.Option{
		grantretry.WithClassifier(ClassifyFault),
		grantretry.WithReconciler(reconcile),
		grantretry.WithBackoff(ProfileBackoffBase, ProfileBackoffCap),
		grantretry.WithBudget(ProfileMaxRetries, ProfileDeadline),
		grantretry.WithAttemptTimeout(ProfileAttemptTimeout),
		grantretry.WithBreaker(ProfileBreakerThreshold, ProfileBreakerCooldown),
		grantretry.WithBreakerProbe(ProfileBreakerProbe),
	}
	return grantretry.ForHost(host, append(policy, opts...)...)
}
