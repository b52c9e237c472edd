package deadletter_test

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/grantretry/grantretry"
	"github.com/grantretry/grantretry/deadletter"
)

// A letter whose last attempt may have been applied is not sent again
// as it is: with a nil reconcile nothing is sent, whatever the client, and
// the error matches ErrAmbiguous; TrustKey, the caller's word that the
// funder honours the key, sends it once.
func TestAmbiguousLetterIsNotResentWithoutAReconciler(t *testing.T) {
	for name, client := range redeliveryClients(t) {
		t.Run(name, func(t *testing.T) {
			f := newLedgerFunder(t)
			l := ledgerLetter(f.URL)
			l.Ambiguous = true
			resp, err := deadletter.Redeliver(context.Background(), client, l, nil)
			if resp != nil {
				resp.Body.Close()
			}
			if !errors.Is(err, deadletter.ErrAmbiguous) || resp != nil {
				t.Fatalf("Redeliver with a nil reconcile: %v, %v; want no response and ErrAmbiguous", resp, err)
			}
			if _, keys := f.counts(); len(keys) != 0 {
				t.Fatalf("the funder was sent %d requests, want none", len(keys))
			}

			var trust grantretry.ReconcileFunc = deadletter.TrustKey
			resp, err = deadletter.Redeliver(context.Background(), client, l, trust)
			if err != nil {
				t.Fatalf("Redeliver with TrustKey: %v", err)
			}
			if readBody(t, resp); resp.StatusCode != http.StatusCreated || deadletter.Reconciled(resp) {
				t.Errorf("Redeliver with TrustKey answered %d, reconciled %v; want 201 from the funder", resp.StatusCode, deadletter.Reconciled(resp))
			}
			if effects, keys := f.counts(); effects != 1 || len(keys) != 1 {
				t.Errorf("the funder applied %d in %d requests, want one in one", effects, len(keys))
			}
		})
	}
}
