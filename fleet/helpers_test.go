package fleet

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/grantretry/grantretry"
	"github.com/grantretry/grantretry/fleet/internal/pgtest"
	"github.com/jackc/pgx/v5/pgxpool"
)

// newPool returns a pool on a new database with the fleet's schema.
func newPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, pgtest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if err := Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	return pool
}

// funder counts the requests it is sent, per Idempotency-Key.
type funder struct {
	mu   sync.Mutex
	seen map[string]int
	srv  *httptest.Server
}

func newFunder(t testing.TB) *funder {
	f := &funder{seen: map[string]int{}}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.seen[r.Header.Get(grantretry.HeaderIdempotencyKey)]++
		f.mu.Unlock()
		w.WriteHeader(http.StatusCreated)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *funder) counts() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	m := make(map[string]int, len(f.seen))
	for k, v := range f.seen {
		m[k] = v
	}
	return m
}

// testLetter is a valid, redeliverable letter to url.
func testLetter(url string, i int) *grantretry.Letter {
	body := []byte(fmt.Sprintf(`{"application":%d}`, i))
	sum := sha256.Sum256(body)
	created := time.Date(2026, 1, 2, 3, 4, 5, i, time.UTC)
	return &grantretry.Letter{
		Version:        grantretry.LetterVersion,
		ID:             fmt.Sprintf("%s-%06d", created.Format("20060102T150405.000000000Z"), i),
		Disposition:    grantretry.DeadLetter,
		StopReason:     grantretry.StopRetriesSpent,
		Method:         http.MethodPost,
		URL:            url + "/submit",
		Body:           body,
		BodySHA256:     hex.EncodeToString(sum[:]),
		BodyBytes:      int64(len(body)),
		IdempotencyKey: fmt.Sprintf("key-%06d", i),
		CorrelationID:  fmt.Sprintf("corr-%06d", i),
		SubmissionID:   fmt.Sprintf("GRANT-%d", i),
		Attempts:       5,
		LastStatus:     503,
		Created:        created,
	}
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

type recorder struct{ *httptest.ResponseRecorder }

func newRecorder() recorder { return recorder{httptest.NewRecorder()} }

func (r recorder) result(req *http.Request) *http.Response {
	resp := r.Result()
	resp.Request = req
	return resp
}

// poolFor, when set, gives newPoolFor a pool shared by a test's processes.
var poolFor func(*testing.T) any

// newPoolOfTwo returns a pool of exactly two connections on a test
// database of its own, and its config.
func newPoolOfTwo(t *testing.T) (*pgxpool.Pool, *pgxpool.Config) {
	t.Helper()
	cfg := newPool(t).Config().Copy()
	cfg.MinConns, cfg.MaxConns = 2, 2
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool, cfg
}

func newPoolFor(t *testing.T) *pgxpool.Pool {
	if poolFor != nil {
		return poolFor(t).(*pgxpool.Pool)
	}
	return newPool(t)
}
