package main

import (
	"bytes"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/grantretry/grantretry/deadletter"
	"github.com/grantretry/grantretry/internal/operator/storetest"
)

// A backlog of 1,000 letters, to a funder that has recovered, is
// delivered in one "redeliver -all -rate 200/s" run: every letter that is
// due, unambiguous, unrefused and in time is delivered once, none of the
// others is sent, the summary counts them, and the run keeps the pace.
func TestDeadLetterRedeliverAllDeliversABacklogOfAThousandOnceAtItsRate(t *testing.T) {
	if testing.Short() {
		t.Skip("a backlog of 1,000 letters at 200 a second")
	}
	f := storetest.NewFunder(t)
	base := t.TempDir()
	dir, path := filepath.Join(base, "letters"), filepath.Join(base, "trail.jsonl")
	d, err := deadletter.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	b := storetest.NewBacklog(t, f.URL+"/v1/applications")
	for _, l := range b.All {
		if err := d.PutDeadLetter(t.Context(), l); err != nil {
			t.Fatal(err)
		}
	}

	const rate = 200
	var stdout, stderr bytes.Buffer
	start := time.Now()
	code := run([]string{"deadletter", "redeliver", dir, "-all", "-rate", fmt.Sprintf("%d/s", rate), "-trail", path}, &stdout, &stderr)
	took := time.Since(start)
	if code != exitOK {
		t.Fatalf("redeliver -all -rate: exit %d\n%s", code, stderr.String())
	}
	b.CheckRun(t, f, stdout.String(), stderr.String(), took, rate)
	waiting, err := d.List()
	if err != nil || len(waiting) != len(b.Others) {
		t.Errorf("%d letters waiting (%v), want the %d left", len(waiting), err, len(b.Others))
	}
}
