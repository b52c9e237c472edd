package main

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/grantretry/grantretry"
	"github.com/grantretry/grantretry/deadletter"
	"github.com/grantretry/grantretry/fleet"
)

// A letter the funder refused, retired with its line on the fleet's
// trail: audit trace -submission ends with the retirement, who and why.
func TestAuditTraceEndsWithTheRetirement(t *testing.T) {
	dsn, pool := newDB(t)
	f := newToolFunder(t, 0, http.StatusUnprocessableEntity)
	l := testLetter(f.srv.URL, 0, false)
	l.SubmissionID = "GRANT-88"
	putLetters(t, pool, l)
	if code, out, errOut := runCLI("deadletter", "redeliver", "-pg", dsn, l.ID); code == exitOK {
		t.Fatalf("redeliver of a refused letter: exit 0\n%s%s", out, errOut)
	}
	ctx := context.Background()
	tr, err := fleet.NewTrail(ctx, pool, fleet.WithLimit(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	s := fleet.NewLetters(pool, fleet.WithLimit(5*time.Second))
	defer s.Close()
	if _, err := s.RetireWith(ctx, l.ID, "refused-422", deadletter.RetireOptions{By: "oncall", Trail: tr}); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI("audit", "trace", "-pg", dsn, "-submission", "GRANT-88")
	if code != exitOK {
		t.Fatalf("trace: exit %d\n%s%s", code, out, errOut)
	}
	var rows []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if strings.Contains(line, "grantretry.") {
			rows = append(rows, line)
		}
	}
	if len(rows) < 2 || !strings.Contains(rows[0], grantretry.MsgAttempt) {
		t.Fatalf("trace shows %d rows, want the redelivery's then the retirement:\n%s", len(rows), out)
	}
	last := rows[len(rows)-1]
	for _, want := range []string{grantretry.MsgRetired, "dead_letter_id=" + l.ID, "retired_by=oncall", "retired_reason=refused-422"} {
		if !strings.Contains(last, want) {
			t.Errorf("the last row %q does not say %q:\n%s", last, want, out)
		}
	}
}
