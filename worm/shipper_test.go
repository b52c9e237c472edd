package worm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/grantretry/grantretry"
	"github.com/grantretry/grantretry/trail"
	"github.com/grantretry/grantretry/worm/s3test"
)

// waitFor waits, in real time, for the shipper's goroutines to reach a
// state: a synchronisation, not a timed assertion.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func (s *Shipper) idle() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.queue) == 0 && len(s.heartbeats) == 0
}

func (s *Shipper) anchoredSeq(stream string) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.anchored[stream].seq
}

func openLive(t *testing.T) (*trail.Trail, string) {
	t.Helper()
	live := filepath.Join(t.TempDir(), "audit.jsonl")
	tr, err := trail.Open(live, trail.Options{MaxFileSize: 6 << 10})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr, live
}

// A segment is anchored at most the age bound and a second after its
// first record was written, on the injected clock.
func TestSealToAnchorLagIsAgePlusOneSecond(t *testing.T) {
	st := testStore(t)
	tr, live := openLive(t)
	clock := newManualClock()
	src, _ := FollowFiles("", live)
	s, err := NewShipper(Options{Store: st, Source: src, QueueDir: t.TempDir(), Clock: clock, Retention: testRetention})
	if err != nil {
		t.Fatal(err)
	}
	type anchor struct {
		first, last uint64
		at          time.Time
	}
	var mu sync.Mutex
	var anchors []anchor
	s.anchoredHook = func(q *queued, at time.Time) {
		mu.Lock()
		anchors = append(anchors, anchor{q.first, q.last, at})
		mu.Unlock()
	}
	s.Start()
	defer s.Close(context.Background())
	step := func() {
		clock.Advance(100 * time.Millisecond)
		waitFor(t, "the shipper to finish its step", func() bool { return clock.Sleepers() == 1 && s.idle() })
	}
	step() // the opening records and the first heartbeat
	for len(anchors) == 0 {
		step()
	}
	written := clock.Now()
	writeRecords(t, tr, 0, 3)
	for {
		step()
		mu.Lock()
		n := len(anchors)
		mu.Unlock()
		if n == 2 {
			break
		}
		if clock.Now().Sub(written) > 2*DefaultSegmentAge {
			t.Fatal("the segment was not anchored in twice the age bound")
		}
	}
	a := anchors[1]
	lag := a.at.Sub(written)
	if a.last-a.first != 2 || lag < DefaultSegmentAge || lag > DefaultSegmentAge+time.Second {
		t.Fatalf("segment seq %d to %d anchored %s after its first record was written; want the three records, within %s and a second",
			a.first, a.last, lag, DefaultSegmentAge)
	}
}

// proxy forwards loopback TCP to a server until it is switched off: an
// outage of the store the shipper cannot tell from a real one.
type proxy struct {
	addr, target string
	mu           sync.Mutex
	l            net.Listener
	conns        map[net.Conn]bool
}

func newProxy(t testing.TB, target string) *proxy {
	p := &proxy{addr: s3test.FreeAddr(), target: target, conns: map[net.Conn]bool{}}
	p.up(t)
	t.Cleanup(p.down)
	return p
}

func (p *proxy) up(t testing.TB) {
	l, err := net.Listen("tcp", p.addr)
	if err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	p.l = l
	p.mu.Unlock()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			u, err := net.Dial("tcp", p.target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns[c], p.conns[u] = true, true
			p.mu.Unlock()
			go func() { io.Copy(u, c); u.Close() }()
			go func() { io.Copy(c, u); c.Close() }()
		}
	}()
}

func (p *proxy) down() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.l != nil {
		p.l.Close()
		p.l = nil
	}
	for c := range p.conns {
		c.Close()
	}
	p.conns = map[net.Conn]bool{}
}

// The store goes away mid-run and comes back: records queue in order,
// the outage is in the trail itself, nothing is lost, and the backlog is
// anchored in order once the store is back.
func TestOutageQueuesAndCatchesUp(t *testing.T) {
	endpoint, bucket := s3test.Endpoint(t)
	p := newProxy(t, strings.TrimPrefix(endpoint, "http://"))
	direct := testStore(t)
	st, err := NewStore(context.Background(), StoreConfig{Endpoint: "http://" + p.addr, Bucket: bucket, Prefix: direct.prefix})
	if err != nil {
		t.Fatal(err)
	}
	tr, live := openLive(t)
	src, _ := FollowFiles("", live)
	s, err := NewShipper(Options{Store: st, Source: src, QueueDir: t.TempDir(), Clock: newStepClock(), Audit: tr,
		Retention: testRetention, SegmentSize: 2 << 10, SegmentAge: time.Second, PollInterval: 50 * time.Millisecond,
		MaxBackoff: time.Second, UploadTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	writeRecords(t, tr, 0, 20)
	first := lastSeq(t, trailFiles(t, live))
	waitFor(t, "the first records anchored", func() bool { return s.anchoredSeq(testStream) >= first })

	p.down()
	writeRecords(t, tr, 20, 30)
	waitFor(t, "segments queued behind failed uploads", func() bool {
		b := s.Backlog()
		return b.Segments >= 3 && b.Failures >= 2 && b.Records >= 30
	})
	if b := s.Backlog(); b.Err == nil || b.Age <= 0 {
		t.Fatalf("backlog %+v, want the store's error and the oldest record's age", b)
	}
	p.up(t)
	all := lastSeq(t, trailFiles(t, live))
	waitFor(t, "the backlog anchored", func() bool { return s.anchoredSeq(testStream) >= all })
	writeRecords(t, tr, 50, 5)
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	tr.Close()
	files := trailFiles(t, live)
	rep, err := verify(t, direct, files, VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sum, err := trail.Verify(files...)
	if err != nil {
		t.Fatal(err)
	}
	r := rep.Streams[0]
	if r.LastSeq != sum.LastSeq || r.Local != sum.Records || r.AtRisk != 0 {
		t.Fatalf("report %+v; the trail has %d records: want them all anchored", r, sum.Records)
	}
	if sum.Messages[MsgUnanchored] == 0 || sum.Messages[MsgAnchored] == 0 {
		t.Fatalf("messages %v, want the outage (%s) and its end (%s) in the trail", sum.Messages, MsgUnanchored, MsgAnchored)
	}
}

// A shipper that restarts while the store is down goes on from its queue;
// a later one, with the store back, anchors the queue in order.
func TestQueueSurvivesRestart(t *testing.T) {
	st := testStore(t)
	dead, err := NewStore(context.Background(), StoreConfig{Endpoint: "http://" + s3test.FreeAddr(), Bucket: st.bucket, Prefix: st.prefix})
	if err != nil {
		t.Fatal(err)
	}
	tr, live := openLive(t)
	queue := t.TempDir()
	writeRecords(t, tr, 0, 10)
	ship(t, st, trailFiles(t, live), Options{QueueDir: queue})
	writeRecords(t, tr, 10, 30)
	src, _ := OpenFiles("", trailFiles(t, live)...)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	s, _ := NewShipper(Options{Store: dead, Source: src, QueueDir: queue, Clock: newStepClock(), SegmentSize: 4 << 10, MaxBackoff: time.Millisecond})
	if err := s.Close(ctx); err == nil {
		t.Fatal("Close with the store down: nil, want the backlog reported")
	}
	queued, _ := filepath.Glob(filepath.Join(queue, testStream, "*"+queueExt))
	if len(queued) < 2 {
		t.Fatalf("%d segments queued, want several", len(queued))
	}
	tr.Close()
	files := trailFiles(t, live)
	ship(t, st, files, Options{QueueDir: queue, SegmentSize: 4 << 10})
	if left, _ := filepath.Glob(filepath.Join(queue, testStream, "*"+queueExt)); len(left) != 0 {
		t.Fatalf("%d segments left in the queue", len(left))
	}
	rep, err := verify(t, st, files, VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if r := rep.Streams[0]; r.LastSeq != lastSeq(t, files) || r.AtRisk != 0 {
		t.Fatalf("report %+v, want every record anchored", r)
	}
}

// failClosedHarness is a Transport whose audit sink is FailClosed on a
// shipper of its trail.
type failClosedHarness struct {
	s      *Shipper
	sink   grantretry.AuditSink
	clock  *manualClock
	client *http.Client
	sent   atomic.Int32
	url    string
}

func newFailClosed(t *testing.T, st *Store, bound time.Duration) *failClosedHarness {
	tr, live := openLive(t)
	h := &failClosedHarness{clock: newManualClock()}
	src, _ := FollowFiles("", live)
	s, err := NewShipper(Options{Store: st, Source: src, QueueDir: t.TempDir(), Clock: h.clock, Retention: testRetention, UploadTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	funder := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h.sent.Add(1) }))
	t.Cleanup(funder.Close)
	h.s, h.url = s, funder.URL
	h.sink = FailClosed(tr, s, bound)
	h.client = &http.Client{Transport: grantretry.New(nil, grantretry.WithAuditTrail(h.sink), grantretry.WithClock(h.clock))}
	return h
}

func (h *failClosedHarness) call() error {
	resp, err := h.client.Get(h.url)
	if err == nil {
		resp.Body.Close()
	}
	return err
}

// refusesPast checks that calls go out until the bound has passed, and
// are refused for good after.
func (h *failClosedHarness) refusesPast(t *testing.T, bound time.Duration) {
	t.Helper()
	h.clock.Advance(bound)
	if err := h.call(); err != nil || h.sink.Err() != nil {
		t.Fatalf("at the bound: %v, %v; want the call made", err, h.sink.Err())
	}
	h.clock.Advance(time.Second)
	before := h.sent.Load()
	err := h.call()
	if !errors.Is(err, ErrUnanchored) || !errors.Is(err, grantretry.ErrAuditTrail) || h.sent.Load() != before {
		t.Fatalf("past the bound: %v, %d calls sent; want the call refused with ErrUnanchored", err, h.sent.Load()-before)
	}
	if !errors.Is(h.sink.Err(), ErrUnanchored) {
		t.Fatalf("Err %v, want ErrUnanchored for good", h.sink.Err())
	}
}

// With FailClosed, a Transport refuses calls once records waited longer
// than the bound for their anchor, and not before.
func TestFailClosedRefusesCallsPastTheBound(t *testing.T) {
	endpoint, bucket := s3test.Endpoint(t)
	p := newProxy(t, strings.TrimPrefix(endpoint, "http://"))
	direct := testStore(t)
	st, err := NewStore(context.Background(), StoreConfig{Endpoint: "http://" + p.addr, Bucket: bucket, Prefix: direct.prefix})
	if err != nil {
		t.Fatal(err)
	}
	const bound = 10 * time.Minute
	h := newFailClosed(t, st, bound)
	ctx := context.Background()
	if err := h.call(); err != nil {
		t.Fatal(err)
	}
	h.s.poll(ctx, true)
	if err := h.s.drain(ctx); err != nil {
		t.Fatal(err)
	}
	p.down()
	if err := h.call(); err != nil {
		t.Fatal(err)
	}
	h.s.poll(ctx, true) // reads and seals the call's records; the store is down
	if b := h.s.Backlog(); b.Records == 0 || b.Segments != 1 {
		t.Fatalf("backlog %+v, want the call's records queued", b)
	}
	h.refusesPast(t, bound)
}

// A first start while the store is down: where the stream stands is not
// known, so nothing is read; that counts against the bound as well.
func TestFailClosedWhenTheStoreIsDownFromTheStart(t *testing.T) {
	dead, err := NewStore(context.Background(), StoreConfig{Endpoint: "http://" + s3test.FreeAddr(), Bucket: "b"})
	if err != nil {
		t.Fatal(err)
	}
	const bound = time.Minute
	h := newFailClosed(t, dead, bound)
	if err := h.call(); err != nil {
		t.Fatal(err)
	}
	h.s.poll(context.Background(), false)
	if b := h.s.Backlog(); b.Unpositioned != 1 {
		t.Fatalf("backlog %+v, want one stream not positioned", b)
	}
	h.refusesPast(t, bound)
}

// Shipping once with the store down from the start reports that nothing
// was shipped: where the stream stands could not be read.
func TestShipOnceWithoutTheStoreFails(t *testing.T) {
	dead, err := NewStore(context.Background(), StoreConfig{Endpoint: "http://" + s3test.FreeAddr(), Bucket: "b"})
	if err != nil {
		t.Fatal(err)
	}
	src, _ := OpenFiles("", makeTrail(t, t.TempDir(), 5)...)
	s, err := NewShipper(Options{Store: dead, Source: src, QueueDir: t.TempDir(), Clock: newStepClock()})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(context.Background()); err == nil {
		t.Fatal("Close: nil, want the streams not shipped reported")
	}
}

// A stream the shipper stopped for good, at a local record that does not
// continue its anchored chain, gets no heartbeat and no closed checkpoint
// after it: its last checkpoint says it stopped, and a verify of the
// store alone reports it, however recent that checkpoint is.
func TestStoppedStreamIsReportedStoppedNotRunning(t *testing.T) {
	st := testStore(t)
	ship(t, st, makeTrail(t, t.TempDir(), 10), Options{})
	// Another trail under the same name: its records after the anchored
	// ones do not continue the anchored chain.
	other := makeTrail(t, t.TempDir(), 20)
	src, err := OpenFiles("", other...)
	if err != nil {
		t.Fatal(err)
	}
	clock := newManualClock()
	s, err := NewShipper(Options{Store: st, Source: src, QueueDir: t.TempDir(), Clock: clock, Retention: testRetention})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for range 3 {
		s.poll(ctx, false)
		s.drain(ctx)
		clock.Advance(DefaultHeartbeat)
	}
	if s.Err() == nil {
		t.Fatal("the shipper did not stop at a record that does not continue the chain")
	}
	if err := s.Close(ctx); err == nil {
		t.Fatal("Close of a stopped shipper: no error")
	}
	rep, err := Verify(ctx, st, VerifyOptions{MinRetention: testMinRetention, Clock: fixedClock{clock.Now().Add(time.Minute)}})
	var ve *VerifyError
	if !errors.As(err, &ve) || ve.Problems[0].Kind != ProblemStopped || ve.Problems[0].Stream != testStream || len(rep.Streams) != 1 || !rep.Streams[0].Stopped {
		t.Fatalf("a store-only verify of the stopped stream: %v (report %+v); want it reported stopped", err, rep.Streams)
	}
}

// breakingSource is a trail's files, followed, once broken is set, by a
// line that does not continue the chain: the shipper stops the stream
// there, after the good records before it.
type breakingSource struct {
	files  Source
	broken atomic.Bool
}

func (b *breakingSource) Streams(ctx context.Context) ([]string, error) {
	return b.files.Streams(ctx)
}

func (b *breakingSource) Scan(ctx context.Context, stream string, after uint64, fn func([]byte, string, int) error) error {
	if err := b.files.Scan(ctx, stream, after, fn); err != nil || !b.broken.Load() {
		return err
	}
	return fn([]byte(`{"msg":"not a record of this chain"}`), "audit.jsonl.other", 1)
}

func newBreakingSource(t *testing.T, n int) (*breakingSource, []string) {
	t.Helper()
	files := makeTrail(t, t.TempDir(), n)
	src, err := OpenFiles("", files...)
	if err != nil {
		t.Fatal(err)
	}
	return &breakingSource{files: src}, files
}

// wantStopped checks that a store-only verify reports the stream stopped
// after its records to seq last, all anchored.
func wantStopped(t *testing.T, st *Store, last uint64, at time.Time) {
	t.Helper()
	rep, err := Verify(context.Background(), st, VerifyOptions{MinRetention: testMinRetention, Clock: fixedClock{at.Add(time.Minute)}})
	var ve *VerifyError
	if !errors.As(err, &ve) || ve.Problems[0].Kind != ProblemStopped || len(rep.Streams) != 1 || !rep.Streams[0].Stopped || rep.Streams[0].LastSeq != last {
		t.Fatalf("a store-only verify of the stopped stream: %v (report %+v); want it stopped after seq %d", err, rep.Streams, last)
	}
}

// A heartbeat asked before the stream stops is not uploaded after its
// stopped checkpoint: the last checkpoint of a stopped stream says it
// stopped.
func TestStoppedStreamGetsNoHeartbeatAskedBeforeTheStop(t *testing.T) {
	st := testStore(t)
	src, files := newBreakingSource(t, 10)
	clock := newManualClock()
	s, err := NewShipper(Options{Store: st, Source: src, QueueDir: t.TempDir(), Clock: clock, Retention: testRetention})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	s.poll(ctx, true)
	if err := s.drain(ctx); err != nil {
		t.Fatal(err)
	}
	clock.Advance(DefaultHeartbeat)
	s.poll(ctx, false) // a heartbeat is asked, and not uploaded yet
	s.mu.Lock()
	asked := len(s.heartbeats)
	s.mu.Unlock()
	if asked != 1 {
		t.Fatalf("%d heartbeats asked after a Heartbeat; want 1", asked)
	}
	src.broken.Store(true)
	s.poll(ctx, false)
	if s.Err() == nil {
		t.Fatal("the shipper did not stop at a line that does not continue the chain")
	}
	if err := s.Close(ctx); err == nil {
		t.Fatal("Close of a stopped shipper: no error")
	}
	wantStopped(t, st, lastSeq(t, files), clock.Now())
}

// onBackoff is a clock on which backoff costs no real time, and that
// calls backoff at each sleep after a failed upload, with the number of
// failures.
type onBackoff struct {
	*stepClock
	s       *Shipper
	backoff func(failures int)
}

func (c *onBackoff) Sleep(ctx context.Context, d time.Duration) error {
	if n := c.s.Backlog().Failures; n > 0 {
		c.backoff(n)
	}
	return c.stepClock.Sleep(ctx, d)
}

// breakDuringOutage returns a shipper whose stream has 10 records read
// and not sealed, through a store that then went down, and stopped at a
// line that does not continue the chain. The store comes back at the
// shipper's first backoff, unless down is set.
func breakDuringOutage(t *testing.T, o Options, down bool) (*Shipper, *Store, *onBackoff, []string) {
	t.Helper()
	endpoint, bucket := s3test.Endpoint(t)
	p := newProxy(t, strings.TrimPrefix(endpoint, "http://"))
	direct := testStore(t)
	st, err := NewStore(context.Background(), StoreConfig{Endpoint: "http://" + p.addr, Bucket: bucket, Prefix: direct.prefix})
	if err != nil {
		t.Fatal(err)
	}
	src, files := newBreakingSource(t, 10)
	var once sync.Once
	clock := &onBackoff{stepClock: newStepClock(), backoff: func(int) {
		if !down {
			once.Do(func() { p.up(t) })
		}
	}}
	o.Store, o.Source, o.QueueDir, o.Clock, o.Retention = st, src, t.TempDir(), clock, testRetention
	o.UploadTimeout, o.MaxBackoff = 5*time.Second, 200*time.Millisecond
	s, err := NewShipper(o)
	if err != nil {
		t.Fatal(err)
	}
	clock.s = s
	s.poll(context.Background(), false) // positioned, the records read
	p.down()
	src.broken.Store(true)
	s.poll(context.Background(), false)
	if s.Err() == nil {
		t.Fatal("the shipper did not stop at a line that does not continue the chain")
	}
	return s, direct, clock, files
}

// A store that fails when a stream stops does not lose its stopped
// checkpoint nor the records sealed before it: Close backs off and tries
// again while its context has time, and only then returns the failure.
func TestCloseRetriesTheStoppedCheckpointThroughAnOutage(t *testing.T) {
	s, direct, clock, files := breakDuringOutage(t, Options{}, false)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := s.Close(ctx)
	if !errors.Is(err, grantretry.ErrAuditTrail) {
		t.Fatalf("Close of a stopped shipper: %v; want the stop", err)
	}
	wantStopped(t, direct, lastSeq(t, files), clock.Now())
}

// The running shipper, too, backs off and retries the stopped checkpoint
// and the records sealed before it while the store is down.
func TestRunningShipperRetriesTheStoppedCheckpointThroughAnOutage(t *testing.T) {
	s, direct, clock, files := breakDuringOutage(t, Options{}, false)
	s.Start()
	waitFor(t, "the stopped checkpoint stored", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return len(s.stops) == 0 && len(s.queue) == 0
	})
	s.Close(context.Background())
	wantStopped(t, direct, lastSeq(t, files), clock.Now())
}

// A Close that gives up on a stopped stream, its context done while the
// store is down, has tried more than once, and says why the stream
// stopped and what is left: the records and the stopped checkpoint.
func TestCloseThatGivesUpOnAStoppedStreamSaysWhatIsLeft(t *testing.T) {
	s, _, clock, files := breakDuringOutage(t, Options{}, true)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	clock.backoff = func(failures int) {
		if failures >= 3 {
			cancel()
		}
	}
	err := s.Close(ctx)
	if !errors.Is(err, grantretry.ErrAuditTrail) || !strings.Contains(err.Error(), fmt.Sprintf("%d records in 1 segment not anchored", lastSeq(t, files))) ||
		!strings.Contains(err.Error(), "the stopped checkpoint of stream "+testStream+" not stored") {
		t.Fatalf("Close given up: %v; want the stop, the records and the stopped checkpoint left", err)
	}
	if b := s.Backlog(); b.Failures < 3 || b.Segments != 1 || b.Stopped == nil {
		t.Fatalf("backlog %+v; want three failed uploads, the segment queued, and the stop", b)
	}
}
