package worm

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/grantretry/grantretry"
	"github.com/grantretry/grantretry/trail"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Shipper defaults, used when the Options field is zero.
const (
	// DefaultSegmentSize is the size at which a segment is sealed.
	DefaultSegmentSize = 1 << 20
	// DefaultSegmentAge is the age of its first record at which a
	// segment is sealed.
	DefaultSegmentAge = 5 * time.Minute
	// DefaultHeartbeat is how often a stream with nothing to seal gets a
	// checkpoint anyway, so that a trail that stopped is told from one
	// that was cut.
	DefaultHeartbeat = 5 * time.Minute
	// DefaultRetention is the shortest the default lock comes to, and
	// what Verify requires by default: 3×365+1 days. The default lock
	// itself, when Options.Retention is 0, is three calendar years and
	// a day from the upload (2 CFR 200.334 keeps records three years),
	// a day more than three years whether or not they hold a leap day.
	DefaultRetention = (3*365 + 1) * 24 * time.Hour
	// DefaultPollInterval is how often the Shipper reads its Source.
	DefaultPollInterval = 500 * time.Millisecond
	// DefaultMaxBackoff caps the wait between failed uploads, so that a
	// store that is back is used again within it.
	DefaultMaxBackoff = 5 * time.Second
	// DefaultUploadTimeout bounds one request to the store (real time).
	DefaultUploadTimeout = 30 * time.Second
)

// Audit lines a Shipper writes to Options.Audit.
const (
	// MsgUnanchored says the store is failing and how much of the trail
	// waits for its anchor.
	MsgUnanchored = "grantretry.worm_unanchored"
	// MsgAnchored says the backlog is anchored again.
	MsgAnchored = "grantretry.worm_anchored"
	// FieldRecords is the number of records not anchored yet (on
	// MsgUnanchored), or anchored after the outage (on MsgAnchored).
	FieldRecords = "records"
	// FieldOldestAge is how long the oldest record not anchored has
	// waited, on MsgUnanchored; how long the outage lasted, on MsgAnchored.
	FieldOldestAge = "oldest_age"
)

// Options configures a Shipper.
type Options struct {
	// Store is where segments are anchored. Required.
	Store *Store
	// Source is the trail to ship: FollowFiles beside a running pipeline,
	// OpenFiles for files shipped once, or the fleet's trail. Required.
	Source Source
	// QueueDir holds sealed segments until they are anchored, and where
	// each stream stands. Required; it is created if need be. One
	// Shipper at a time may use it.
	QueueDir string
	// SegmentSize, SegmentAge: a segment is sealed when the next record
	// would make it larger than SegmentSize bytes (a record larger than
	// that goes alone), when its first record was read SegmentAge ago,
	// or on Close. Defaults DefaultSegmentSize and DefaultSegmentAge.
	SegmentSize int
	SegmentAge  time.Duration
	// Heartbeat: a stream gets a checkpoint at least this often. Default
	// DefaultHeartbeat.
	Heartbeat time.Duration
	// Retention is how long every object is locked in COMPLIANCE mode,
	// from its upload. If 0, three calendar years and a day (see
	// DefaultRetention). If the bucket's default retention is longer,
	// that is used.
	Retention time.Duration
	// PollInterval is how often the Source is read. Default
	// DefaultPollInterval.
	PollInterval time.Duration
	// MaxBackoff caps the full-jitter exponential wait after a failed
	// upload. Default DefaultMaxBackoff.
	MaxBackoff time.Duration
	// UploadTimeout bounds each request to the store. Default
	// DefaultUploadTimeout.
	UploadTimeout time.Duration
	// Clock times sealing, heartbeats and backoff. If nil, the system
	// clock.
	Clock grantretry.Clock
	// Audit, if not nil, gets MsgUnanchored lines while the store fails
	// (at the first failure, then once per Heartbeat) and MsgAnchored
	// when the backlog is anchored again; give it the trail itself and
	// the outage is in the chain it shipped.
	Audit grantretry.AuditSink
	// Logger gets the same lines and the Shipper's errors. If nil, none.
	Logger *zap.Logger
	// MeterProvider, if not nil, gets the gauges
	// grantretry.worm.unanchored.records and grantretry.worm.unanchored.age.
	MeterProvider metric.MeterProvider
}

// Backlog is how much of the trail is not anchored yet.
type Backlog struct {
	// Records read from the Source and not anchored: in the open
	// segments and in the queue.
	Records int
	// Segments sealed and queued.
	Segments int
	// Unpositioned counts the streams whose records are not read yet
	// because where they stand in the store is not known (a first start
	// while the store is down); Oldest counts from the first try.
	Unpositioned int
	// Oldest is when the oldest record not anchored was read; zero if
	// there is none. Age is how long ago that was.
	Oldest time.Time
	Age    time.Duration
	// Failures counts the failed uploads since the last success; Err is
	// the last one.
	Failures int
	Err      error
	// Stopped is Err's failure, once the Shipper has stopped for good; the
	// records written after it are not read, so not counted in Records,
	// and Oldest is at most when it stopped.
	Stopped error
}

// Shipper seals a Source's records into segments and anchors them in a
// Store, off the request path: Start runs it, Close seals what is left
// and anchors it. When the store fails, sealed segments wait in order in
// QueueDir and go out with backoff; nothing is dropped, and a restart
// goes on with the queue. A Shipper is safe for concurrent use.
type Shipper struct {
	o     Options
	clock grantretry.Clock
	enc   zapcore.Encoder
	log   *zap.Logger
	h     hash.Hash // the reader's

	pollMu  sync.Mutex         // serialises polls: the reader loop and Close
	streams map[string]*stream // guarded by pollMu
	initial map[string]chainState

	notify chan struct{}
	cancel context.CancelFunc
	wg     sync.WaitGroup
	reg    metric.Registration

	// upMu serialises uploads: the uploader loop and Close.
	upMu sync.Mutex
	// bucketRetention is the bucket's default retention, read at the
	// first upload (retentionRead); guarded by upMu.
	bucketRetention time.Duration
	retentionRead   bool

	mu         sync.Mutex // guards what follows; never held across I/O or a callback
	queue      []*queued
	heartbeats []string
	// stopped holds the streams stopped for good at a local record that
	// does not continue their chain: they get a stopped checkpoint (the
	// names in stops, until it is stored), then no heartbeat or closed
	// one, so the store says they stopped.
	stopped      map[string]bool
	stops        []string
	open         map[string]openInfo
	unpositioned map[string]time.Time // streams whose position is not known, since when
	posErr       error                // why, the last time
	cpLast       map[string]time.Time // the time of each stream's last checkpoint key
	anchored     map[string]chainState
	// confirmed holds the streams whose place in the store was read
	// since the Shipper started or its last failed upload; upMu guards it.
	confirmed      map[string]bool
	lastCheckpoint map[string]time.Time
	failures       int
	lastErr        error
	failedSince    time.Time
	lastAlarm      time.Time
	fatal          error
	fatalAt        time.Time // when fatal was set: nothing is anchored after it
	started        bool

	// anchoredHook, if not nil, is called after each segment's checkpoint
	// is stored, with the time it was. Tests only.
	anchoredHook func(q *queued, at time.Time)
}

type openInfo struct {
	records int
	at      time.Time
}

// stream is the reader's state of one stream.
type stream struct {
	name    string
	ready   bool       // where it stands is known
	read    chainState // the last record read
	buf     []byte     // records read, not sealed
	first   uint64
	prev    [32]byte
	records int
	at      time.Time // when the first record of buf was read
	broken  error
}

// NewShipper returns a Shipper for o. It reads the queue left by an
// earlier one; it sends no request.
func NewShipper(o Options) (*Shipper, error) {
	switch {
	case o.Store == nil:
		return nil, errors.New("grantretry: worm: Options.Store is nil")
	case o.Source == nil:
		return nil, errors.New("grantretry: worm: Options.Source is nil")
	case o.QueueDir == "":
		return nil, errors.New("grantretry: worm: Options.QueueDir is empty")
	case o.SegmentSize < 0 || o.SegmentAge < 0 || o.Heartbeat < 0 || o.Retention < 0 ||
		o.PollInterval < 0 || o.MaxBackoff < 0 || o.UploadTimeout < 0:
		return nil, errors.New("grantretry: worm: a negative size or duration in Options")
	}
	setDefault(&o.SegmentSize, DefaultSegmentSize)
	setDefault(&o.SegmentAge, DefaultSegmentAge)
	setDefault(&o.Heartbeat, DefaultHeartbeat)
	setDefault(&o.PollInterval, DefaultPollInterval)
	setDefault(&o.MaxBackoff, DefaultMaxBackoff)
	setDefault(&o.UploadTimeout, DefaultUploadTimeout)
	if err := os.MkdirAll(o.QueueDir, queuePerm); err != nil {
		return nil, fmt.Errorf("grantretry: worm: queue: %w", err)
	}
	segs, states, err := loadQueue(o.QueueDir)
	if err != nil {
		return nil, fmt.Errorf("grantretry: worm: queue: %w", err)
	}
	s := &Shipper{
		o: o, clock: o.Clock, log: o.Logger, h: sha256.New(),
		enc:     zapcore.NewJSONEncoder(grantretry.AuditEncoderConfig()),
		streams: map[string]*stream{}, initial: states,
		notify: make(chan struct{}, 1), open: map[string]openInfo{},
		unpositioned: map[string]time.Time{}, cpLast: map[string]time.Time{},
		anchored: map[string]chainState{}, lastCheckpoint: map[string]time.Time{}, confirmed: map[string]bool{},
		stopped: map[string]bool{},
	}
	if s.clock == nil {
		s.clock = systemClock{}
	}
	if s.log == nil {
		s.log = zap.NewNop()
	}
	for _, qs := range segs {
		s.queue = append(s.queue, qs...)
	}
	if o.MeterProvider != nil {
		if err := s.register(o.MeterProvider); err != nil {
			return nil, err
		}
	}
	return s, nil
}

func setDefault[T int | time.Duration](v *T, d T) {
	if *v == 0 {
		*v = d
	}
}

// Start runs the Shipper in the background until Close.
func (s *Shipper) Start() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		return
	}
	s.started = true
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	s.wg.Add(2)
	go s.readLoop(ctx)
	go s.uploadLoop(ctx)
}

// Close stops the background work, reads the Source a last time, seals
// every open segment and anchors the queue, then writes a closed
// checkpoint for each stream, so the verifier sees the trail stopped,
// not cut. Records the trail has not synced yet are not read (see
// Source): close the trail first, or they wait for the next Shipper.
// While the store fails it backs off and tries again; it gives up when
// ctx is done: then what is not anchored stays queued in QueueDir for
// the next Shipper, and the error says how much. A stream stopped for
// good (see [Shipper.Err]) gets no closed checkpoint: Close anchors its
// last segment and its stopped checkpoint, as long as ctx allows, and
// returns the stop. Close without Start ships the Source once.
func (s *Shipper) Close(ctx context.Context) error {
	s.mu.Lock()
	cancel := s.cancel
	s.cancel = nil
	s.mu.Unlock()
	if cancel != nil {
		cancel()
		s.wg.Wait()
	}
	if s.reg != nil {
		defer s.reg.Unregister()
	}
	s.poll(ctx, true)
	if err := s.drain(ctx); err != nil {
		return err
	}
	if b := s.Backlog(); b.Unpositioned > 0 {
		return fmt.Errorf("grantretry: worm: %s not shipped: where they stand in the store could not be read (%v)", plural(uint64(b.Unpositioned), "stream"), s.positionErr())
	}
	if err := s.closeStreams(ctx); err != nil {
		return err
	}
	return s.Err()
}

// Err returns the failure that stops the Shipper for good, nil while
// there is none: a stream whose local records do not continue its chain,
// or a store that holds another segment under a segment's name. Store
// outages are not one: see Backlog.
func (s *Shipper) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fatal
}

// Backlog returns how much of the trail waits for its anchor. It never
// waits for a read or an upload.
func (s *Shipper) Backlog() Backlog {
	now := s.clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.backlogLocked(now)
}

func (s *Shipper) backlogLocked(now time.Time) Backlog {
	b := Backlog{Segments: len(s.queue), Failures: s.failures, Err: s.lastErr}
	older := func(t time.Time) {
		if !t.IsZero() && (b.Oldest.IsZero() || t.Before(b.Oldest)) {
			b.Oldest = t
		}
	}
	for _, q := range s.queue {
		b.Records += q.records
		older(q.readAt)
	}
	for _, since := range s.unpositioned {
		b.Unpositioned++
		older(since)
	}
	for _, o := range s.open {
		if o.records > 0 {
			b.Records += o.records
			older(o.at)
		}
	}
	if s.fatal != nil {
		// Stopped for good: whatever the trail holds from then on waits
		// for an anchor that will not come, though it is never read.
		b.Stopped = s.fatal
		older(s.fatalAt)
	}
	if !b.Oldest.IsZero() {
		b.Age = now.Sub(b.Oldest)
	}
	return b
}

func (s *Shipper) readLoop(ctx context.Context) {
	defer s.wg.Done()
	for {
		s.poll(ctx, false)
		if s.clock.Sleep(ctx, s.o.PollInterval) != nil {
			return
		}
	}
}

// poll reads every stream's new records, seals the segments that are due
// (all of them if sealAll) and asks for the heartbeats that are due.
func (s *Shipper) poll(ctx context.Context, sealAll bool) {
	s.pollMu.Lock()
	defer s.pollMu.Unlock()
	names, err := s.o.Source.Streams(ctx)
	if err != nil {
		s.log.Warn("grantretry: worm: the source's streams", zap.Error(err))
		return
	}
	for _, name := range names {
		if checkStream(name) != nil {
			s.log.Warn("grantretry: worm: the source names a stream that cannot be one", zap.String("stream", name))
			continue
		}
		st := s.streams[name]
		if st == nil {
			st = &stream{name: name}
			s.streams[name] = st
		}
		if st.broken == nil {
			s.pollStream(ctx, st, sealAll)
		}
	}
	s.askHeartbeats(names)
}

func (s *Shipper) pollStream(ctx context.Context, st *stream, sealAll bool) {
	if !st.ready {
		if err := s.position(ctx, st); err != nil {
			now := s.clock.Now()
			s.mu.Lock()
			if _, ok := s.unpositioned[st.name]; !ok {
				s.unpositioned[st.name] = now
			}
			s.posErr = err
			s.mu.Unlock()
			s.log.Warn("grantretry: worm: where the stream stands in the store", zap.String("stream", st.name), zap.Error(err))
			return
		}
		s.mu.Lock()
		delete(s.unpositioned, st.name)
		s.mu.Unlock()
	}
	err := s.o.Source.Scan(ctx, st.name, st.read.seq, func(rec []byte, file string, line int) error {
		now := s.clock.Now()
		l, problem := linkProblem(s.h, st.read, rec)
		if problem != "" {
			return &brokenSource{stream: st.name, file: file, line: line, seq: max(l.seq, st.read.seq+1), problem: problem}
		}
		if st.records > 0 && len(st.buf)+len(rec)+1 > s.o.SegmentSize {
			if err := s.seal(st); err != nil {
				return err
			}
		}
		if st.records == 0 {
			st.first, st.prev, st.at = l.seq, l.prev, now
		}
		st.buf = append(append(st.buf, rec...), '\n')
		st.records++
		st.read = chainState{seq: l.seq, hash: l.hash}
		s.setOpen(st)
		return nil
	})
	var bs *brokenSource
	if errors.As(err, &bs) {
		s.stop(st, bs)
		return
	} else if err != nil && ctx.Err() == nil {
		s.log.Warn("grantretry: worm: reading the source", zap.String("stream", st.name), zap.Error(err))
	}
	if st.records > 0 && (sealAll || !s.clock.Now().Before(st.at.Add(s.o.SegmentAge))) {
		if err := s.seal(st); err != nil {
			s.log.Warn("grantretry: worm: sealing a segment", zap.String("stream", st.name), zap.Error(err))
		}
	}
}

// stop stops stream st for good at bs: the records read before it are
// sealed, and a stopped checkpoint follows them.
func (s *Shipper) stop(st *stream, bs *brokenSource) {
	st.broken = bs
	if st.records > 0 {
		if err := s.seal(st); err != nil {
			s.log.Warn("grantretry: worm: sealing a segment", zap.String("stream", st.name), zap.Error(err))
		}
	}
	s.mu.Lock()
	if s.fatal == nil {
		s.fatal, s.fatalAt = bs, s.clock.Now()
	}
	s.stopped[st.name] = true
	s.stops = append(s.stops, st.name)
	// A heartbeat asked before would land after the stopped checkpoint
	// and hide it.
	s.heartbeats = slices.DeleteFunc(s.heartbeats, func(name string) bool { return name == st.name })
	s.mu.Unlock()
	s.wake()
	s.log.Error("grantretry: worm: not shipped", zap.Error(bs))
}

// brokenSource is a local record that does not continue its stream's
// chain: it is not shipped, nor is anything after it.
type brokenSource struct {
	stream, file string
	line         int
	seq          uint64
	problem      string
}

func (e *brokenSource) Error() string {
	return fmt.Sprintf("grantretry: worm: stream %s: %s: seq %d: %s", e.stream, position(e.file, e.line), e.seq, e.problem)
}

func (e *brokenSource) Is(target error) bool { return target == grantretry.ErrAuditTrail }

func position(file string, line int) string {
	if line > 0 {
		return fmt.Sprintf("%s line %d", file, line)
	}
	return file
}

func (s *Shipper) setOpen(st *stream) {
	s.mu.Lock()
	s.open[st.name] = openInfo{records: st.records, at: st.at}
	s.mu.Unlock()
}

// position finds where stream st stands: in the queue, else in the store.
func (s *Shipper) position(ctx context.Context, st *stream) error {
	if cs, ok := s.initial[st.name]; ok {
		st.read, st.ready = cs, true
		s.mu.Lock()
		if _, ok := s.anchored[st.name]; !ok {
			s.anchored[st.name] = cs // at most this far: the queue holds the rest
		}
		s.mu.Unlock()
		return nil
	}
	cs, _, err := s.storePosition(ctx, st.name)
	if err != nil {
		return err
	}
	st.read, st.ready = cs, true
	s.mu.Lock()
	s.anchored[st.name] = cs
	s.mu.Unlock()
	return nil
}

// storePosition reads the last record of stream's last segment, and
// returns that segment's key ("" when the store has none).
func (s *Shipper) storePosition(ctx context.Context, name string) (chainState, string, error) {
	ctx, cancel := context.WithTimeout(ctx, s.o.UploadTimeout)
	defer cancel()
	st := s.o.Store
	var lastKey string
	var last objectName
	p := s3.NewListObjectsV2Paginator(st.c, &s3.ListObjectsV2Input{
		Bucket: aws.String(st.bucket), Prefix: aws.String(st.prefix + name + "/" + segmentsDir + "/"),
	})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx, noRetry)
		if err != nil {
			return chainState{}, "", err
		}
		for _, o := range page.Contents {
			n, err := parseKey(aws.ToString(o.Key)[len(st.prefix):])
			if err == nil && n.last > last.last {
				last, lastKey = n, aws.ToString(o.Key)
			}
		}
	}
	if lastKey == "" {
		return chainState{}, "", nil
	}
	data, _, err := st.get(ctx, lastKey, "", noRetry)
	if err != nil {
		return chainState{}, "", err
	}
	data = bytes.TrimSuffix(data, []byte("\n"))
	line := data[bytes.LastIndexByte(data, '\n')+1:]
	l, ok := trail.ParseLink(line)
	if !ok || l.Seq != last.last {
		return chainState{}, "", fmt.Errorf("grantretry: worm: %s: its last line is not record seq %d", lastKey, last.last)
	}
	return chainState{seq: l.Seq, hash: l.Hash}, lastKey, nil
}

// seal queues the open segment of st.
func (s *Shipper) seal(st *stream) error {
	q := &queued{stream: st.name, first: st.first, last: st.read.seq, prev: st.prev,
		hash: st.read.hash, records: st.records, readAt: st.at}
	if err := enqueue(s.o.QueueDir, q, st.buf); err != nil {
		return fmt.Errorf("grantretry: worm: queue: %w", err)
	}
	st.buf, st.records = st.buf[:0], 0
	s.mu.Lock()
	s.queue = append(s.queue, q)
	s.open[st.name] = openInfo{}
	s.mu.Unlock()
	s.wake()
	return nil
}

func (s *Shipper) wake() {
	select {
	case s.notify <- struct{}{}:
	default:
	}
}

// askHeartbeats asks for a checkpoint of every stream that is anchored as
// far as it was sealed and had none for a Heartbeat.
func (s *Shipper) askHeartbeats(names []string) {
	now := s.clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	queued := map[string]bool{}
	for _, q := range s.queue {
		queued[q.stream] = true
	}
	for _, h := range s.heartbeats {
		queued[h] = true
	}
	asked := false
	for _, name := range names {
		if _, known := s.anchored[name]; !known || queued[name] || s.stopped[name] {
			continue
		}
		if now.Sub(s.lastCheckpoint[name]) >= s.o.Heartbeat {
			s.heartbeats = append(s.heartbeats, name)
			asked = true
		}
	}
	if asked {
		s.wake()
	}
}

// job is the next upload: the oldest queued segment, else a stopped
// checkpoint, else a heartbeat.
type job struct {
	seg       *queued
	stopped   string
	heartbeat string
}

func (s *Shipper) nextJob() (job, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.queue) > 0 {
		return job{seg: s.queue[0]}, true
	}
	if len(s.stops) > 0 {
		return job{stopped: s.stops[0]}, true
	}
	for len(s.heartbeats) > 0 && s.stopped[s.heartbeats[0]] {
		s.heartbeats = s.heartbeats[1:]
	}
	if len(s.heartbeats) > 0 {
		return job{heartbeat: s.heartbeats[0]}, true
	}
	return job{}, false
}

func (s *Shipper) uploadLoop(ctx context.Context) {
	defer s.wg.Done()
	for {
		if _, ok := s.nextJob(); !ok {
			select {
			case <-s.notify:
				continue
			case <-ctx.Done():
				return
			}
		}
		if err := s.uploadNext(ctx); err != nil {
			// A stream stopped for good still has its stopped checkpoint,
			// and the records sealed before it, to anchor: only a failure
			// that no retry mends ends the loop.
			var p permanent
			if ctx.Err() != nil || errors.As(err, &p) {
				return
			}
			if s.clock.Sleep(ctx, s.backoff()) != nil {
				return
			}
		}
	}
}

// drain uploads until nothing is left, backing off as the loop does, or
// until ctx is done; a stream stopped for good does not end it early, for
// its stopped checkpoint is still owed. It returns the Shipper's failure,
// if it has one, once the uploads have ended.
func (s *Shipper) drain(ctx context.Context) error {
	for {
		if _, ok := s.nextJob(); !ok {
			return nil
		}
		err := s.uploadNext(ctx)
		if err == nil {
			continue
		}
		var p permanent
		if errors.As(err, &p) {
			if fatal := s.Err(); fatal != nil && fatal != p.error {
				return fmt.Errorf("%w; and %w", fatal, p.error)
			}
			return p.error
		}
		if ctx.Err() != nil || s.clock.Sleep(ctx, s.backoff()) != nil {
			return s.leftErr(err)
		}
	}
}

// leftErr says what is left to anchor when Close gives up, after err,
// and why the Shipper stopped, if it did.
func (s *Shipper) leftErr(err error) error {
	b := s.Backlog()
	s.mu.Lock()
	stops := strings.Join(s.stops, ", ")
	s.mu.Unlock()
	left := fmt.Sprintf("%s in %s not anchored, queued in %s", plural(uint64(b.Records), "record"), plural(uint64(b.Segments), "segment"), s.o.QueueDir)
	if stops != "" {
		left += fmt.Sprintf(", and the stopped checkpoint of stream %s not stored", stops)
	}
	if b.Stopped != nil {
		return fmt.Errorf("%w; and %s (%v)", b.Stopped, left, err)
	}
	return fmt.Errorf("grantretry: worm: %s (%v)", left, err)
}

func (s *Shipper) positionErr() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.posErr
}

// backoff is the full-jitter wait after the current run of failures.
func (s *Shipper) backoff() time.Duration {
	s.mu.Lock()
	n := s.failures
	s.mu.Unlock()
	ceiling := 100 * time.Millisecond
	for i := 1; i < n && ceiling < s.o.MaxBackoff; i++ {
		ceiling *= 2
	}
	ceiling = min(ceiling, s.o.MaxBackoff)
	return time.Duration(rand.Int64N(int64(ceiling) + 1))
}

// uploadNext uploads the next job and records how it went.
func (s *Shipper) uploadNext(ctx context.Context) error {
	s.upMu.Lock()
	defer s.upMu.Unlock()
	j, ok := s.nextJob()
	if !ok {
		return nil
	}
	var err error
	switch {
	case j.seg != nil:
		err = s.uploadSegment(ctx, j.seg)
	case j.stopped != "":
		err = s.uploadCheckpoint(ctx, j.stopped, kindStopped)
	default:
		err = s.uploadCheckpoint(ctx, j.heartbeat, kindHeartbeat)
	}
	if err != nil {
		s.failed(j, err)
		return err
	}
	s.succeeded()
	return nil
}

// resolveRetention reads the bucket's default retention once: objects
// are never locked for less. upMu must be held.
func (s *Shipper) resolveRetention(ctx context.Context) error {
	if s.retentionRead {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, s.o.UploadTimeout)
	defer cancel()
	d, enabled, err := s.o.Store.bucketRetention(ctx, noRetry)
	switch {
	case isStatus(err, 403):
		s.log.Warn("grantretry: worm: cannot read the bucket's Object Lock configuration; locking for Options.Retention", zap.Error(err))
	case err != nil:
		return err
	case !enabled:
		return s.setFatal(fmt.Errorf("grantretry: worm: bucket %s has no Object Lock: create it with Object Lock enabled", s.o.Store.bucket))
	}
	s.bucketRetention, s.retentionRead = d, true
	return nil
}

// retainUntil is when an object uploaded at now may be deleted: the
// Options' Retention from now (by default three calendar years and a
// day), or the bucket's default retention if that is longer. upMu must
// be held.
func (s *Shipper) retainUntil(now time.Time) time.Time {
	until := now.Add(s.o.Retention)
	if s.o.Retention == 0 {
		until = now.AddDate(3, 0, 1)
	}
	if b := now.Add(s.bucketRetention); b.After(until) {
		until = b
	}
	return until
}

// setFatal stops the Shipper for good at err, unless it has stopped
// already, and returns err as the failure of the upload.
func (s *Shipper) setFatal(err error) error {
	s.mu.Lock()
	if s.fatal == nil {
		s.fatal, s.fatalAt = err, s.clock.Now()
	}
	s.mu.Unlock()
	s.log.Error("grantretry: worm: shipping stopped", zap.Error(err))
	return permanent{err}
}

// permanent is an upload's failure that no retry mends: the store holds
// another history, or the bucket has no Object Lock.
type permanent struct{ error }

func (p permanent) Unwrap() error { return p.error }

// uploadSegment uploads q, then its checkpoint. A segment the store has
// already, byte for byte, was uploaded by an attempt whose answer was
// lost. upMu must be held.
func (s *Shipper) uploadSegment(ctx context.Context, q *queued) error {
	if err := s.resolveRetention(ctx); err != nil {
		return err
	}
	data, err := os.ReadFile(q.path)
	if err != nil {
		return fmt.Errorf("grantretry: worm: queue: %w", err)
	}
	st := s.o.Store
	key := segmentKey(st.prefix, q.stream, q.first, q.last)
	if err := s.confirm(ctx, q, key); err != nil {
		return err
	}
	meta := map[string]string{
		metaStream: q.stream, metaFirstSeq: fmt.Sprint(q.first), metaLastSeq: fmt.Sprint(q.last),
		metaPrevHash: hexHash(q.prev), metaLastHash: hexHash(q.hash),
	}
	if err := s.put(ctx, key, data, "application/x-ndjson", meta); err != nil {
		return err
	}
	now := s.checkpointTime(q.stream)
	cp := checkpoint{Stream: q.stream, Seq: q.last, Hash: hexHash(q.hash), Time: now.UTC(), Kind: kindSegment}
	if err := s.put(ctx, checkpointKey(st.prefix, q.stream, q.last, now), cp.encode(), "application/json", nil); err != nil {
		return err
	}
	if err := os.Remove(q.path); err != nil && !errors.Is(err, os.ErrNotExist) {
		s.log.Warn("grantretry: worm: removing an anchored segment from the queue", zap.Error(err))
	}
	s.mu.Lock()
	s.queue = s.queue[1:]
	s.anchored[q.stream] = chainState{seq: q.last, hash: q.hash}
	s.lastCheckpoint[q.stream] = now
	hook := s.anchoredHook
	s.mu.Unlock()
	if hook != nil {
		hook(q, now)
	}
	return nil
}

// confirm checks, once after a start and once after each failed upload,
// that q continues the stream's chain as the store holds it: a queue
// left by a shipper while the store was down may be behind records that
// another run anchored meanwhile, under other segment boundaries, and
// uploading it would leave overlapping segments that no one can remove.
// upMu must be held.
func (s *Shipper) confirm(ctx context.Context, q *queued, key string) error {
	if s.confirmed[q.stream] {
		return nil
	}
	at, lastKey, err := s.storePosition(ctx, q.stream)
	if err != nil {
		return err
	}
	switch {
	case lastKey == key:
		// q itself, uploaded by an attempt whose answer was lost.
	case at.seq >= q.first:
		if _, _, gerr := s.o.Store.get(ctx, key, "", noRetry); gerr == nil {
			break // q is there already: put compares its bytes
		} else if !isStatus(gerr, 404) {
			return gerr
		}
		return s.setFatal(fmt.Errorf("grantretry: worm: stream %s: the store holds records to seq %d, and the queue's next segment starts at seq %d: another shipper anchored them; the queue in %s is not uploaded", q.stream, at.seq, q.first, s.o.QueueDir))
	case at.seq+1 == q.first && at.hash != q.prev:
		return s.setFatal(fmt.Errorf("grantretry: worm: stream %s: the queue's segment from seq %d does not continue the store's chain at seq %d: another history under this prefix", q.stream, q.first, at.seq))
	}
	s.confirmed[q.stream] = true
	return nil
}

// put uploads one object; one the store has already with the same bytes
// counts as uploaded, one with other bytes stops the Shipper.
func (s *Shipper) put(ctx context.Context, key string, data []byte, contentType string, meta map[string]string) error {
	ctx, cancel := context.WithTimeout(ctx, s.o.UploadTimeout)
	defer cancel()
	st := s.o.Store
	err := st.put(ctx, key, data, contentType, s.retainUntil(s.clock.Now()), meta)
	if !errors.Is(err, errExists) {
		return err
	}
	have, _, gerr := st.get(ctx, key, "", noRetry)
	if gerr != nil {
		return gerr
	}
	if !bytes.Equal(have, data) {
		return s.setFatal(fmt.Errorf("grantretry: worm: %s holds other bytes than the segment of that name in the queue: another writer, or another history, under this prefix", key))
	}
	return nil
}

// uploadCheckpoint writes a heartbeat or stopped checkpoint of stream:
// where its anchored chain stands now. upMu must be held.
func (s *Shipper) uploadCheckpoint(ctx context.Context, stream, kind string) error {
	if err := s.resolveRetention(ctx); err != nil {
		return err
	}
	return s.writeCheckpoint(ctx, stream, kind)
}

// checkpointTime is the time of stream's next checkpoint: now, or just
// after its last one, so that no two have the same name.
func (s *Shipper) checkpointTime(stream string) time.Time {
	now := s.clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if last := s.cpLast[stream]; !now.After(last) {
		now = last.Add(time.Nanosecond)
	}
	s.cpLast[stream] = now
	return now
}

func (s *Shipper) writeCheckpoint(ctx context.Context, stream, kind string) error {
	s.mu.Lock()
	stopped := s.stopped[stream]
	s.mu.Unlock()
	if stopped && kind != kindStopped {
		return nil // its last checkpoint says it stopped
	}
	now := s.checkpointTime(stream)
	s.mu.Lock()
	cs := s.anchored[stream]
	s.mu.Unlock()
	cp := checkpoint{Stream: stream, Seq: cs.seq, Hash: hexHash(cs.hash), Time: now.UTC(), Kind: kind}
	if err := s.put(ctx, checkpointKey(s.o.Store.prefix, stream, cs.seq, now), cp.encode(), "application/json", nil); err != nil {
		return err
	}
	s.mu.Lock()
	s.lastCheckpoint[stream] = now
	if kind == kindHeartbeat && len(s.heartbeats) > 0 && s.heartbeats[0] == stream {
		s.heartbeats = s.heartbeats[1:]
	}
	if kind == kindStopped && len(s.stops) > 0 && s.stops[0] == stream {
		s.stops = s.stops[1:]
	}
	s.mu.Unlock()
	return nil
}

// closeStreams writes a closed checkpoint for every stream whose queue is
// anchored, except those stopped for good: their last checkpoint says
// they stopped.
func (s *Shipper) closeStreams(ctx context.Context) error {
	s.upMu.Lock()
	defer s.upMu.Unlock()
	if err := s.resolveRetention(ctx); err != nil {
		return fmt.Errorf("grantretry: worm: closing: %w", err)
	}
	s.mu.Lock()
	var names []string
	for name := range s.anchored {
		if !s.stopped[name] {
			names = append(names, name)
		}
	}
	s.mu.Unlock()
	for _, name := range names {
		if err := s.writeCheckpoint(ctx, name, kindClosed); err != nil {
			return fmt.Errorf("grantretry: worm: closing: %w", err)
		}
	}
	return nil
}

// failed counts a failed upload and says so in an audit line at the
// first failure and then once per Heartbeat. A failed heartbeat is
// dropped: the next one is due soon.
func (s *Shipper) failed(j job, err error) {
	clear(s.confirmed) // upMu is held: the store may have moved on meanwhile
	now := s.clock.Now()
	s.mu.Lock()
	s.failures++
	s.lastErr = err
	if s.failures == 1 {
		s.failedSince = now
	}
	if j.heartbeat != "" && len(s.heartbeats) > 0 && s.heartbeats[0] == j.heartbeat {
		s.heartbeats = s.heartbeats[1:]
	}
	alarm := s.failures == 1 || now.Sub(s.lastAlarm) >= s.o.Heartbeat
	if alarm {
		s.lastAlarm = now
	}
	b := s.backlogLocked(now)
	s.mu.Unlock()
	if alarm {
		s.line(zapcore.WarnLevel, MsgUnanchored, now,
			zap.Int(FieldRecords, b.Records), zap.Duration(FieldOldestAge, b.Age), zap.String("error", err.Error()))
	}
}

// succeeded ends a run of failures once the backlog is anchored, and
// says so.
func (s *Shipper) succeeded() {
	now := s.clock.Now()
	s.mu.Lock()
	if s.failures == 0 {
		s.mu.Unlock()
		return
	}
	s.lastErr = nil
	if len(s.queue) > 0 {
		s.mu.Unlock()
		return
	}
	outage := now.Sub(s.failedSince)
	s.failures = 0
	s.mu.Unlock()
	s.line(zapcore.InfoLevel, MsgAnchored, now, zap.Duration(FieldOldestAge, outage))
}

// line writes an audit line to Options.Audit and the logger.
func (s *Shipper) line(level zapcore.Level, msg string, now time.Time, fields ...zapcore.Field) {
	s.log.Check(level, msg).Write(fields...)
	if s.o.Audit == nil {
		return
	}
	buf, err := s.enc.EncodeEntry(zapcore.Entry{Level: level, Time: now, Message: msg}, fields)
	if err != nil {
		return
	}
	defer buf.Free()
	_, err = s.o.Audit.Write(buf.Bytes())
	if err == nil {
		err = s.o.Audit.Sync()
	}
	if err != nil {
		s.log.Warn("grantretry: worm: writing an audit line", zap.Error(err))
	}
}

// systemClock is the real clock.
type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

func (systemClock) Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
