package fleet

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/grantretry/grantretry"
	"github.com/grantretry/grantretry/deadletter"
)

// notInProgress answers every submit as Simpler Grants.gov answers one
// for an application already submitted (the simplergrants/testdata
// sample, with its source), and a client whose Transport has the rule
// that reads it.
func notInProgress(t *testing.T) (*http.Client, *atomic.Int32, string) {
	t.Helper()
	body, err := os.ReadFile(filepath.Join("..", "simplergrants", "testdata", "submit-not-in-progress.body"))
	if err != nil {
		t.Fatal(err)
	}
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		w.Write(body)
	}))
	t.Cleanup(srv.Close)
	rule := grantretry.Rule{Status: http.StatusForbidden, Contains: `"not_in_progress"`,
		Verdict: grantretry.Classification{Applied: true, Reason: "applied:not_in_progress"}}
	client := &http.Client{Transport: grantretry.New(srv.Client().Transport,
		grantretry.WithClassifier(grantretry.ClassifyRules(rule)))}
	return client, &hits, srv.URL
}

func TestLettersRetireAnAmbiguousLetterAnsweredAlreadyApplied(t *testing.T) {
	for _, c := range []struct {
		name      string
		ambiguous bool
		done      bool
	}{
		{"ambiguous", true, true},
		{"not ambiguous", false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			pool := newPool(t)
			client, hits, url := notInProgress(t)
			s := NewLetters(pool, WithLimit(5*time.Second))
			ctx := context.Background()
			l := testLetter(url, 1)
			l.Ambiguous = c.ambiguous
			if err := s.PutDeadLetter(ctx, l); err != nil {
				t.Fatal(err)
			}
			claims, err := s.Claim(ctx, "w", 1)
			if err != nil || len(claims) != 1 {
				t.Fatalf("Claim: %d, %v", len(claims), err)
			}
			r, err := s.Redeliver(ctx, claims[0], client, deadletter.TrustKey)
			if hits.Load() != 1 {
				t.Fatalf("the funder got %d requests, want 1", hits.Load())
			}
			_, rec, gerr := s.Get(ctx, l.ID)
			if gerr != nil {
				t.Fatal(gerr)
			}
			if !c.done {
				if err == nil || rec != nil {
					t.Errorf("a refusal: error %v, record %+v; want an error and the letter released", err, rec)
				}
				return
			}
			if err != nil {
				t.Fatalf("Redeliver: %v, want the letter delivered", err)
			}
			if r.Status != http.StatusForbidden || r.Disposition != grantretry.Succeeded || r.Note != alreadyAppliedNote {
				t.Errorf("record %+v, want 403, succeeded, the already-applied note", r)
			}
			if rec == nil || rec.Disposition != grantretry.Succeeded {
				t.Errorf("the letter's stored record %+v, want it done, succeeded", rec)
			}
			if again, err := s.Claim(ctx, "w", 1); err != nil || len(again) != 0 {
				t.Errorf("Claim after the delivery: %d letters, %v; want none", len(again), err)
			}
		})
	}
}
