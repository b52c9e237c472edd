package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/grantretry/grantretry"
	"github.com/grantretry/grantretry/internal/operator/storetest"
)

// list prints grantretry's columns and footer over the database: each
// letter's due time, lateness, ambiguity, attempts and last answer, then
// a count of the late, refused, ambiguous and not-due letters;
// -submission lists one submission's letters; -json prints them, late
// first, with their bodies, and "[]" when there are none.
func TestListCountsTheLettersAndPrintsThemWithBodiesAsJSON(t *testing.T) {
	dsn, pool := newDB(t)
	created := time.Now().Add(-time.Hour).Truncate(time.Second).UTC()
	next := time.Now().Add(2 * time.Hour).Truncate(time.Second).UTC()
	url := "https://funder.example/v1/applications"
	plain := storetest.Letter("L-0-plain", url, created)
	refused := storetest.Refused(storetest.Letter("L-1-refused", url, created.Add(time.Millisecond)))
	late := storetest.Late(storetest.Letter("L-2-late", url, created.Add(2*time.Millisecond)), time.Now().Add(-time.Minute).UTC())
	notDue := storetest.NotDue(storetest.Letter("L-3-notdue", url, created.Add(3*time.Millisecond)), next)
	amb := storetest.Ambiguous(storetest.Letter("L-4-ambiguous", url, created.Add(4*time.Millisecond)))
	plain.SubmissionID, refused.SubmissionID = "GRANT-S1", "GRANT-S1"
	putLetters(t, pool, plain, refused, late, notDue, amb)

	code, out, errOut := runCLI("deadletter", "list", "-pg", dsn)
	if code != exitOK {
		t.Fatalf("list: exit %d\n%s%s", code, out, errOut)
	}
	rows := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(rows) != 7 || strings.Join(strings.Fields(rows[0]), " ") != "ID SUBMISSION DUE LATE AMBIGUOUS ATTEMPTS LAST ANSWER CREATED METHOD URL" {
		t.Fatalf("list:\n%s", out)
	}
	for i, want := range [][]string{
		{late.ID, late.SubmissionID, "now", "late", "-", "5", "503"},
		{plain.ID, "GRANT-S1", "now", "-", "-", "5", "503"},
		{refused.ID, "GRANT-S1", "now", "-", "-", "5", "422", "refused"},
		{amb.ID, amb.SubmissionID, "now", "-", "yes", "5", "connection"},
		{notDue.ID, notDue.SubmissionID, next.Format(time.RFC3339), "-", "-", "5", "429"},
	} {
		if got := strings.Fields(rows[i+1]); len(got) < len(want) || strings.Join(got[:len(want)], " ") != strings.Join(want, " ") {
			t.Errorf("row %d %q, want it to begin %q", i+1, rows[i+1], want)
		}
	}
	if want := "5 letters waiting in the database: 1 late, 1 refused, 1 ambiguous, 1 not due (next due at " + next.Format(time.RFC3339) + ")"; rows[6] != want {
		t.Errorf("footer %q, want %q", rows[6], want)
	}

	code, out, errOut = runCLI("deadletter", "list", "-pg", dsn, "-submission", "GRANT-S1")
	if code != exitOK || strings.Count(out, "\n") != 4 || !strings.Contains(out, plain.ID) || !strings.Contains(out, refused.ID) ||
		!strings.HasSuffix(out, "\n2 letters waiting in the database: 1 refused\n") {
		t.Errorf("list -submission GRANT-S1: exit %d\n%s%s", code, out, errOut)
	}

	code, out, errOut = runCLI("deadletter", "list", "-pg", dsn, "-json")
	var got []grantretry.Letter
	if err := json.Unmarshal([]byte(out), &got); code != exitOK || err != nil || len(got) != 5 {
		t.Fatalf("list -json: exit %d, %v\n%s%s", code, err, out, errOut)
	}
	for i, want := range []*grantretry.Letter{late, plain, refused, amb, notDue} {
		if got[i].ID != want.ID || !bytes.Equal(got[i].Body, want.Body) || got[i].IdempotencyKey != want.IdempotencyKey {
			t.Errorf("list -json's letter %d: %s with body %q, want %s with its body %q", i, got[i].ID, got[i].Body, want.ID, want.Body)
		}
	}
	code, out, errOut = runCLI("deadletter", "list", "-pg", dsn, "-json", "-submission", "GRANT-NONE")
	if code != exitOK || out != "[]\n" {
		t.Errorf("list -json of no letter: exit %d, %q%s; want []", code, out, errOut)
	}
}

// show says where a letter went: a letter redelivered shows its answer
// and the worker that sent it; a retired one, who retired it, when and
// why; -json carries the record of either with the letter as stored.
func TestShowSaysWhereALetterWentRedeliveredOrRetired(t *testing.T) {
	dsn, pool := newDB(t)
	f := storetest.NewFunder(t)
	created := time.Now().Add(-time.Hour).Truncate(time.Second).UTC()
	sent := storetest.Letter("L-sent", f.URL+"/v1/applications", created)
	kept := storetest.Letter("L-retired", f.URL+"/v1/applications", created.Add(time.Millisecond))
	putLetters(t, pool, sent, kept)
	if code, out, errOut := runCLI("deadletter", "redeliver", "-pg", dsn, sent.ID, "-worker", "ops-7"); code != exitOK {
		t.Fatalf("redeliver: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, errOut := runCLI("deadletter", "retire", "-pg", dsn, kept.ID, "-reason", "withdrawn by the applicant", "-by", "oncall@ops-1"); code != exitOK {
		t.Fatalf("retire: exit %d\n%s%s", code, out, errOut)
	}

	code, out, errOut := runCLI("deadletter", "show", "-pg", dsn, sent.ID)
	for _, want := range []string{"state ", " redelivered 20", "answered 201 Created (succeeded after 1 attempt); grantretry-fleet deadletter redeliver, by worker ops-7, on the fleet's trail\n"} {
		if code != exitOK || !strings.Contains(out, want) {
			t.Errorf("show of the letter redelivered: exit %d, want %q in\n%s%s", code, want, out, errOut)
		}
	}
	code, out, errOut = runCLI("deadletter", "show", "-pg", dsn, kept.ID)
	for _, want := range []string{"state ", " retired at 20", " by oncall@ops-1: withdrawn by the applicant\n", "GRANT-L-retired"} {
		if code != exitOK || !strings.Contains(out, want) {
			t.Errorf("show of the letter retired: exit %d, want %q in\n%s%s", code, want, out, errOut)
		}
	}

	type shown struct {
		Letter     grantretry.Letter `json:"letter"`
		Redelivery *struct {
			Status int    `json:"status"`
			Note   string `json:"note"`
		} `json:"redelivery"`
		Retirement *struct {
			RetiredAt time.Time `json:"retired_at"`
			RetiredBy string    `json:"retired_by"`
			Reason    string    `json:"reason"`
		} `json:"retirement"`
	}
	var s shown
	code, out, _ = runCLI("deadletter", "show", "-pg", dsn, sent.ID, "-json")
	if err := json.Unmarshal([]byte(out), &s); code != exitOK || err != nil || s.Letter.ID != sent.ID || !bytes.Equal(s.Letter.Body, sent.Body) ||
		s.Redelivery == nil || s.Redelivery.Status != 201 || !strings.HasSuffix(s.Redelivery.Note, "by worker ops-7, on the fleet's trail") || s.Retirement != nil {
		t.Errorf("show -json of the letter redelivered: exit %d, %v\n%s", code, err, out)
	}
	s = shown{}
	code, out, _ = runCLI("deadletter", "show", "-pg", dsn, kept.ID, "-json")
	if err := json.Unmarshal([]byte(out), &s); code != exitOK || err != nil || s.Letter.ID != kept.ID || s.Redelivery != nil ||
		s.Retirement == nil || s.Retirement.RetiredBy != "oncall@ops-1" || s.Retirement.Reason != "withdrawn by the applicant" || s.Retirement.RetiredAt.IsZero() {
		t.Errorf("show -json of the letter retired: exit %d, %v\n%s", code, err, out)
	}
	code, out, errOut = runCLI("deadletter", "show", "-pg", dsn, "L-none")
	if code != exitFailure || errOut != "grantretry-fleet: deadletter: letter L-none: there is no such letter in the database\n" {
		t.Errorf("show of no letter: exit %d\n%s%s", code, out, errOut)
	}
}
