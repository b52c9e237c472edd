package letterstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/grantretry/grantretry"
	"github.com/grantretry/grantretry/deadletter"
	"github.com/grantretry/grantretry/fleet"
	"github.com/grantretry/grantretry/fleet/internal/pgtest"
	"github.com/grantretry/grantretry/internal/operator"
	"github.com/jackc/pgx/v5/pgxpool"
)

// newLetters returns the fleet's letters on a new database, and its pool.
func newLetters(t *testing.T, opts ...fleet.Option) (*fleet.Letters, *pgxpool.Pool) {
	t.Helper()
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, pgtest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if err := fleet.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	l := fleet.NewLetters(pool, append([]fleet.Option{fleet.WithLimit(5 * time.Second)}, opts...)...)
	t.Cleanup(l.Close)
	return l, pool
}

// funder is a loopback funder that answers each request with status,
// and counts the requests per Idempotency-Key.
type funder struct {
	srv *httptest.Server

	mu     sync.Mutex
	status int
	seen   map[string]int
}

func newFunder(t *testing.T, status int) *funder {
	f := &funder{status: status, seen: map[string]int{}}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.seen[r.Header.Get(grantretry.HeaderIdempotencyKey)]++
		status := f.status
		f.mu.Unlock()
		w.WriteHeader(status)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *funder) sent(l *grantretry.Letter) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.seen[l.IdempotencyKey]
}

func (f *funder) total() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.seen {
		n += c
	}
	return n
}

type instantClock struct{}

func (instantClock) Now() time.Time                                   { return time.Now() }
func (instantClock) Sleep(ctx context.Context, _ time.Duration) error { return ctx.Err() }

// client is a grantretry client that redelivers without retries and
// without sleeping.
func client(t *testing.T) *http.Client {
	tr := grantretry.New(nil, grantretry.WithClock(instantClock{}), grantretry.WithBudget(0, time.Minute))
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// letter is a valid, redeliverable letter to url.
func letter(url string, i int) *grantretry.Letter {
	body := []byte(fmt.Sprintf(`{"application":%d}`, i))
	sum := sha256.Sum256(body)
	created := time.Date(2026, 1, 2, 3, 4, 5, i, time.UTC)
	return &grantretry.Letter{
		Version:        grantretry.LetterVersion,
		ID:             fmt.Sprintf("%s-%06d", created.Format("20060102T150405.000000000Z"), i),
		Disposition:    grantretry.DeadLetter,
		StopReason:     grantretry.StopRetriesSpent,
		Reason:         "transient:503",
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

func put(t *testing.T, l *fleet.Letters, letters ...*grantretry.Letter) {
	t.Helper()
	for _, x := range letters {
		if err := l.PutDeadLetter(context.Background(), x); err != nil {
			t.Fatal(err)
		}
	}
}

const note = "grantretry-fleet deadletter redeliver, by worker w1"

func TestWhere(t *testing.T) {
	l, _ := newLetters(t)
	if got := New(l, "w1").Where(); got != "in the database" {
		t.Errorf("Where() = %q, want %q", got, "in the database")
	}
}

// Waiting lists the letters that wait; Find finds each letter in its
// state: waiting, redelivered (with its record and note), retired (with
// its record), or none such (fs.ErrNotExist).
func TestWaitingAndFind(t *testing.T) {
	l, _ := newLetters(t)
	f := newFunder(t, http.StatusCreated)
	s := New(l, "w1")
	ctx := context.Background()
	waiting, sent, retired := letter(f.srv.URL, 1), letter(f.srv.URL, 2), letter(f.srv.URL, 3)
	put(t, l, waiting, sent, retired)
	if _, err := s.Send(ctx, sent, client(t), nil, note); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Retire(ctx, retired.ID, "withdrawn by the applicant", deadletter.RetireOptions{By: "ops"}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Waiting(ctx)
	if err != nil || len(got) != 1 || got[0].ID != waiting.ID {
		t.Fatalf("Waiting: %v, %v; want only %s", got, err, waiting.ID)
	}

	w, err := s.Find(ctx, waiting.ID)
	if err != nil || w.Letter == nil || w.Letter.ID != waiting.ID || w.Redelivery != nil || w.Retirement != nil {
		t.Errorf("Find of a waiting letter: %+v, %v", w, err)
	}
	r, err := s.Find(ctx, sent.ID)
	if err != nil || r.Letter == nil || r.Redelivery == nil || r.Redelivery.Status != http.StatusCreated || r.Redelivery.Note != note || r.Retirement != nil {
		t.Errorf("Find of a redelivered letter: %+v, %v; want its record, answered 201, with the note", r, err)
	}
	x, err := s.Find(ctx, retired.ID)
	if err != nil || x.Letter == nil || x.Letter.ID != retired.ID || x.Retirement == nil || x.Retirement.RetiredBy != "ops" ||
		x.Retirement.Reason != "withdrawn by the applicant" || x.Redelivery != nil {
		t.Errorf("Find of a retired letter: %+v, %v; want its retirement", x, err)
	}
	_, err = s.Find(ctx, "20260102T030405.000000000Z-999999")
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "there is no such letter in the database") {
		t.Errorf("Find of no letter: %v; want fs.ErrNotExist, saying there is no such letter", err)
	}
}

// A letter delivered leaves the waiting set, with its record; Sent says
// so, with the note after Redeliver's own.
func TestSendDelivered(t *testing.T) {
	l, _ := newLetters(t)
	f := newFunder(t, http.StatusCreated)
	s := New(l, "w1")
	ctx := context.Background()
	plain, asked := letter(f.srv.URL, 1), letter(f.srv.URL, 2)
	asked.Ambiguous = true
	put(t, l, plain, asked)
	got, err := s.Send(ctx, plain, client(t), nil, note)
	if err != nil || !got.Delivered || got.Record.Status != http.StatusCreated || got.Record.Note != note || got.Letter != nil {
		t.Fatalf("Send: %+v, %v; want delivered, answered 201, with the note", got, err)
	}
	found := func(context.Context, grantretry.ReconcileQuery) (*http.Response, error) {
		return &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Body: http.NoBody}, nil
	}
	got, err = s.Send(ctx, asked, client(t), found, note)
	if want := operator.ReconciledNote + "; " + note; err != nil || !got.Delivered || got.Record.Note != want {
		t.Fatalf("Send of a letter the reconciler found: %+v, %v; want delivered, noted %q", got, err, want)
	}
	if f.sent(plain) != 1 || f.sent(asked) != 0 {
		t.Errorf("the funder was sent the letter %d times and the reconciled one %d; want 1 and 0", f.sent(plain), f.sent(asked))
	}
	left, err := s.Waiting(ctx)
	if err != nil || len(left) != 0 {
		t.Errorf("Waiting after both were delivered: %v, %v; want none", left, err)
	}
}

// An answer that does not deliver the letter is no error: Sent has the
// answer, Delivered is false, and Letter is the letter as the send left
// it, still waiting: a 422 is a refusal, a 503 is not.
func TestSendAnsweredNotDelivered(t *testing.T) {
	for _, tc := range []struct {
		status  int
		reason  string
		refused bool
	}{
		{http.StatusUnprocessableEntity, "terminal:422", true},
		{http.StatusServiceUnavailable, "transient:503", false},
	} {
		t.Run(fmt.Sprint(tc.status), func(t *testing.T) {
			l, _ := newLetters(t)
			f := newFunder(t, tc.status)
			s := New(l, "w1")
			ctx := context.Background()
			x := letter(f.srv.URL, 1)
			x.LastStatus, x.Reason = http.StatusBadGateway, "transient:502"
			put(t, l, x)
			got, err := s.Send(ctx, x, client(t), nil, note)
			if err != nil || got.Delivered || got.Record.Status != tc.status || got.Letter == nil {
				t.Fatalf("Send: %+v, %v; want answered %d, not delivered, no error, the letter", got, err, tc.status)
			}
			if got.Letter.Attempts != x.Attempts+1 || got.Letter.LastStatus != tc.status || got.Letter.Reason != tc.reason ||
				deadletter.Refused(got.Letter) != tc.refused || got.Letter.LastAttempt.IsZero() {
				t.Errorf("the letter after the send: attempts %d, last status %d, reason %q, refused %v, last attempt %v; want %d, %d, %q, %v, the send's",
					got.Letter.Attempts, got.Letter.LastStatus, got.Letter.Reason, deadletter.Refused(got.Letter), got.Letter.LastAttempt,
					x.Attempts+1, tc.status, tc.reason, tc.refused)
			}
			fnd, err := s.Find(ctx, x.ID)
			if err != nil || fnd.Redelivery != nil || fnd.Retirement != nil || fnd.Letter.Reason != tc.reason {
				t.Errorf("Find after the send: %+v, %v; want it waiting, with the new verdict", fnd, err)
			}
			if f.sent(x) != 1 {
				t.Errorf("the funder was sent the letter %d times, want 1", f.sent(x))
			}
		})
	}
}

// A letter not due, late, or ambiguous with no reconciler is not sent,
// and the error says so as Redeliver's does; the letter is left waiting
// and can be claimed again at once. SendEarly sends the one not due.
func TestSendRefusedBeforeSending(t *testing.T) {
	l, _ := newLetters(t)
	f := newFunder(t, http.StatusCreated)
	s := New(l, "w1")
	ctx := context.Background()
	notYet, late, ambiguous := letter(f.srv.URL, 1), letter(f.srv.URL, 2), letter(f.srv.URL, 3)
	notYet.NotBefore = time.Now().Add(time.Hour).UTC()
	late.DueBy = time.Now().Add(-time.Hour).UTC()
	ambiguous.Ambiguous = true
	put(t, l, notYet, late, ambiguous)
	for _, tc := range []struct {
		l    *grantretry.Letter
		want error
	}{{notYet, deadletter.ErrNotYet}, {late, deadletter.ErrLate}, {ambiguous, deadletter.ErrAmbiguous}} {
		_, err := s.Send(ctx, tc.l, client(t), nil, note)
		if !errors.Is(err, tc.want) || errors.Is(err, operator.ErrElsewhere) || !strings.Contains(err.Error(), tc.l.ID) {
			t.Errorf("Send of %s: %v; want an error naming it that matches %v", tc.l.ID, err, tc.want)
		}
		if f.sent(tc.l) != 0 {
			t.Errorf("the funder was sent %s", tc.l.ID)
		}
		if c, err := l.ClaimIDs(ctx, "w2", []string{tc.l.ID}); err != nil || len(c) != 1 {
			t.Errorf("%s was not released: ClaimIDs %d, %v", tc.l.ID, len(c), err)
		} else if err := l.Release(ctx, c[0]); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.Send(deadletter.SendEarly(ctx), notYet, client(t), nil, note)
	if err != nil || !got.Delivered || f.sent(notYet) != 1 {
		t.Errorf("Send of the letter not due with SendEarly: %+v, %v, sent %d times; want delivered once", got, err, f.sent(notYet))
	}
}

// A send that ends in the Transport's error is that error, not another's;
// the letter waits with the attempt written into it.
func TestSendTransportError(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String()
	ln.Close() // nothing listens
	l, _ := newLetters(t)
	s := New(l, "w1")
	x := letter(url, 1)
	put(t, l, x)
	got, err := s.Send(context.Background(), x, client(t), nil, note)
	var gerr *grantretry.Error
	if !errors.As(err, &gerr) || errors.Is(err, operator.ErrElsewhere) || got.Delivered {
		t.Fatalf("Send to a closed port: %+v, %v; want the Transport's error", got, err)
	}
	if got.Letter == nil || got.Letter.Attempts != x.Attempts+gerr.Attempts || got.Letter.LastStatus != 0 || got.Letter.LastError == "" {
		t.Errorf("the letter after the send: %+v; want %d attempts and the error as the last", got.Letter, x.Attempts+gerr.Attempts)
	}
}

// A letter that is another's (another worker holds its lease; it was
// redelivered, retired or removed since it was listed) is not sent, and
// the error says why and matches operator.ErrElsewhere.
func TestSendElsewhere(t *testing.T) {
	l, pool := newLetters(t)
	f := newFunder(t, http.StatusCreated)
	s := New(l, "w1")
	ctx := context.Background()
	leased, redelivered, retired, removed := letter(f.srv.URL, 1), letter(f.srv.URL, 2), letter(f.srv.URL, 3), letter(f.srv.URL, 4)
	put(t, l, leased, redelivered, retired, removed)
	listed, err := s.Waiting(ctx)
	if err != nil || len(listed) != 4 {
		t.Fatalf("Waiting: %d, %v", len(listed), err)
	}
	if c, err := l.ClaimIDs(ctx, "w2", []string{leased.ID}); err != nil || len(c) != 1 {
		t.Fatalf("ClaimIDs: %d, %v", len(c), err)
	}
	if _, err := New(l, "w2").Send(ctx, redelivered, client(t), nil, "by w2"); err != nil {
		t.Fatal(err)
	}
	if _, err := l.RetireWith(ctx, retired.ID, "a duplicate", deadletter.RetireOptions{By: "ops"}); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `DELETE FROM grantretry_letters WHERE id = $1`, removed.ID); err != nil {
		t.Fatal(err)
	}
	before := f.total()
	for _, tc := range []struct {
		l   *grantretry.Letter
		why string
	}{
		{leased, "another worker holds its lease"},
		{redelivered, "it was redelivered since it was listed"},
		{retired, "it was retired since it was listed"},
		{removed, "it is no longer in the database"},
	} {
		got, err := s.Send(ctx, tc.l, client(t), nil, note)
		if !errors.Is(err, operator.ErrElsewhere) || !strings.Contains(err.Error(), tc.why) || !strings.Contains(err.Error(), tc.l.ID) || got.Delivered {
			t.Errorf("Send of %s: %+v, %v; want ErrElsewhere, saying %q", tc.l.ID, got, err, tc.why)
		}
	}
	if n := f.total() - before; n != 0 {
		t.Errorf("the funder was sent %d requests for letters that were another's", n)
	}
}

// A claim whose lease ended before its send was confirmed sends nothing;
// the error matches fleet.ErrLeaseLost and operator.ErrElsewhere.
func TestSendLeaseLost(t *testing.T) {
	l, _ := newLetters(t, fleet.WithLease(time.Microsecond)) // ended before Redeliver confirms it
	f := newFunder(t, http.StatusCreated)
	s := New(l, "w1")
	x := letter(f.srv.URL, 1)
	put(t, l, x)
	_, err := s.Send(context.Background(), x, client(t), nil, note)
	if !errors.Is(err, fleet.ErrLeaseLost) || !errors.Is(err, operator.ErrElsewhere) {
		t.Errorf("Send under a lease that ended: %v; want ErrLeaseLost and ErrElsewhere", err)
	}
	if f.sent(x) != 0 {
		t.Errorf("the funder was sent the letter %d times, want never", f.sent(x))
	}
}

// Retire retires a waiting letter; one that does not wait (none such,
// redelivered, retired) is refused with an error matching fs.ErrNotExist
// that says which; one leased to a worker, or given no reason, is refused
// as RetireWith refuses it.
func TestRetire(t *testing.T) {
	l, _ := newLetters(t)
	f := newFunder(t, http.StatusCreated)
	s := New(l, "w1")
	ctx := context.Background()
	x, sent, leased := letter(f.srv.URL, 1), letter(f.srv.URL, 2), letter(f.srv.URL, 3)
	put(t, l, x, sent, leased)
	r, err := s.Retire(ctx, x.ID, "withdrawn by the applicant", deadletter.RetireOptions{By: "ops"})
	if err != nil || r == nil || r.ID != x.ID || r.RetiredBy != "ops" || r.Reason != "withdrawn by the applicant" || r.Letter == nil {
		t.Fatalf("Retire: %+v, %v", r, err)
	}
	if _, err := s.Send(ctx, sent, client(t), nil, note); err != nil {
		t.Fatal(err)
	}
	if c, err := l.ClaimIDs(ctx, "w2", []string{leased.ID}); err != nil || len(c) != 1 {
		t.Fatalf("ClaimIDs: %d, %v", len(c), err)
	}
	for _, tc := range []struct {
		id       string
		notExist bool
		is       error
		says     string
	}{
		{"20260102T030405.000000000Z-999999", true, nil, "there is no such letter in the database"},
		{x.ID, true, deadletter.ErrRetired, "it was retired at"},
		{sent.ID, true, nil, "it was redelivered"},
		{leased.ID, false, deadletter.ErrInFlight, "worker w2 holds it"},
	} {
		r, err := s.Retire(ctx, tc.id, "a reason", deadletter.RetireOptions{})
		if r != nil || err == nil || errors.Is(err, fs.ErrNotExist) != tc.notExist || (tc.is != nil && !errors.Is(err, tc.is)) ||
			!strings.Contains(err.Error(), tc.says) || !strings.HasPrefix(err.Error(), "grantretry:") {
			t.Errorf("Retire of %s: %+v, %v; want fs.ErrNotExist %v, matching %v, saying %q", tc.id, r, err, tc.notExist, tc.is, tc.says)
		}
	}
	if _, err := s.Retire(ctx, leased.ID, " ", deadletter.RetireOptions{}); !errors.Is(err, grantretry.ErrInvalidRequest) {
		t.Errorf("Retire with no reason: %v; want ErrInvalidRequest", err)
	}
}

// Two workers, each a Store on the same letters, sending the same 50
// letters at once, send each at most once: every letter is delivered by
// one of them, and the other is told it is another's.
func TestTwoWorkersSendEachLetterOnce(t *testing.T) {
	l, _ := newLetters(t)
	f := newFunder(t, http.StatusCreated)
	ctx := context.Background()
	const n = 50
	var letters []*grantretry.Letter
	for i := range n {
		letters = append(letters, letter(f.srv.URL, i))
	}
	put(t, l, letters...)
	var (
		mu                   sync.Mutex
		delivered, elsewhere int
		others               []error
		wg                   sync.WaitGroup
	)
	for w, worker := range []string{"w1", "w2"} {
		s := New(l, worker)
		c := client(t)
		for g := range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range n {
					x := letters[(i+g*17)%n]
					if w == 1 {
						x = letters[n-1-(i+g*17)%n]
					}
					got, err := s.Send(ctx, x, c, nil, "by "+worker)
					mu.Lock()
					switch {
					case err == nil && got.Delivered:
						delivered++
					case errors.Is(err, operator.ErrElsewhere):
						elsewhere++
					default:
						others = append(others, fmt.Errorf("%s: %+v, %v", worker, got, err))
					}
					mu.Unlock()
				}
			}()
		}
	}
	wg.Wait()
	for _, err := range others {
		t.Errorf("a send neither delivered nor another's: %v", err)
	}
	if delivered != n || elsewhere != 5*n {
		t.Errorf("%d delivered and %d another's, of %d sends; want %d and %d", delivered, elsewhere, 6*n, n, 5*n)
	}
	for _, x := range letters {
		if got := f.sent(x); got != 1 {
			t.Errorf("letter %s was sent %d times, want once", x.ID, got)
		}
	}
}
