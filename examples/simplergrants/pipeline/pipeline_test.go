package pipeline

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/grantretry/grantretry"
	"github.com/grantretry/grantretry/internal/fakesimpler"
)

// A run names the applications as it is told, and its ledger agrees with
// what the pipeline saw.
func TestRunUnderGivenIDsAgreesWithTheLedger(t *testing.T) {
	ids := []string{"A-1", "A-2", "A-3", "A-4", "A-5", "A-6", "A-7"}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	r, err := Run(ctx, Options{IDs: ids})
	if err != nil {
		t.Fatal(err)
	}
	if p := r.Problems(); len(p) > 0 {
		t.Fatalf("problems: %v", p)
	}
	for i, rec := range r.Records() {
		if rec.Name != ids[i] || rec.Applications != 1 || rec.Submits != 1 {
			t.Errorf("record %d: %+v", i, rec)
		}
	}
	if len(r.Ledger.Submitted) != len(ids) || r.Ledger.Started != len(ids) || r.Ledger.Dropped != 2 {
		t.Errorf("ledger %+v", r.Ledger)
	}
	if _, err := Applications(ids[:3]); err == nil {
		t.Error("three ids for seven applications: no error")
	}
}

// Problems names an application started twice, one never submitted, and
// a call that failed.
func TestProblemsSeeDuplicatesMissesAndFailures(t *testing.T) {
	apps, _ := Applications(nil)
	r := &Result{
		Applications: apps[:2],
		Recorded: []fakesimpler.Application{
			{ID: "x1", Name: apps[0].ID}, {ID: "x2", Name: apps[0].ID}, {ID: "x3", Name: apps[1].ID},
		},
		Ledger: fakesimpler.Ledger{Submitted: map[string]int{"x1": 1}},
		Calls: []Call{{Application: apps[1].ID, What: "submit",
			Outcome: grantretry.Outcome{Disposition: grantretry.FailedTerminal, StopReason: grantretry.StopTerminal}}},
	}
	got := strings.Join(r.Problems(), "; ")
	for _, want := range []string{
		apps[0].ID + ": 2 applications, submitted 1 times",
		apps[1].ID + ": 1 applications, submitted 0 times",
		apps[1].ID + " submit ended failed_terminal",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("problems %q lack %q", got, want)
		}
	}
}
