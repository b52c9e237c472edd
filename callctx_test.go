package grantretry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// ctxPair is the call's context beside what it stands for,
// context.WithCancelCause, each over a parent of its own built alike.
type ctxPair struct {
	names    []string
	parents  [2]context.CancelCauseFunc
	ctxs     [2]context.Context
	ends     [2]context.CancelCauseFunc
	children [2][]context.Context
	afters   [2]*int32Counter
	cleanup  []func()
}

type int32Counter struct {
	mu sync.Mutex
	n  int
}

func (c *int32Counter) add() { c.mu.Lock(); c.n++; c.mu.Unlock() }
func (c *int32Counter) get() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

type ctxTestKey struct{}

var errParentCause = errors.New("the caller's cause")

func newCtxPair(deadline time.Time) *ctxPair {
	p := &ctxPair{}
	for i := range 2 {
		var parent context.Context = context.WithValue(context.Background(), ctxTestKey{}, "v")
		if !deadline.IsZero() {
			var stop context.CancelFunc
			parent, stop = context.WithDeadline(parent, deadline)
			p.cleanup = append(p.cleanup, stop)
		}
		parent, p.parents[i] = context.WithCancelCause(parent)
		if i == 0 {
			p.ctxs[0], p.ends[0] = context.WithCancelCause(parent)
		} else {
			c := &call{}
			c.octx.Context = parent
			p.ctxs[1], p.ends[1] = c.callCtx(), c.callCtxEnd
		}
		p.afters[i] = &int32Counter{}
	}
	return p
}

// ctxOps are what may happen to the call's context, in any order.
var ctxOps = []struct {
	name string
	do   func(p *ctxPair, i int)
}{
	{"done", func(p *ctxPair, i int) { _ = p.ctxs[i].Done() }},
	{"value", func(p *ctxPair, i int) { _ = p.ctxs[i].Value(ctxTestKey{}) }},
	{"end-nil", func(p *ctxPair, i int) { p.ends[i](nil) }},
	{"end-deadline", func(p *ctxPair, i int) { p.ends[i](errCallDeadline) }},
	{"parent-cancel", func(p *ctxPair, i int) { p.parents[i](errParentCause) }},
	{"child", func(p *ctxPair, i int) {
		ch, stop := context.WithCancelCause(p.ctxs[i])
		p.children[i] = append(p.children[i], ch)
		p.cleanup = append(p.cleanup, func() { stop(nil) })
	}},
	{"afterfunc", func(p *ctxPair, i int) { context.AfterFunc(p.ctxs[i], p.afters[i].add) }},
}

// same fails unless the two contexts of p look alike now. It never calls
// Done: looking must not be what makes the call's context.
func (p *ctxPair) same(t *testing.T) {
	t.Helper()
	want, got := p.ctxs[0], p.ctxs[1]
	if w, g := want.Err(), got.Err(); w != g {
		t.Fatalf("%v: Err %v, want %v", p.names, g, w)
	}
	if w, g := context.Cause(want), context.Cause(got); w != g {
		t.Fatalf("%v: Cause %v, want %v", p.names, g, w)
	}
	if w, g := want.Value(ctxTestKey{}), got.Value(ctxTestKey{}); w != g {
		t.Fatalf("%v: Value %v, want %v", p.names, g, w)
	}
	wd, wok := want.Deadline()
	gd, gok := got.Deadline()
	if wok != gok || !wd.Equal(gd) {
		t.Fatalf("%v: Deadline %v %v, want %v %v", p.names, gd, gok, wd, wok)
	}
}

// closed reports whether ch is closed. A context's Done closes before its
// cancel function returns, its children's too.
func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// The call's context is made only when something needs it, and until then
// and after it behaves as the context.WithCancelCause it stands for: in
// every order of up to three things done to it, its Err, Cause, Value,
// Deadline, Done, its children and its AfterFuncs are those of the real one.
func TestCallContextIsWithCancelCause(t *testing.T) {
	var seqs [][]int
	var grow func(seq []int)
	grow = func(seq []int) {
		seqs = append(seqs, append([]int(nil), seq...))
		if len(seq) == 3 {
			return
		}
		for op := range ctxOps {
			grow(append(seq, op))
		}
	}
	grow(nil)
	for _, deadline := range []time.Time{{}, time.Now().Add(time.Hour)} {
		for _, seq := range seqs {
			p := newCtxPair(deadline)
			p.same(t)
			for _, op := range seq {
				p.names = append(p.names, ctxOps[op].name)
				for i := range 2 {
					ctxOps[op].do(p, i)
				}
				p.same(t)
			}
			if w, g := closed(p.ctxs[0].Done()), closed(p.ctxs[1].Done()); w != g {
				t.Fatalf("%v: Done closed %v, want %v", p.names, g, w)
			}
			p.same(t)
			for j := range p.children[0] {
				w, g := p.children[0][j], p.children[1][j]
				if cw, cg := closed(w.Done()), closed(g.Done()); cw != cg {
					t.Fatalf("%v: child %d closed %v, want %v", p.names, j, cg, cw)
				}
				if w, g := context.Cause(w), context.Cause(g); w != g {
					t.Fatalf("%v: child %d Cause %v, want %v", p.names, j, g, w)
				}
			}
			// An AfterFunc runs in a goroutine of its own, once the context
			// is done: wait for every one due, and no more.
			want := 0
			if closed(p.ctxs[0].Done()) {
				for _, name := range p.names {
					if name == "afterfunc" {
						want++
					}
				}
			}
			for wait := time.Now().Add(5 * time.Second); ; time.Sleep(100 * time.Microsecond) {
				w, g := p.afters[0].get(), p.afters[1].get()
				if w == want && g == want {
					break
				}
				if time.Now().After(wait) {
					t.Fatalf("%v: %d AfterFuncs ran, want %d (and the real one's %d)", p.names, g, want, w)
				}
			}
			for _, f := range p.cleanup {
				f()
			}
			p.parents[0](nil)
			p.parents[1](nil)
		}
	}
}

// Ending the call's context while other goroutines look at it and derive
// from it: every look after the end sees it ended, with the first cause
// (run with -race).
func TestCallContextEndRacesLooks(t *testing.T) {
	for range 200 {
		c := &call{}
		c.octx.Context = context.Background()
		ctx := c.callCtx()
		var wg sync.WaitGroup
		start := make(chan struct{})
		for g := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				switch g {
				case 0:
					<-ctx.Done()
				case 1:
					ch, cancel := context.WithCancel(ctx)
					defer cancel()
					<-ch.Done()
				case 2:
					for ctx.Err() == nil {
						_ = ctx.Value(ctxTestKey{})
					}
				case 3:
					c.callCtxEnd(nil) // later than the deadline's, or first
				}
			}()
		}
		close(start)
		c.callCtxEnd(errCallDeadline)
		wg.Wait()
		if err := ctx.Err(); err != context.Canceled {
			t.Fatalf("Err %v", err)
		}
		if cause := context.Cause(ctx); cause != errCallDeadline && cause != context.Canceled {
			t.Fatalf("Cause %v", cause)
		}
	}
}

// answerOK is a 200 to r with the body "ok".
func answerOK(r *http.Request) *http.Response {
	return &http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader("ok")), Request: r}
}

// watchless answers at once without looking at the request's context.
type watchless struct{}

func (watchless) RoundTrip(r *http.Request) (*http.Response, error) {
	return answerOK(r), nil
}

// An inner transport that never watches the context costs the call no
// cancellable context; one that does watch it finds it ended when the
// call is over, with the call's deadline as the cause when that is what
// ended it.
func TestCallContextMadeOnlyWhenWatched(t *testing.T) {
	tr := New(watchless{})
	// The first call watches its attempt through httptrace, and learns
	// that this inner transport answers without asking for a connection:
	// the calls after it are not watched.
	req, _ := http.NewRequest(http.MethodGet, "https://funder.example/status", nil)
	if resp, err := tr.RoundTrip(req); err != nil {
		t.Fatal(err)
	} else {
		resp.Body.Close()
	}
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	cc, ok := resp.Request.Context().(*callContext)
	if !ok {
		t.Fatalf("the attempt ran under %T", resp.Request.Context())
	}
	if s := cc.ctxState.Load(); s != ctxFresh {
		t.Fatalf("state %d before the body is closed, want fresh", s)
	}
	resp.Body.Close()
	if s := cc.ctxState.Load(); s != ctxEnded {
		t.Fatalf("state %d after the body is closed, want ended, and no context made", s)
	}
	if err := resp.Request.Context().Err(); err != context.Canceled {
		t.Fatalf("after the call, Err %v", err)
	}

	// Watched: the deadline cuts the attempt in flight through the made
	// context.
	tr = New(roundTripFunc(func(r *http.Request) (*http.Response, error) {
		<-r.Context().Done()
		return nil, fmt.Errorf("inner: %w", context.Cause(r.Context()))
	}), WithBudget(0, 30*time.Millisecond))
	req, _ = http.NewRequest(http.MethodGet, "https://funder.example/status", nil)
	_, err = tr.RoundTrip(req)
	if !errors.Is(err, errCallDeadline) {
		t.Fatalf("err %v, want the call's deadline", err)
	}
}

// Ended twice before anything looks: the first cause stays, as with a
// CancelCauseFunc.
func TestCallContextFirstEndStays(t *testing.T) {
	for _, causes := range [][2]error{{errCallDeadline, nil}, {nil, errCallDeadline}} {
		c := &call{}
		c.octx.Context = context.Background()
		c.callCtxEnd(causes[0])
		c.callCtxEnd(causes[1])
		want := causes[0]
		if want == nil {
			want = context.Canceled
		}
		if got := context.Cause(c.callCtx()); got != want {
			t.Fatalf("ended with %v then %v: Cause %v, want %v", causes[0], causes[1], got, want)
		}
	}
}

// queuedCalls is how many calls tr's deadline queues hold.
func queuedCalls(tr *Transport) int {
	n := 0
	for i := range tr.dl {
		tr.dl[i].mu.Lock()
		n += len(tr.dl[i].q)
		tr.dl[i].mu.Unlock()
	}
	return n
}

// The budget deadline enters a queue only with a watched context, and a
// context watched only through Err is still ended by it: an inner
// transport that polls Err sees the call's deadline shortly after it
// passes, and the queues are empty once the calls are over.
func TestCallDeadlineReachesAnErrPoller(t *testing.T) {
	tr := New(roundTripFunc(func(r *http.Request) (*http.Response, error) {
		limit := time.Now().Add(5 * time.Second)
		for r.Context().Err() == nil {
			if time.Now().After(limit) {
				return nil, errors.New("the call's deadline never reached Err")
			}
			time.Sleep(time.Millisecond)
		}
		return nil, fmt.Errorf("inner: %w", context.Cause(r.Context()))
	}), WithBudget(0, 30*time.Millisecond))
	req, _ := http.NewRequest(http.MethodGet, "https://funder.example/status", nil)
	start := time.Now()
	_, err := tr.RoundTrip(req)
	if !errors.Is(err, errCallDeadline) {
		t.Fatalf("err %v, want the call's deadline", err)
	}
	if took := time.Since(start); took < 30*time.Millisecond {
		t.Fatalf("ended after %v, before the 30 ms deadline", took)
	}
	if n := queuedCalls(tr); n != 0 {
		t.Fatalf("%d calls left in the deadline queues", n)
	}
}

// slowBody is a body whose reader first watches the request's context:
// what net/http's body reader does, after the response is handed back.
type slowBody struct {
	r    *http.Request
	wait time.Duration
	done bool
}

func (b *slowBody) Read(p []byte) (int, error) {
	if b.done {
		return 0, io.EOF
	}
	select {
	case <-b.r.Context().Done():
		return 0, context.Cause(b.r.Context())
	case <-time.After(b.wait):
	}
	b.done = true
	return copy(p, "ok"), nil
}

func (b *slowBody) Close() error { return nil }

// Once the response is handed back, the budget deadline no longer applies:
// a body read that first watches the context after the call returned, and
// lasts past the deadline, is not cut by it; a call whose context is made
// while its attempt is in flight takes its deadline out of the queue when
// it returns.
func TestCallDeadlineOffOnceTheResponseIsHandedBack(t *testing.T) {
	for _, watch := range []bool{false, true} {
		tr := New(roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if watch {
				_ = r.Context().Done()
			}
			return &http.Response{StatusCode: 200, Body: &slowBody{r: r, wait: 60 * time.Millisecond}, Request: r}, nil
		}), WithBudget(0, 20*time.Millisecond))
		req, _ := http.NewRequest(http.MethodGet, "https://funder.example/status", nil)
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		if n := queuedCalls(tr); n != 0 {
			t.Fatalf("watched %v: %d calls queued once the response was handed back", watch, n)
		}
		b, err := io.ReadAll(resp.Body)
		if err != nil || string(b) != "ok" {
			t.Fatalf("watched %v: body %q, %v: the deadline cut a response already handed back", watch, b, err)
		}
		resp.Body.Close()
	}
}

// Printed, the call's context and the contexts derived from it show no
// part of the call: not the caller's headers (a secret among them).
func TestCallContextPrintsNoHeaders(t *testing.T) {
	const secret = "Bearer s3cr3t-t0ken"
	var seen context.Context
	tr := New(roundTripFunc(func(r *http.Request) (*http.Response, error) {
		seen = r.Context()
		return answerOK(r), nil
	}))
	req, _ := http.NewRequest(http.MethodGet, "https://funder.example/status", nil)
	req.Header.Set("Authorization", secret)
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	child, cancel := context.WithCancel(seen)
	defer cancel()
	for _, s := range []string{
		fmt.Sprint(seen), fmt.Sprintf("%+v", seen), fmt.Sprintf("%#v", seen), fmt.Sprint(child),
		fmt.Sprint(context.WithValue(seen, ctxTestKey{}, 1)),
	} {
		if strings.Contains(s, "s3cr3t") {
			t.Fatalf("a printed context shows the Authorization header: %s", s)
		}
	}
}

// An inner transport that never watches the context and answers after the
// call's deadline: nothing cut the attempt, so its answer is the call's
// (dropping it would turn a submission the funder took into a dead letter).
func TestLateAnswerOfAnUnwatchedAttemptIsKept(t *testing.T) {
	tr := New(roundTripFunc(func(r *http.Request) (*http.Response, error) {
		time.Sleep(60 * time.Millisecond)
		return answerOK(r), nil
	}), WithBudget(0, 20*time.Millisecond))
	req, _ := http.NewRequest(http.MethodGet, "https://funder.example/status", nil)
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatalf("err %v, want the late answer", err)
	}
	defer resp.Body.Close()
	if o, _ := OutcomeOf(resp); o.Disposition != Succeeded {
		t.Fatalf("disposition %s, want succeeded", o.Disposition)
	}
	if n := queuedCalls(tr); n != 0 {
		t.Fatalf("%d calls queued", n)
	}
}
