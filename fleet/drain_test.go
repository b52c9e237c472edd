package fleet

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/grantretry/grantretry"
	"github.com/grantretry/grantretry/deadletter"
)

// A letter in both places (an insert whose fate was unknown committed
// beside its fallback file) is drained without a second row, and not sent
// again though it was redelivered from the database meanwhile; a letter
// only in the directory is moved in and sent once.
func TestDrainMovesFallbackLettersInOnceAndSendsNoneTwice(t *testing.T) {
	pool := newPool(t)
	f := newFunder(t)
	ctx := context.Background()
	dir, err := deadletter.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	s := NewLetters(pool, WithFallback(dir))
	defer s.Close()
	both, only := testLetter(f.srv.URL, 1), testLetter(f.srv.URL, 2)
	if err := s.PutDeadLetter(ctx, both); err != nil {
		t.Fatal(err)
	}
	for _, l := range []*grantretry.Letter{both, only} {
		if err := dir.PutDeadLetter(ctx, l); err != nil {
			t.Fatal(err)
		}
	}
	redeliverWaiting := func() {
		t.Helper()
		claims, err := s.Claim(ctx, "worker", 10)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range claims {
			if _, err := s.Redeliver(ctx, c, f.srv.Client(), nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	redeliverWaiting() // both, from the database
	moved, present, err := s.Drain(ctx)
	if err != nil || moved != 1 || present != 1 {
		t.Fatalf("Drain: moved %d, present %d, %v; want 1, 1, nil", moved, present, err)
	}
	if ls, err := dir.List(); err != nil || len(ls) != 0 {
		t.Fatalf("the directory after Drain: %d letters, %v; want none", len(ls), err)
	}
	redeliverWaiting() // only
	seen := f.counts()
	for _, l := range []*grantretry.Letter{both, only} {
		if n := seen[l.IdempotencyKey]; n != 1 {
			t.Errorf("letter %s sent %d times, want once", l.ID, n)
		}
	}
	if _, r, err := s.Get(ctx, only.ID); err != nil || r == nil {
		t.Errorf("Get %s after its redelivery: %+v, %v", only.ID, r, err)
	}
}

// A fallback directory that is gone (removed or renamed since it was
// opened) is an error matching fs.ErrNotExist, with nothing counted, and
// Drain does not create it again.
func TestDrainOfAMissingFallbackDirectoryIsAnErrorAndCreatesNothing(t *testing.T) {
	pool := newPool(t)
	path := filepath.Join(t.TempDir(), "fallback")
	dir, err := deadletter.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(path); err != nil {
		t.Fatal(err)
	}
	s := NewLetters(pool, WithFallback(dir))
	defer s.Close()
	moved, present, err := s.Drain(context.Background())
	if !errors.Is(err, fs.ErrNotExist) || moved != 0 || present != 0 {
		t.Errorf("Drain: moved %d, present %d, %v; want 0, 0 and an error matching fs.ErrNotExist", moved, present, err)
	}
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Drain created the missing directory: %v", err)
	}
}
