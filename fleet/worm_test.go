package fleet

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"testing"
	"time"

	"github.com/grantretry/grantretry/worm"
	"github.com/grantretry/grantretry/worm/s3test"
)

// The fleet's trail ships to write-once storage one writer a stream, and
// the verifier names the writer and seq of a row a superuser edited.
func TestTrailShipsPerWriter(t *testing.T) {
	pool := newPool(t)
	endpoint, bucket := s3test.Endpoint(t)
	defer s3test.Stop() // the one test of the package that uses it
	ctx := context.Background()
	var writers []string
	for _, w := range []string{"writer-a", "writer-b"} {
		tr, err := NewTrail(ctx, pool, WithWriter(w), WithLimit(2*time.Second)) // a loaded machine must not fail the commit over
		if err != nil {
			t.Fatal(err)
		}
		callThrough(t, tr, 5)
		writers = append(writers, tr.Writer())
	}
	var b [6]byte
	rand.Read(b[:])
	st, err := worm.NewStore(ctx, worm.StoreConfig{Endpoint: endpoint, Bucket: bucket, Prefix: "fleet-" + hex.EncodeToString(b[:])})
	if err != nil {
		t.Fatal(err)
	}
	src := NewTrailSource(pool)
	s, err := worm.NewShipper(worm.Options{Store: st, Source: src, QueueDir: t.TempDir(), Retention: 2 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	rep, err := worm.Verify(ctx, st, worm.VerifyOptions{Local: src, MinRetention: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	sum, err := VerifyTrail(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Streams) != 2 || rep.Streams[0].Stream != writers[0] || rep.Streams[1].Stream != writers[1] {
		t.Fatalf("streams %+v, want one per writer %v", rep.Streams, writers)
	}
	for i, r := range rep.Streams {
		if r.LastSeq != sum.Writers[i].LastSeq || r.Local != sum.Writers[i].Records || r.AtRisk != 0 {
			t.Fatalf("stream %+v, want all %d records of %s anchored and equal", r, sum.Writers[i].Records, writers[i])
		}
	}

	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	for _, q := range []string{
		`ALTER TABLE grantretry_trail DISABLE TRIGGER USER`,
		`UPDATE grantretry_trail SET record = replace(record, '"succeeded"', '"abandoned"') WHERE writer = 'writer-b' AND seq = (SELECT min(seq) FROM grantretry_trail WHERE writer = 'writer-b' AND record LIKE '%"succeeded"%')`,
		`ALTER TABLE grantretry_trail ENABLE TRIGGER USER`,
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Skipf("needs a superuser to tamper with the table: %v", err)
		}
	}
	var seq int64
	if err := conn.QueryRow(ctx, `SELECT min(seq) FROM grantretry_trail WHERE writer = 'writer-b' AND record LIKE '%"abandoned"%'`).Scan(&seq); err != nil {
		t.Fatal(err)
	}
	_, err = worm.Verify(ctx, st, worm.VerifyOptions{Local: src, MinRetention: time.Hour})
	var ve *worm.VerifyError
	if !errors.As(err, &ve) {
		t.Fatalf("Verify after an edit: %v, want a *worm.VerifyError", err)
	}
	p := ve.Problems[0]
	if p.Kind != worm.ProblemTampered || p.Stream != "writer-b" || p.Seq != uint64(seq) || p.File != TrailTable {
		t.Fatalf("problem %v, want the edit of writer-b seq %d in %s", p, seq, TrailTable)
	}
}
