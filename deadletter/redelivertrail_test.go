package deadletter_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/grantretry/grantretry"
	"github.com/grantretry/grantretry/deadletter"
	"github.com/grantretry/grantretry/trail"
)

// trailLines reads the trail at path, verified, as "msg field=value..."
// lines of the records that name letter id in FieldRedelivers.
func trailLines(t *testing.T, path, id string) []trail.Record {
	t.Helper()
	var recs []trail.Record
	_, err := trail.Read([]string{path, path + ".head"}, func(r trail.Record) error {
		if r.Fields[grantretry.FieldRedelivers] == id {
			recs = append(recs, r)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

func field(r trail.Record, k string) string {
	v, _ := r.Fields[k].(string)
	if v == "" && r.Fields[k] != nil {
		if n, ok := r.Fields[k].(interface{ String() string }); ok {
			return n.String()
		}
	}
	return v
}

// A letter redelivered with deadletter.Redeliver through a client whose
// Transport is a grantretry Transport with an audit trail is on that
// trail: the attempts and the disposition of the redelivery, each naming
// the letter, and, for an ambiguous letter, the question asked before
// anything was sent, whatever the answer.
func TestRedeliveryIsOnTheAuditTrail(t *testing.T) {
	unknown := errors.New("GetApplicationList: 503")
	for _, tc := range []struct {
		name      string
		ambiguous bool
		answer    func() (*http.Response, error) // the reconciler's
		wantMsgs  string
		wantDisp  string
		wantStop  string
		wantSent  int
		wantErr   error
	}{
		{name: "sent", wantMsgs: "attempt disposition", wantDisp: "succeeded", wantStop: "success", wantSent: 1},
		{name: "the funder has it", ambiguous: true,
			answer: func() (*http.Response, error) {
				return &http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader("GRANT00012345"))}, nil
			},
			wantMsgs: "reconcile disposition", wantDisp: "succeeded", wantStop: grantretry.StopReconciled},
		{name: "the funder has it not", ambiguous: true,
			answer:   func() (*http.Response, error) { return nil, nil },
			wantMsgs: "reconcile attempt disposition", wantDisp: "succeeded", wantStop: "success", wantSent: 1},
		{name: "cannot tell", ambiguous: true,
			answer:   func() (*http.Response, error) { return nil, unknown },
			wantMsgs: "reconcile reconcile disposition", wantDisp: "dead_letter", wantStop: grantretry.StopUnreconciled,
			wantErr: deadletter.ErrNotReconciled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newLedgerFunder(t)
			path := filepath.Join(t.TempDir(), "trail.jsonl")
			tl, err := trail.Open(path, trail.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer tl.Close()
			inner := &http.Transport{}
			t.Cleanup(inner.CloseIdleConnections)
			client := &http.Client{Transport: grantretry.New(credentials{inner}, grantretry.WithAuditTrail(tl),
				grantretry.WithBudget(1, time.Minute), grantretry.WithBackoff(time.Millisecond, time.Millisecond))}
			l := ledgerLetter(f.URL)
			l.Ambiguous = tc.ambiguous
			var asked []grantretry.ReconcileQuery
			var reconcile grantretry.ReconcileFunc
			if tc.answer != nil {
				reconcile = func(ctx context.Context, q grantretry.ReconcileQuery) (*http.Response, error) {
					asked = append(asked, q)
					return tc.answer()
				}
			}
			resp, err := deadletter.Redeliver(context.Background(), client, l, reconcile)
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil) {
				t.Fatalf("Redeliver: %v, want %v", err, tc.wantErr)
			}
			if resp != nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			if effects, _ := f.counts(); effects != tc.wantSent {
				t.Errorf("the funder applied %d, want %d", effects, tc.wantSent)
			}
			if len(asked) > 0 && (asked[0].Attempt != l.Attempts || asked[0].Status != l.LastStatus || asked[0].SubmissionID != l.SubmissionID) {
				t.Errorf("the first question %+v does not describe the letter's last attempt", asked[0])
			}
			if got := deadletter.Reconciled(resp); got != (tc.wantStop == grantretry.StopReconciled) {
				t.Errorf("Reconciled = %v", got)
			}
			if err := tl.Sync(); err != nil {
				t.Fatal(err)
			}
			recs := trailLines(t, path, l.ID)
			var msgs []string
			for _, r := range recs {
				msgs = append(msgs, strings.TrimPrefix(r.Msg, "grantretry."))
				if field(r, grantretry.FieldSubmissionID) != l.SubmissionID || field(r, grantretry.FieldCorrelationID) != l.CorrelationID {
					t.Errorf("record %s does not carry the letter's ids: %v", r.Msg, r.Fields)
				}
			}
			if strings.Join(msgs, " ") != tc.wantMsgs {
				t.Fatalf("the trail holds %q for letter %s, want %q", msgs, l.ID, tc.wantMsgs)
			}
			last := recs[len(recs)-1]
			if field(last, grantretry.FieldDisposition) != tc.wantDisp || field(last, grantretry.FieldStopReason) != tc.wantStop {
				t.Errorf("disposition %v", last.Fields)
			}
		})
	}
}
