package deadletter

import (
	"context"
	"errors"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/grantretry/grantretry"
	"github.com/grantretry/grantretry/trail"
)

// countingClient counts the requests that reach its transport, and
// answers each 201.
func countingClient(n *atomic.Int32) *http.Client {
	return &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		n.Add(1)
		return &http.Response{StatusCode: http.StatusCreated, Body: http.NoBody, Request: r}, nil
	})}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func listedIDs(t *testing.T, d *Dir) []string {
	t.Helper()
	ls, err := d.List()
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, l := range ls {
		ids = append(ids, l.ID)
	}
	return ids
}

func TestRetireTakesTheLetterOutOfTheWaitingSetAndKeepsItsRecord(t *testing.T) {
	d := dlOpen(t)
	keep, gone := dlLetter("keep-1", dlT0), dlLetter("gone-1", dlT0.Add(time.Second))
	dlPut(t, d, keep, gone)
	before := time.Now().UTC()
	r, err := d.RetireWith(gone.ID, "funder refused: 422 duplicate application", RetireOptions{By: "oncall@ops-1"})
	if err != nil {
		t.Fatal(err)
	}
	if got := listedIDs(t, d); !reflect.DeepEqual(got, []string{keep.ID}) {
		t.Errorf("List after Retire = %v, want only %s", got, keep.ID)
	}
	if _, err := d.Get(gone.ID); !errors.Is(err, ErrRetired) || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Get of the retired letter: %v, want ErrRetired and fs.ErrNotExist", err)
	}
	if _, err := os.Lstat(filepath.Join(d.Path(), gone.ID+".json")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the waiting file stays: %v", err)
	}
	got, err := d.Retirement(gone.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.RetiredBy != "oncall@ops-1" || got.Reason != "funder refused: 422 duplicate application" || got.ID != gone.ID {
		t.Errorf("record %+v", got)
	}
	if got.RetiredAt.Before(before) || got.RetiredAt.After(time.Now()) || got.RetiredAt.Location() != time.UTC {
		t.Errorf("retired_at %v, want a UTC time during the call", got.RetiredAt)
	}
	if !reflect.DeepEqual(got.Letter, gone) || !reflect.DeepEqual(r, got) {
		t.Errorf("the record's letter is not the letter as it waited:\n got %+v\nwant %+v", got.Letter, gone)
	}
	all, err := d.Retired()
	if err != nil || len(all) != 1 || all[0].ID != gone.ID {
		t.Errorf("Retired() = %v, %v", all, err)
	}
	if fi, err := os.Stat(filepath.Join(d.Path(), RetiredDir)); err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
		t.Errorf("%s: %v, %v; want a directory with 0700", RetiredDir, fi, err)
	}
}

func TestRetireNamesTheOperatingSystemUserByDefault(t *testing.T) {
	d := dlOpen(t)
	dlPut(t, d, dlLetter("who-1", dlT0))
	if err := d.Retire("who-1", "withdrawn by the applicant"); err != nil {
		t.Fatal(err)
	}
	r, err := d.Retirement("who-1")
	if err != nil {
		t.Fatal(err)
	}
	if r.RetiredBy == "" || r.RetiredBy != DefaultRetiredBy() {
		t.Errorf("retired_by %q, want %q", r.RetiredBy, DefaultRetiredBy())
	}
}

func TestRetiredLetterIsNeverRedelivered(t *testing.T) {
	d := dlOpen(t)
	l := dlLetter("never-1", dlT0)
	dlPut(t, d, l)
	if err := d.Retire(l.ID, "refused for good"); err != nil {
		t.Fatal(err)
	}
	var sent atomic.Int32
	resp, err := d.Redeliver(context.Background(), countingClient(&sent), l.ID, TrustKey)
	if !errors.Is(err, ErrRetired) || resp != nil {
		t.Fatalf("Redeliver of a retired letter: %v, %v; want ErrRetired", resp, err)
	}
	if sent.Load() != 0 {
		t.Errorf("%d requests sent", sent.Load())
	}
}

func TestRetireRequiresAReason(t *testing.T) {
	for _, reason := range []string{"", "   ", "\t\n"} {
		d := dlOpen(t)
		dlPut(t, d, dlLetter("why-1", dlT0))
		err := d.Retire("why-1", reason)
		if !errors.Is(err, grantretry.ErrInvalidRequest) {
			t.Errorf("Retire with reason %q: %v, want ErrInvalidRequest", reason, err)
		}
		if got := listedIDs(t, d); len(got) != 1 {
			t.Errorf("reason %q: the letter left the waiting set: %v", reason, got)
		}
		if rs, err := d.Retired(); err != nil || len(rs) != 0 {
			t.Errorf("reason %q: %v, %v retired", reason, rs, err)
		}
	}
}

func TestRetireRefusesUnknownAndUnsafeIDs(t *testing.T) {
	d := dlOpen(t)
	for _, tc := range []struct {
		id   string
		want error
	}{
		{"no-such-letter", fs.ErrNotExist},
		{"../letters/x", ErrBadLetter},
		{"a/b", ErrBadLetter},
		{"", ErrBadLetter},
	} {
		if err := d.Retire(tc.id, "refused"); !errors.Is(err, tc.want) {
			t.Errorf("Retire(%q): %v, want %v", tc.id, err, tc.want)
		}
	}
}

func TestRetireTwiceIsRefusedAndKeepsTheFirstRecord(t *testing.T) {
	d := dlOpen(t)
	dlPut(t, d, dlLetter("twice-1", dlT0))
	if err := d.Retire("twice-1", "first"); err != nil {
		t.Fatal(err)
	}
	if err := d.Retire("twice-1", "second"); !errors.Is(err, ErrRetired) {
		t.Fatalf("second Retire: %v, want ErrRetired", err)
	}
	if r, err := d.Retirement("twice-1"); err != nil || r.Reason != "first" {
		t.Errorf("record after a second Retire: %+v, %v", r, err)
	}
}

func TestRetireRefusesALetterInFlight(t *testing.T) {
	t.Run("marked on disk", func(t *testing.T) {
		d := dlOpen(t)
		dlPut(t, d, dlLetter("fly-1", dlT0))
		if err := d.markSending("fly-1", time.Now()); err != nil {
			t.Fatal(err)
		}
		if err := d.Retire("fly-1", "refused"); !errors.Is(err, ErrInFlight) {
			t.Fatalf("Retire of a letter marked in flight: %v, want ErrInFlight", err)
		}
		if got := listedIDs(t, d); len(got) != 1 {
			t.Errorf("the letter left the waiting set: %v", got)
		}
	})
	t.Run("sent by a call of this Dir", func(t *testing.T) {
		d := dlOpen(t)
		dlPut(t, d, dlLetter("fly-2", dlT0))
		if !d.claim("fly-2") {
			t.Fatal("claim")
		}
		defer d.unclaim("fly-2")
		if err := d.Retire("fly-2", "refused"); !errors.Is(err, ErrInFlight) {
			t.Fatalf("Retire of a letter being redelivered: %v, want ErrInFlight", err)
		}
	})
}

func TestRetireRefusesAReadOnlyDir(t *testing.T) {
	d := dlOpen(t)
	dlPut(t, d, dlLetter("ro-1", dlT0))
	ro, err := OpenReadOnly(d.Path())
	if err != nil {
		t.Fatal(err)
	}
	if err := ro.Retire("ro-1", "refused"); !errors.Is(err, fs.ErrPermission) {
		t.Fatalf("Retire on a read-only Dir: %v, want fs.ErrPermission", err)
	}
}

// A crash between writing the record and removing the waiting file leaves
// both: the retirement wins everywhere, and the next Retire removes the
// leftover. A crash before the record has its name leaves only a
// temporary file: the letter still waits.
func TestRetirementCutShortByACrash(t *testing.T) {
	t.Run("after the record", func(t *testing.T) {
		d := dlOpen(t)
		l := dlLetter("cut-1", dlT0)
		dlPut(t, d, l)
		if err := d.Retire(l.ID, "refused"); err != nil {
			t.Fatal(err)
		}
		dlPut(t, d, l) // the waiting file the crash left
		if got := listedIDs(t, d); len(got) != 0 {
			t.Errorf("List shows %v", got)
		}
		if _, err := d.Get(l.ID); !errors.Is(err, ErrRetired) {
			t.Errorf("Get: %v, want ErrRetired", err)
		}
		var sent atomic.Int32
		if _, err := d.Redeliver(context.Background(), countingClient(&sent), l.ID, TrustKey); !errors.Is(err, ErrRetired) || sent.Load() != 0 {
			t.Errorf("Redeliver: %v, %d sent; want ErrRetired, none", err, sent.Load())
		}
		if err := d.Retire(l.ID, "again"); !errors.Is(err, ErrRetired) {
			t.Errorf("Retire again: %v, want ErrRetired", err)
		}
		if _, err := os.Lstat(filepath.Join(d.Path(), l.ID+".json")); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("the leftover waiting file stays after Retire: %v", err)
		}
	})
	t.Run("before the record", func(t *testing.T) {
		d := dlOpen(t)
		l := dlLetter("cut-2", dlT0)
		dlPut(t, d, l)
		if err := os.Mkdir(filepath.Join(d.Path(), RetiredDir), 0o700); err != nil {
			t.Fatal(err)
		}
		tmp := filepath.Join(d.Path(), RetiredDir, tempPrefix+l.ID+".json-123")
		if err := os.WriteFile(tmp, []byte(`{"id":"cut-2","letter":`), 0o600); err != nil {
			t.Fatal(err)
		}
		if got := listedIDs(t, d); !reflect.DeepEqual(got, []string{l.ID}) {
			t.Errorf("List = %v, want the letter waiting", got)
		}
		if rs, err := d.Retired(); err != nil || len(rs) != 0 {
			t.Errorf("Retired() = %v, %v; want none", rs, err)
		}
		if err := d.Retire(l.ID, "refused"); err != nil {
			t.Errorf("Retire after a cut retirement: %v", err)
		}
	})
}

func TestRetirementLineIsOnTheTrail(t *testing.T) {
	d := dlOpen(t)
	l := dlLetter("line-1", dlT0)
	dlPut(t, d, l)
	path := filepath.Join(t.TempDir(), "trail.jsonl")
	tl, err := trail.Open(path, trail.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer tl.Close()
	r, err := d.RetireWith(l.ID, "refused: 422", RetireOptions{By: "oncall", Trail: tl})
	if err != nil {
		t.Fatal(err)
	}
	var recs []trail.Record
	if _, err := trail.Read([]string{path, path + ".head"}, func(rec trail.Record) error {
		if rec.Msg == grantretry.MsgRetired {
			recs = append(recs, rec)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 {
		t.Fatalf("%d retired lines on the trail, want 1", len(recs))
	}
	want := map[string]string{
		grantretry.FieldDeadLetterID:   l.ID,
		grantretry.FieldSubmissionID:   l.SubmissionID,
		grantretry.FieldCorrelationID:  l.CorrelationID,
		grantretry.FieldIdempotencyKey: l.IdempotencyKey,
		grantretry.FieldRetiredBy:      "oncall",
		grantretry.FieldRetiredReason:  "refused: 422",
		grantretry.FieldHost:           "funder.example",
		grantretry.FieldPath:           "/v1/applications",
	}
	for k, v := range want {
		if got, _ := recs[0].Fields[k].(string); got != v {
			t.Errorf("%s = %q, want %q", k, got, v)
		}
	}
	if !recs[0].Time.Equal(r.RetiredAt) {
		t.Errorf("line at %v, retired at %v", recs[0].Time, r.RetiredAt)
	}
}

// A retirement record that does not read still keeps its letter out of
// the waiting set, and Retired reports it as a bad letter.
func TestUnreadableRetirementStillKeepsTheLetterOut(t *testing.T) {
	d := dlOpen(t)
	l := dlLetter("bad-1", dlT0)
	dlPut(t, d, l)
	if err := d.Retire(l.ID, "refused"); err != nil {
		t.Fatal(err)
	}
	dlPut(t, d, l)
	if err := os.WriteFile(filepath.Join(d.Path(), RetiredDir, l.ID+".json"), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := listedIDs(t, d); len(got) != 0 {
		t.Errorf("List shows %v", got)
	}
	var sent atomic.Int32
	if _, err := d.Redeliver(context.Background(), countingClient(&sent), l.ID, TrustKey); !errors.Is(err, ErrRetired) || sent.Load() != 0 {
		t.Errorf("Redeliver: %v, %d sent; want ErrRetired, none", err, sent.Load())
	}
	if rs, err := d.Retired(); len(rs) != 0 || !errors.Is(err, ErrBadLetter) {
		t.Errorf("Retired() = %v, %v; want none and ErrBadLetter", rs, err)
	}
}
