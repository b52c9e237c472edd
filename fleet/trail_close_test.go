package fleet

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/grantretry/grantretry"
	"github.com/grantretry/grantretry/trail"
)

// Close commits what was written since the last Sync, as Sync does; after
// it Write, Sync and Err report a closed trail, and a second Close
// returns nil.
func TestTrailCloseCommitsWhatWasWrittenAndRefusesLaterWrites(t *testing.T) {
	pool := newPool(t)
	tr := newTrail(t, pool)
	rec := []byte(`{"ts":"2026-11-30T09:00:00Z","level":"info","msg":"grantretry.attempt","attempt":1}` + "\n")
	if _, err := tr.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := tr.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	sum, err := VerifyTrail(context.Background(), pool)
	if err != nil || sum.Records != 2 || sum.Messages[grantretry.MsgAttempt] != 1 {
		t.Fatalf("after Close the database holds %d records (%v), %v; want the opening record and the one written", sum.Records, sum.Messages, err)
	}
	if _, err := tr.Write(rec); !errors.Is(err, grantretry.ErrAuditTrail) {
		t.Errorf("Write after Close: %v, want an error matching ErrAuditTrail", err)
	}
	if err := tr.Sync(); !errors.Is(err, grantretry.ErrAuditTrail) {
		t.Errorf("Sync after Close: %v, want an error matching ErrAuditTrail", err)
	}
	if err := tr.Err(); !errors.Is(err, grantretry.ErrAuditTrail) {
		t.Errorf("Err after Close: %v, want an error matching ErrAuditTrail", err)
	}
	if err := tr.Close(); err != nil {
		t.Errorf("second Close: %v, want nil", err)
	}
	if sum, _ := VerifyTrail(context.Background(), pool); sum.Records != 2 {
		t.Errorf("the write after Close reached the database: %d records", sum.Records)
	}
}

// Closing a Trail that a failed Sync broke returns that failure; closing
// it again returns nil.
func TestTrailCloseOfABrokenTrailReturnsItsFailure(t *testing.T) {
	pool := newPool(t)
	tr := newTrail(t, pool)
	pool.Close()
	broke := tr.Sync()
	if broke == nil {
		t.Fatal("Sync with the pool closed and no local trail succeeded")
	}
	if err := tr.Close(); !errors.Is(err, broke) {
		t.Errorf("Close of a broken trail: %v, want its failure %v", err, broke)
	}
	if err := tr.Close(); err != nil {
		t.Errorf("second Close: %v, want nil", err)
	}
}

// Close's own commit fails over as Sync's does: with the database gone and
// no local trail it returns the failure, and Err keeps it; with a local
// trail the records go there and Close succeeds.
func TestTrailCloseCommitsLikeSync(t *testing.T) {
	pool := newPool(t)
	tr := newTrail(t, pool)
	pool.Close()
	err := tr.Close()
	if !errors.Is(err, grantretry.ErrAuditTrail) {
		t.Fatalf("Close of a trail whose database is gone: %v, want an error matching ErrAuditTrail", err)
	}
	if !errors.Is(tr.Err(), err) {
		t.Errorf("Err after Close: %v, want the failure Close returned", tr.Err())
	}

	path := filepath.Join(t.TempDir(), "local.jsonl")
	local, err := trail.Open(path, trail.Options{})
	if err != nil {
		t.Fatal(err)
	}
	pool = newPool(t)
	tr = newTrail(t, pool, WithLocalTrail(local))
	pool.Close()
	if err := tr.Close(); err != nil {
		t.Fatalf("Close with a local trail: %v", err)
	}
	if err := local.Close(); err != nil {
		t.Fatal(err)
	}
	sum, err := trail.Verify(path)
	if err != nil || sum.Messages[MsgTrailOpened] != 1 || tr.FellBack() != 1 {
		t.Errorf("the local trail holds %v (%v), %d fell back; want the fleet trail's opening record", sum.Messages, err, tr.FellBack())
	}
}
