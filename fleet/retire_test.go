package fleet

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/grantretry/grantretry"
	"github.com/grantretry/grantretry/deadletter"
	"github.com/grantretry/grantretry/trail"
	"github.com/jackc/pgx/v5"
)

func putLetters(t *testing.T, s *Letters, ls ...*grantretry.Letter) {
	t.Helper()
	for _, l := range ls {
		if err := s.PutDeadLetter(context.Background(), l); err != nil {
			t.Fatal(err)
		}
	}
}

func waitingIDs(t *testing.T, s *Letters) []string {
	t.Helper()
	ls, err := s.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, l := range ls {
		ids = append(ids, l.ID)
	}
	return ids
}

func TestLettersRetireTakesTheLetterOutOfTheWaitingSetAndKeepsItsRecord(t *testing.T) {
	pool := newPool(t)
	s := NewLetters(pool, WithLimit(5*time.Second))
	defer s.Close()
	ctx := context.Background()
	keep, gone := testLetter("http://127.0.0.1:1", 1), testLetter("http://127.0.0.1:1", 2)
	putLetters(t, s, keep, gone)
	before := time.Now().Add(-time.Minute) // the database's clock
	r, err := s.RetireWith(ctx, gone.ID, "funder refused: 422", deadletter.RetireOptions{By: "oncall@ops-1"})
	if err != nil {
		t.Fatal(err)
	}
	if got := waitingIDs(t, s); len(got) != 1 || got[0] != keep.ID {
		t.Errorf("List after Retire = %v, want only %s", got, keep.ID)
	}
	if cs, err := s.ClaimIDs(ctx, "w", []string{gone.ID}); err != nil || len(cs) != 0 {
		t.Errorf("ClaimIDs of the retired letter: %d claims, %v", len(cs), err)
	}
	if cs, err := s.Claim(ctx, "w", 10); err != nil || len(cs) != 1 || cs[0].Letter.ID != keep.ID {
		t.Errorf("Claim after Retire: %v, %v; want only %s", cs, err, keep.ID)
	}
	got, err := s.Retirement(ctx, gone.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.RetiredBy != "oncall@ops-1" || got.Reason != "funder refused: 422" || got.Letter.ID != gone.ID ||
		got.Letter.IdempotencyKey != gone.IdempotencyKey || !got.RetiredAt.Equal(r.RetiredAt) || got.RetiredAt.Before(before) {
		t.Errorf("record %+v, returned %+v", got, r)
	}
	all, err := s.Retired(ctx)
	if err != nil || len(all) != 1 || all[0].ID != gone.ID {
		t.Errorf("Retired() = %v, %v", all, err)
	}
	if r, err := s.Retirement(ctx, keep.ID); !errors.Is(err, pgx.ErrNoRows) {
		t.Errorf("Retirement of a waiting letter: %v, %v; want pgx.ErrNoRows", r, err)
	}
}

func TestLettersRetireRefusesWhatItCannotRetire(t *testing.T) {
	pool := newPool(t)
	s := NewLetters(pool, WithLimit(5*time.Second))
	defer s.Close()
	ctx := context.Background()
	l := testLetter("http://127.0.0.1:1", 1)
	putLetters(t, s, l)
	for _, tc := range []struct {
		name, id, reason string
		want             error
	}{
		{"no reason", l.ID, "", grantretry.ErrInvalidRequest},
		{"white space", l.ID, " \t", grantretry.ErrInvalidRequest},
		{"unknown id", "no-such-letter", "refused", pgx.ErrNoRows},
		{"no id", "", "refused", grantretry.ErrInvalidRequest},
	} {
		if err := s.Retire(ctx, tc.id, tc.reason); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	if got := waitingIDs(t, s); len(got) != 1 {
		t.Fatalf("a refused Retire took the letter out: %v", got)
	}
	if err := s.Retire(ctx, l.ID, "first"); err != nil {
		t.Fatal(err)
	}
	if err := s.Retire(ctx, l.ID, "second"); !errors.Is(err, deadletter.ErrRetired) {
		t.Errorf("second Retire: %v, want ErrRetired", err)
	}
	if r, err := s.Retirement(ctx, l.ID); err != nil || r.Reason != "first" {
		t.Errorf("record after a second Retire: %+v, %v", r, err)
	}
}

// A claimed letter is not retired under its worker; released, it is, and
// the old claim then sends nothing.
func TestLettersRetireRefusesAClaimedLetterUntilReleased(t *testing.T) {
	pool := newPool(t)
	f := newFunder(t)
	s := NewLetters(pool, WithLimit(5*time.Second))
	defer s.Close()
	ctx := context.Background()
	l := testLetter(f.srv.URL, 1)
	putLetters(t, s, l)
	cs, err := s.Claim(ctx, "w", 1)
	if err != nil || len(cs) != 1 {
		t.Fatalf("Claim: %d, %v", len(cs), err)
	}
	if err := s.Retire(ctx, l.ID, "refused"); !errors.Is(err, deadletter.ErrInFlight) {
		t.Fatalf("Retire of a claimed letter: %v, want ErrInFlight", err)
	}
	if err := s.Release(ctx, cs[0]); err != nil {
		t.Fatal(err)
	}
	if err := s.Retire(ctx, l.ID, "refused"); err != nil {
		t.Fatalf("Retire after Release: %v", err)
	}
	if _, err := s.Redeliver(ctx, cs[0], f.srv.Client(), nil); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("Redeliver under the old claim: %v, want ErrLeaseLost", err)
	}
	if n := f.counts()[l.IdempotencyKey]; n != 0 {
		t.Errorf("the retired letter was sent %d times", n)
	}
}

// Claim and Retire of one letter at once: exactly one of them takes it.
func TestLettersClaimAndRetireAtOnceExactlyOneWins(t *testing.T) {
	pool := newPool(t)
	s := NewLetters(pool, WithLimit(5*time.Second))
	defer s.Close()
	ctx := context.Background()
	for i := range 40 {
		l := testLetter("http://127.0.0.1:1", i)
		putLetters(t, s, l)
		var wg sync.WaitGroup
		var claims []*Claim
		var claimErr, retireErr error
		start := make(chan struct{})
		wg.Add(2)
		go func() {
			defer wg.Done()
			<-start
			claims, claimErr = s.ClaimIDs(ctx, "w", []string{l.ID})
		}()
		go func() {
			defer wg.Done()
			<-start
			retireErr = s.Retire(ctx, l.ID, "refused")
		}()
		close(start)
		wg.Wait()
		if claimErr != nil {
			t.Fatal(claimErr)
		}
		if retireErr != nil && !errors.Is(retireErr, deadletter.ErrInFlight) {
			t.Fatalf("letter %d: Retire: %v", i, retireErr)
		}
		if claimed, retired := len(claims) == 1, retireErr == nil; claimed == retired {
			t.Fatalf("letter %d: claimed %v, retired %v; want exactly one", i, claimed, retired)
		}
	}
}

// A retired letter whose fallback file is still in the directory stays
// retired through Drain, and its file is removed.
func TestDrainLeavesARetiredLetterRetired(t *testing.T) {
	pool := newPool(t)
	ctx := context.Background()
	dir, err := deadletter.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	s := NewLetters(pool, WithFallback(dir), WithLimit(5*time.Second))
	defer s.Close()
	l := testLetter("http://127.0.0.1:1", 1)
	putLetters(t, s, l)
	if err := s.Retire(ctx, l.ID, "refused"); err != nil {
		t.Fatal(err)
	}
	if err := dir.PutDeadLetter(ctx, l); err != nil {
		t.Fatal(err)
	}
	moved, present, err := s.Drain(ctx)
	if err != nil || moved != 0 || present != 1 {
		t.Fatalf("Drain: moved %d, present %d, %v; want 0, 1, nil", moved, present, err)
	}
	if got := waitingIDs(t, s); len(got) != 0 {
		t.Errorf("waiting after Drain: %v", got)
	}
	if _, err := s.Retirement(ctx, l.ID); err != nil {
		t.Errorf("the retirement after Drain: %v", err)
	}
	if ls, err := dir.List(); err != nil || len(ls) != 0 {
		t.Errorf("the directory after Drain: %d letters, %v", len(ls), err)
	}
}

func TestLettersRetirementLineIsOnTheTrail(t *testing.T) {
	pool := newPool(t)
	s := NewLetters(pool, WithLimit(5*time.Second))
	defer s.Close()
	ctx := context.Background()
	l := testLetter("http://127.0.0.1:1", 1)
	putLetters(t, s, l)
	path := filepath.Join(t.TempDir(), "trail.jsonl")
	tl, err := trail.Open(path, trail.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer tl.Close()
	if _, err := s.RetireWith(ctx, l.ID, "refused: 422", deadletter.RetireOptions{By: "oncall", Trail: tl}); err != nil {
		t.Fatal(err)
	}
	var lines []trail.Record
	if _, err := trail.Read([]string{path, path + ".head"}, func(r trail.Record) error {
		if r.Msg == grantretry.MsgRetired {
			lines = append(lines, r)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(lines) != 1 || lines[0].Fields[grantretry.FieldDeadLetterID] != l.ID ||
		lines[0].Fields[grantretry.FieldSubmissionID] != l.SubmissionID || lines[0].Fields[grantretry.FieldRetiredBy] != "oncall" ||
		lines[0].Fields[grantretry.FieldRetiredReason] != "refused: 422" {
		t.Fatalf("retired lines on the trail: %+v", lines)
	}
}

// A database migrated before letters could be retired gets the columns
// and the widened state from Migrate.
func TestMigrateLetsAnAlreadyMigratedDatabaseRetireLetters(t *testing.T) {
	for _, tc := range []struct{ name, undo string }{
		{"state", `ALTER TABLE grantretry_letters DROP CONSTRAINT grantretry_letters_state_check;
			ALTER TABLE grantretry_letters ADD CONSTRAINT grantretry_letters_state_check CHECK (state IN ('waiting', 'redelivered'))`},
		{"columns", `ALTER TABLE grantretry_letters DROP COLUMN retired_at, DROP COLUMN retired_by, DROP COLUMN retired_reason`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pool := newPool(t)
			ctx := context.Background()
			if _, err := pool.Exec(ctx, tc.undo); err != nil {
				t.Fatal(err)
			}
			s := NewLetters(pool, WithLimit(5*time.Second))
			defer s.Close()
			l := testLetter("http://127.0.0.1:1", 1)
			putLetters(t, s, l)
			if err := s.Retire(ctx, l.ID, "refused"); err == nil {
				t.Fatal("Retire before Migrate succeeded: the test does not test the migration")
			}
			if err := Migrate(ctx, pool); err != nil {
				t.Fatal(err)
			}
			if err := s.Retire(ctx, l.ID, "refused"); err != nil {
				t.Fatalf("Retire after Migrate: %v", err)
			}
		})
	}
}
