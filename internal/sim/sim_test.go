package sim

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/grantretry/grantretry"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// shortScenario lasts 45 simulated seconds, 0.9 s of real time per policy:
// 10 s of service, a 20 s outage in which the workers start about 180
// calls, and 15 s of recovery.
func shortScenario() Scenario {
	sc := Default()
	sc.Workers = 12
	sc.Capacity = 15
	sc.OutageStart = 10 * time.Second
	sc.Outage = 20 * time.Second
	sc.Run = 45 * time.Second
	sc.Scale = 50
	sc.Deadline = 10 * time.Second
	return sc
}

// One short run of every policy, checked for what must hold whatever the
// machine's load: every policy reports, the counts add up, no key-sending
// policy duplicates a submission, and the default policy amplifies the
// outage less than the naive one. Ratios are asserted with wide margins.
func TestShortRunInvariants(t *testing.T) {
	sc := shortScenario()
	results, err := Run(context.Background(), sc, Policies(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != len(Policies()) {
		t.Fatalf("got %d results, want %d", len(results), len(Policies()))
	}
	byID := make(map[string]Result)
	for i, r := range results {
		if r.Policy.ID != Policies()[i].ID {
			t.Errorf("result %d is %s, want %s", i, r.Policy.ID, Policies()[i].ID)
		}
		byID[r.Policy.ID] = r
		checkCounts(t, sc, r)
	}

	// The ratios need the simulated clock kept: on a machine so loaded
	// that timers fire far too late, too few calls start in the outage
	// for them to mean anything.
	naive, def := byID["naive"], byID["default"]
	if p := min(naive.Pace(), def.Pace()); p < 0.5 {
		t.Skipf("the machine kept %.0f%% of the simulated pace; ratios not checked", 100*p)
	}
	if a := naive.Amplification(); !(a > 2) {
		t.Errorf("naive amplification %.2f, want above 2: it sends 4 attempts per call to a funder that is down", a)
	}
	if a := def.Amplification(); !(a < naive.Amplification()/2) {
		t.Errorf("default amplification %.2f, want below half of naive's %.2f", a, naive.Amplification())
	}
	if a := byID["throttle"].Amplification(); !(a < 2) {
		t.Errorf("throttle amplification %.2f, want below 2: the bucket drains after a handful of failures", a)
	}
}

func checkCounts(t *testing.T, sc Scenario, r Result) {
	t.Helper()
	name := r.Policy.ID
	if r.Calls == 0 || r.Calls < r.EarlyCalls+r.OutageCalls {
		t.Errorf("%s: %d calls, %d before the outage and %d in it", name, r.Calls, r.EarlyCalls, r.OutageCalls)
	}
	sum := 0
	for d, n := range r.Dispositions {
		if !known(d) {
			t.Errorf("%s: unknown disposition %q", name, d)
		}
		sum += n
	}
	if sum != r.Calls {
		t.Errorf("%s: dispositions add up to %d, want %d calls", name, sum, r.Calls)
	}
	var inRun int64
	for _, n := range r.PerSecond {
		inRun += n
	}
	if len(r.PerSecond) != int(sc.Run/time.Second) {
		t.Errorf("%s: %d seconds in the timeline, want %d", name, len(r.PerSecond), int(sc.Run/time.Second))
	}
	if inRun > r.Requests || r.OutageRequests > inRun || r.Requests == 0 {
		t.Errorf("%s: %d requests in the outage, %d in the run, %d in all: want 0 < outage <= run <= all", name, r.OutageRequests, inRun, r.Requests)
	}
	if r.PeakSecond < int(sc.OutageEnd()/time.Second) || r.PeakAfterRecovery != r.PerSecond[r.PeakSecond] {
		t.Errorf("%s: peak %d at %ds, want a window after %v", name, r.PeakAfterRecovery, r.PeakSecond, sc.OutageEnd())
	}
	if r.Policy.SendsKey && r.Duplicates != 0 {
		t.Errorf("%s sends Idempotency-Keys, yet the funder recorded %d duplicates", name, r.Duplicates)
	}
	if ok := r.Dispositions[grantretry.Succeeded]; ok > r.Recorded-r.Duplicates {
		t.Errorf("%s: %d calls succeeded but only %d applications were recorded", name, ok, r.Recorded-r.Duplicates)
	}
	if r.P50 > r.P99 {
		t.Errorf("%s: p50 %v above p99 %v", name, r.P50, r.P99)
	}
}

func known(d grantretry.Disposition) bool {
	for _, k := range Dispositions() {
		if d == k {
			return true
		}
	}
	return false
}

// The Markdown has both tables, each with one row per policy and as many
// cells in every row as in its header, and the SVG is well-formed XML with
// one line per policy.
func TestReportsAreWellFormed(t *testing.T) {
	sc := shortScenario()
	rep := Report{Scenario: sc, Results: fakeResults(sc), Command: "grantretry sim -seed 7"}

	var md bytes.Buffer
	if err := rep.WriteMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	tables := markdownTables(md.String())
	if len(tables) != 2 {
		t.Fatalf("got %d Markdown tables, want 2:\n%s", len(tables), md.String())
	}
	for i, tab := range tables {
		if len(tab) != 2+len(rep.Results) {
			t.Errorf("table %d has %d lines, want header, separator and %d rows", i, len(tab), len(rep.Results))
		}
		for _, line := range tab {
			if got, want := cells(line), cells(tab[0]); got != want {
				t.Errorf("table %d: %d cells in %q, want %d", i, got, line, want)
			}
		}
	}
	if !strings.Contains(md.String(), "`grantretry sim -seed 7`") {
		t.Error("the Markdown does not quote the command")
	}

	var svg bytes.Buffer
	if err := rep.WriteSVG(&svg); err != nil {
		t.Fatal(err)
	}
	elems := parseXML(t, svg.Bytes())
	if elems["svg"] != 1 || elems["polyline"] != len(rep.Results) {
		t.Errorf("SVG has %d svg and %d polyline elements, want 1 and %d", elems["svg"], elems["polyline"], len(rep.Results))
	}
	for _, r := range rep.Results {
		if !strings.Contains(svg.String(), ">"+r.Policy.Name+"<") {
			t.Errorf("the SVG legend lacks %q", r.Policy.Name)
		}
	}
}

// fakeResults are made-up results for every policy, so the report tests
// need no run.
func fakeResults(sc Scenario) []Result {
	var out []Result
	for i, p := range Policies() {
		per := make([]int64, int(sc.Run/time.Second))
		for s := range per {
			per[s] = int64(3 + (s*7+i)%5)
		}
		r := Result{
			Policy: p, Capacity: sc.Capacity, Calls: 100,
			Dispositions:   map[grantretry.Disposition]int{grantretry.Succeeded: 80, grantretry.DeadLetter: 20},
			OutageCalls:    30,
			OutageRequests: int64(30 * (i + 1)),
			Requests:       400,
			PerSecond:      per,
			P50:            120 * time.Millisecond,
			P99:            3 * time.Second,
			Recorded:       80,
			outage:         sc.Outage,
		}
		r.PeakSecond, r.PeakAfterRecovery = peakAfter(per, sc.OutageEnd())
		out = append(out, r)
	}
	return out
}

func markdownTables(doc string) [][]string {
	var tables [][]string
	var cur []string
	for _, line := range strings.Split(doc, "\n") {
		if strings.HasPrefix(line, "|") {
			cur = append(cur, line)
			continue
		}
		if cur != nil {
			tables = append(tables, cur)
			cur = nil
		}
	}
	return tables
}

// cells counts a Markdown row's cells: its unescaped pipes, less one.
func cells(line string) int {
	return strings.Count(line, "|") - strings.Count(line, `\|`) - 1
}

// parseXML decodes doc to its end and counts its elements by name.
func parseXML(t *testing.T, doc []byte) map[string]int {
	t.Helper()
	counts := make(map[string]int)
	dec := xml.NewDecoder(bytes.NewReader(doc))
	dec.Strict = true
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return counts
		}
		if err != nil {
			t.Fatalf("SVG is not well-formed XML: %v", err)
		}
		if se, ok := tok.(xml.StartElement); ok {
			counts[se.Name.Local]++
			if se.Name.Local == "svg" && se.Name.Space != "http://www.w3.org/2000/svg" {
				t.Errorf("svg element in namespace %q", se.Name.Space)
			}
		}
	}
}

// The funder answers 503 during the outage and 429 past its capacity,
// recording nothing; it records an application once per Idempotency-Key,
// and once per request when there is none.
func TestFunderAnswers(t *testing.T) {
	sc := Default()
	sc.Scale = 1
	sc.Capacity = 2
	sc.Latency = 0
	sc.OutageStart, sc.Outage, sc.Run = time.Hour, time.Hour, 3*time.Hour

	post := func(f *funder, key, id string) int {
		req := httptest.NewRequest(http.MethodPost, "/applications", bytes.NewReader(applicationBody(id, 1, 1)))
		if key != "" {
			req.Header.Set(grantretry.HeaderIdempotencyKey, key)
		}
		rec := httptest.NewRecorder()
		f.ServeHTTP(rec, req)
		return rec.Code
	}

	up := newFunder(sc, simClock{start: time.Now(), scale: 1})
	got := []int{post(up, "k1", "A"), post(up, "k1", "A"), post(up, "", "B")}
	if want := []int{201, 200, 429}; !equal(got, want) {
		t.Errorf("up: statuses %v, want %v (a replay, then over the capacity of 2)", got, want)
	}
	if rec, dups := up.ledger(); rec != 1 || dups != 0 {
		t.Errorf("up: recorded %d, duplicates %d; want 1 and 0", rec, dups)
	}

	// Without a key, each repeat is recorded again.
	up2 := newFunder(sc, simClock{start: time.Now(), scale: 1})
	post(up2, "", "C")
	post(up2, "", "C")
	if rec, dups := up2.ledger(); rec != 2 || dups != 1 {
		t.Errorf("unkeyed: recorded %d, duplicates %d; want 2 and 1", rec, dups)
	}

	down := newFunder(sc, simClock{start: time.Now().Add(-90 * time.Minute), scale: 1})
	if code := post(down, "k2", "D"); code != http.StatusServiceUnavailable {
		t.Errorf("during the outage: status %d, want 503", code)
	}
	if rec, _ := down.ledger(); rec != 0 || down.inOutage.Load() != 1 {
		t.Errorf("during the outage: recorded %d, counted %d in the outage; want 0 and 1", rec, down.inOutage.Load())
	}
}

func equal(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// An application accepted just before the outage is recorded, and its
// connection dropped when the outage begins: the answer is lost.
func TestOutageDropsAnswersInFlight(t *testing.T) {
	sc := Default()
	sc.Scale = 1
	sc.Latency = 1500 * time.Millisecond
	sc.OutageStart, sc.Outage, sc.Run = 500*time.Millisecond, time.Hour, 2*time.Hour
	f := newFunder(sc, simClock{start: time.Now(), scale: 1})
	url, stop, err := serve(f)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Post(url, "application/json", bytes.NewReader(applicationBody("E", 1, 1)))
	if err == nil {
		resp.Body.Close()
		t.Fatalf("got status %d, want the connection dropped", resp.StatusCode)
	}
	if v := grantretry.Classify(0, err); !v.Retryable {
		t.Errorf("dropped connection classified %s, want transient", v.Reason)
	}
	if rec, _ := f.ledger(); rec != 1 {
		t.Errorf("recorded %d, want 1", rec)
	}
}

func TestPercentileAndPeak(t *testing.T) {
	ds := []time.Duration{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	if p := percentile(ds, 0.5); p != 5 {
		t.Errorf("p50 = %v, want 5", p)
	}
	if p := percentile(ds, 0.99); p != 10 {
		t.Errorf("p99 = %v, want 10", p)
	}
	if p := percentile(nil, 0.5); p != 0 {
		t.Errorf("p50 of nothing = %v, want 0", p)
	}
	per := []int64{50, 9, 9, 1, 7, 7, 2}
	// The outage ends at 2.5s: the first whole window after it is second 3.
	if s, n := peakAfter(per, 2500*time.Millisecond); s != 4 || n != 7 {
		t.Errorf("peak = %d at %d, want 7 at 4", n, s)
	}
	if s, _ := peakAfter(per, 10*time.Second); s != -1 {
		t.Errorf("peak past the end at %d, want -1", s)
	}
}

func TestTargets(t *testing.T) {
	mk := func(id string, reqs int64, peak int64) Result {
		p, _ := lookup(id)
		return Result{Policy: p, Capacity: 10, OutageCalls: 10, OutageRequests: reqs, PeakAfterRecovery: peak}
	}
	checks := Targets([]Result{mk("naive", 40, 12), mk("exponential", 25, 11), mk("default", 11, 11)})
	want := []bool{true, false, true, false}
	if len(checks) != len(want) {
		t.Fatalf("got %d checks, want %d: %v", len(checks), len(want), checks)
	}
	for i, c := range checks {
		if c.Met != want[i] {
			t.Errorf("check %q: met %v, want %v", c.Text, c.Met, want[i])
		}
	}
}

func TestValidate(t *testing.T) {
	if err := Default().Validate(); err != nil {
		t.Fatalf("default scenario: %v", err)
	}
	for name, mutate := range map[string]func(*Scenario){
		"no capacity":          func(s *Scenario) { s.Capacity = 0 },
		"no workers":           func(s *Scenario) { s.Workers = 0 },
		"load above capacity":  func(s *Scenario) { s.Load = 1.5 },
		"outage past the run":  func(s *Scenario) { s.Outage = s.Run },
		"too few workers":      func(s *Scenario) { s.Workers, s.Latency = 1, 10*time.Second },
		"cap below base":       func(s *Scenario) { s.Cap = s.Base / 2 },
		"base scaled to zero":  func(s *Scenario) { s.Base = 1 },
		"negative retries":     func(s *Scenario) { s.Retries = -1 },
		"bad throttle":         func(s *Scenario) { s.MaxTokens = 0 },
		"bad breaker":          func(s *Scenario) { s.Threshold = 0 },
		"scale out of range":   func(s *Scenario) { s.Scale = 0.5 },
		"a run of three years": func(s *Scenario) { s.Run = 3 * 365 * 24 * time.Hour },
	} {
		s := Default()
		mutate(&s)
		if err := s.Validate(); err == nil {
			t.Errorf("%s: Validate accepted it", name)
		}
	}
	off := Default()
	off.Throttle, off.MaxTokens = false, 0
	off.Breaker, off.Threshold = false, 0
	if err := off.Validate(); err != nil {
		t.Errorf("throttle and breaker off: %v", err)
	}
}

func TestLookup(t *testing.T) {
	ps, err := Lookup([]string{"default", " naive"})
	if err != nil || len(ps) != 2 || ps[0].ID != "default" || ps[1].ID != "naive" {
		t.Errorf("Lookup(default, naive) = %v, %v", ps, err)
	}
	for _, ids := range [][]string{{"nope"}, {"naive", "naive"}, {}} {
		if _, err := Lookup(ids); err == nil {
			t.Errorf("Lookup(%q) succeeded", ids)
		}
	}
}

// scriptedServer answers with codes in turn, repeating the last, and counts
// the requests and those that carried an Idempotency-Key.
type scriptedServer struct {
	mu             sync.Mutex // guards the fields below
	codes          []int
	hits, withKeys int
}

func (s *scriptedServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.Header.Get(grantretry.HeaderIdempotencyKey) != "" {
		s.withKeys++
	}
	w.WriteHeader(s.codes[min(s.hits, len(s.codes)-1)])
	s.hits++
}

func (s *scriptedServer) script(codes ...int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.codes, s.hits, s.withKeys = codes, 0, 0
}

func (s *scriptedServer) counts() (hits, withKeys int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hits, s.withKeys
}

// The hand-rolled loop sends no key, retries transient answers only, and
// stops after its retries.
func TestRetrier(t *testing.T) {
	script := &scriptedServer{}
	srv := httptest.NewServer(script)
	defer srv.Close()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: &retrier{next: tr, retries: naiveRetries, wait: func(int) time.Duration { return 0 }}}

	for _, tc := range []struct {
		codes    []int
		status   int
		attempts int
		disp     grantretry.Disposition
	}{
		{[]int{503, 429, 503, 503, 201}, 503, 4, grantretry.DeadLetter},
		{[]int{503, 201}, 201, 2, grantretry.Succeeded},
		{[]int{422}, 422, 1, grantretry.FailedTerminal},
	} {
		script.script(tc.codes...)
		resp, err := client.Post(srv.URL, "application/json", strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		hits, withKeys := script.counts()
		disp := dispositionOf(context.Background(), resp, nil)
		if resp.StatusCode != tc.status || hits != tc.attempts || withKeys != 0 || disp != tc.disp {
			t.Errorf("script %v: status %d, %d attempts (%d keyed), %s; want %d, %d (none keyed), %s",
				tc.codes, resp.StatusCode, hits, withKeys, disp, tc.status, tc.attempts, tc.disp)
		}
	}
}

// Recovery lag runs from the end of the outage to the start of the first
// whole window at or after it that reaches the wanted count.
func TestRecoveryLag(t *testing.T) {
	per := []int64{12, 12, 0, 0, 0, 3, 10, 11, 12, 12}
	for _, tc := range []struct {
		from time.Duration
		want float64
		lag  time.Duration
		ok   bool
	}{
		{5 * time.Second, 10.8, 2 * time.Second, true},                 // window 7 has 11
		{4500 * time.Millisecond, 10.8, 2500 * time.Millisecond, true}, // first whole window is 5
		{5 * time.Second, 10, time.Second, true},                       // 10 reaches 10
		{8 * time.Second, 10.8, 0, true},                               // at once
		{5 * time.Second, 13, 0, false},                                // never
		{7500 * time.Millisecond, 12, 500 * time.Millisecond, true},    // window 8
		{20 * time.Second, 1, 0, false},                                // past the run
		{0, 12, 0, true},                                               // the first window
		{1 * time.Nanosecond, 12, time.Second - time.Nanosecond, true}, // window 1
		{9*time.Second + time.Nanosecond, 12, 0, false},                // no whole window left
	} {
		lag, ok := recoveryLag(per, tc.from, tc.want)
		if lag != tc.lag || ok != tc.ok {
			t.Errorf("recoveryLag(from %v, want %v) = %v, %v; want %v, %v", tc.from, tc.want, lag, ok, tc.lag, tc.ok)
		}
	}
}

// Goodput is per minute over the whole windows in the span, and NaN over
// none.
func TestPerMinute(t *testing.T) {
	per := make([]int64, 150)
	for s := range per {
		per[s] = 2
		if s >= 60 && s < 90 {
			per[s] = 0 // an outage of 30 s
		}
	}
	for _, tc := range []struct {
		from, to time.Duration
		want     float64
	}{
		{0, 150 * time.Second, 2 * 120 * 60 / 150.0},               // 240 in 150 windows
		{90 * time.Second, 150 * time.Second, 120},                 // a minute at 2 a second
		{60 * time.Second, 120 * time.Second, 60},                  // half of it down
		{89500 * time.Millisecond, 149500 * time.Millisecond, 120}, // windows 90 to 149
		{120 * time.Second, 180 * time.Second, 120},                // cut at the end of the run: 30 windows, per minute
	} {
		if got := perMinute(per, tc.from, tc.to); got != tc.want {
			t.Errorf("perMinute(%v, %v) = %v, want %v", tc.from, tc.to, got, tc.want)
		}
	}
	if got := perMinute(per, 150*time.Second, 210*time.Second); !math.IsNaN(got) {
		t.Errorf("perMinute past the run = %v, want NaN", got)
	}
}

// newResult reads recovery lag and goodput off the funder's counters: a
// hand-made timeline of 4 minutes with an outage from 30 s to 120 s and
// an offered load of 12 a second.
func TestResultRecoveryAndGoodput(t *testing.T) {
	sc := Default()
	f := newFunder(sc, simClock{start: time.Now(), scale: sc.Scale})
	for s := 0; s < 240; s++ {
		ok := int64(12)
		switch {
		case s >= 30 && s < 120:
			ok = 0
		case s >= 120 && s < 150:
			ok = 1 // the breaker's probes
		case s == 150:
			ok = 10 // 10 < 10.8: not yet
		}
		f.succeeded[s].Store(ok)
		f.fresh[s].Store(ok)
		f.arrivals[s].Store(ok)
	}
	p, _ := lookup("default")
	r := newResult(sc, p, run{f: f})
	if !r.Recovered || r.RecoveryLag != 31*time.Second {
		t.Errorf("recovery lag %v (recovered %v), want 31s", r.RecoveryLag, r.Recovered)
	}
	// 30 + 89 windows of 12, 30 of 1 and one of 10, in 4 minutes.
	if want := float64(119*12+30+10) / 4; r.Goodput != want {
		t.Errorf("goodput %v/min, want %v", r.Goodput, want)
	}
	// From 120 s: 30 windows of 1, one of 10 and 29 of 12.
	if want := float64(30+10+29*12) / 1; r.GoodputAfterRecovery != want {
		t.Errorf("goodput in the first minute after recovery %v, want %v", r.GoodputAfterRecovery, want)
	}
	if len(r.SucceededPerSecond) != 240 || len(r.RecordedPerSecond) != 240 {
		t.Errorf("timelines of %d and %d seconds, want 240", len(r.SucceededPerSecond), len(r.RecordedPerSecond))
	}
}

// The recovery target holds the default policy's recovery lag to 10 s in
// the default scenario and 15 s with other outage lengths; the other
// policies have none.
func TestRecoveryTargets(t *testing.T) {
	mk := func(id string, reqs int64, lag time.Duration, recovered bool) Result {
		p, _ := lookup(id)
		return Result{Policy: p, Capacity: 10, OutageCalls: 10, OutageRequests: reqs, RecoveryLag: lag, Recovered: recovered}
	}
	rs := []Result{mk("naive", 40, 0, true), mk("exponential", 25, 0, true), mk("default", 11, 12*time.Second, true)}
	other := Default()
	other.Outage = 30 * time.Second
	for _, tc := range []struct {
		sc   Scenario
		rs   []Result
		want []bool
	}{
		{Default(), rs, []bool{false}},                               // 12 s > 10 s
		{other, rs, []bool{true}},                                    // 12 s <= 15 s
		{other, []Result{mk("default", 1, 0, false)}, []bool{false}}, // never recovered
		{Default(), []Result{mk("jitter", 50, 0, true)}, nil},        // nothing to check
	} {
		checks := RecoveryTargets(tc.sc, tc.rs)
		if len(checks) != len(tc.want) {
			t.Fatalf("outage %v: got %d checks, want %d: %v", tc.sc.Outage, len(checks), len(tc.want), checks)
		}
		for i, c := range checks {
			if c.Met != tc.want[i] || !strings.Contains(c.Text, "recovery lag") {
				t.Errorf("outage %v: check %q: met %v, want %v", tc.sc.Outage, c.Text, c.Met, tc.want[i])
			}
		}
	}
}

// The low-volume funder fails the blip's requests in turn and notes when
// the last one came, draws the random share the same way for the same
// seed, and fails only the first attempt of the first call it sees after
// the probe delay.
func TestFunderBlipShareAndProbe(t *testing.T) {
	sc := LowVolumeDefault()
	sc.Scale = 1
	sc.Latency = 0
	sc.BlipAt, sc.BlipFailures, sc.FailShare = 0, 3, 0
	f := newFunder(sc, simClock{start: time.Now(), scale: 1})
	f.probeAfter = time.Nanosecond
	post := func(corr, id string) int {
		req := httptest.NewRequest(http.MethodPost, "/applications", bytes.NewReader(applicationBody(id, 1, 1)))
		req.Header.Set(grantretry.HeaderCorrelationID, corr)
		rec := httptest.NewRecorder()
		f.ServeHTTP(rec, req)
		return rec.Code
	}
	got := []int{post("c1", "A"), post("c1", "A"), post("c2", "A")}
	if want := []int{503, 503, 503}; !equal(got, want) {
		t.Errorf("blip: statuses %v, want %v", got, want)
	}
	if _, ended := f.blipEndedAt(); !ended {
		t.Error("the blip's 3 failures were served, yet it has not ended")
	}
	f.blipEnd.Store(0) // as if the blip had ended at the start: the probe is due
	// c2 was seen in the blip: a retry, not a new call. c3 is new.
	got = []int{post("c2", "A"), post("c3", "B"), post("c3", "B"), post("c4", "C")}
	if want := []int{201, 503, 201, 201}; !equal(got, want) {
		t.Errorf("probe: statuses %v, want %v", got, want)
	}
	if f.probed() != "c3" {
		t.Errorf("probed %q, want c3", f.probed())
	}

	// The random share: the same seed draws alike, and about FailShare
	// of 20000 draws fail.
	share := func(seed uint64) (fails int, first []bool) {
		s := LowVolumeDefault()
		s.Seed = seed
		g := newFunder(s, simClock{start: time.Now(), scale: 1})
		for i := range 20000 {
			fail := g.draw(fmt.Sprintf("W000-%06d", i/3)) < s.FailShare
			if fail {
				fails++
			}
			if i < 50 {
				first = append(first, fail)
			}
		}
		return fails, first
	}
	n1, a := share(7)
	n2, b := share(7)
	_, c := share(8)
	if n1 != n2 || !slices.Equal(a, b) {
		t.Error("one seed drew differently twice")
	}
	if slices.Equal(a, c) && n1 == 0 {
		t.Error("seeds 7 and 8 drew alike")
	}
	if n1 < 800 || n1 > 1200 {
		t.Errorf("%d of 20000 draws failed, want about 1000 (5%%)", n1)
	}
}

// lowCall is a finished call of a grantretry policy, for the low-volume
// measures.
func lowCall(start time.Duration, disp grantretry.Disposition, attempts int, stop, corr string) callRecord {
	return callRecord{start: start, callEnd: callEnd{disp: disp, attempts: attempts, stop: stop, corr: corr}}
}

// The low-volume measures on a hand-made run: calls after the blip's last
// failure, those that met a transient failure, those refused a retry, and
// the last refusal.
func TestLowVolumeRunMeasures(t *testing.T) {
	sc := LowVolumeDefault()
	f := newFunder(sc, simClock{start: time.Now(), scale: sc.Scale})
	f.blipEnd.Store(int64(10 * time.Minute))
	at := func(m float64) time.Duration { return time.Duration(m * float64(time.Minute)) }
	calls := [][]callRecord{{
		lowCall(at(9), grantretry.DeadLetter, 5, grantretry.StopRetriesSpent, "a"), // in the blip
		lowCall(at(9.9), grantretry.DeadLetter, 1, grantretry.StopThrottled, "b"),  // in the blip
		lowCall(at(10.5), grantretry.Succeeded, 1, grantretry.StopSuccess, "c"),
		lowCall(at(11), grantretry.DeadLetter, 1, grantretry.StopThrottled, "d"),    // refused
		lowCall(at(12), grantretry.Succeeded, 2, grantretry.StopSuccess, "e"),       // retried
		lowCall(at(30), grantretry.DeadLetter, 1, grantretry.StopThrottled, "f"),    // refused
		lowCall(at(31), grantretry.CircuitOpen, 0, grantretry.StopCircuitOpen, "g"), // sent nothing
		lowCall(at(32), grantretry.CircuitOpen, 1, grantretry.StopCircuitOpen, "h"), // met one
		lowCall(at(40), grantretry.Succeeded, 1, grantretry.StopSuccess, "i"),
	}}
	r := lowVolumeRun(sc, run{calls: calls, f: f})
	if r.Calls != 9 || r.AfterBlip != 7 || r.Met != 4 || r.Refused != 2 || !r.Refusals || r.LastRefusal != 20*time.Minute {
		t.Errorf("measured %+v; want 9 calls, 7 after the blip, 4 met a failure, 2 refused, the last 20m after the blip", r)
	}
	for corr, want := range map[string]ProbeOutcome{"e": ProbeRetried, "d": ProbeRefused, "h": ProbeBreaker, "a": ProbeRetried, "i": ProbeOther, "zz": ProbeNone, "": ProbeNone} {
		if got := probeOutcome(calls, corr); got != want {
			t.Errorf("probe of %q: %s, want %s", corr, got, want)
		}
	}

	// With no blip over, nothing counts as after it.
	g := newFunder(sc, simClock{start: time.Now(), scale: sc.Scale})
	if r := lowVolumeRun(sc, run{calls: calls, f: g}); r.BlipEnded || r.AfterBlip != 0 || r.Met != 0 {
		t.Errorf("no blip: %+v", r)
	}
}

// Retries are back by the first probe delay from which every probe's call
// got its retry; the summaries take medians and ranges over seeds, the
// censored ones last.
func TestLowVolumeSummaries(t *testing.T) {
	probes := []time.Duration{time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute}
	R, X, B := ProbeRetried, ProbeRefused, ProbeBreaker
	runs := []LowVolumeRun{
		{Seed: 1, Probes: []ProbeOutcome{R, R, R, R}, Met: 10, Refused: 0},
		{Seed: 2, Probes: []ProbeOutcome{B, R, R, R}, Met: 10, Refused: 1, Refusals: true, LastRefusal: 30 * time.Second},
		{Seed: 3, Probes: []ProbeOutcome{X, R, X, R}, Met: 20, Refused: 4, Refusals: true, LastRefusal: 4 * time.Minute},
		{Seed: 4, Probes: []ProbeOutcome{X, X, X, X}, Met: 0},
	}
	wantBack := []struct {
		d  time.Duration
		ok bool
	}{{time.Minute, true}, {2 * time.Minute, true}, {10 * time.Minute, true}, {0, false}}
	for i, run := range runs {
		if d, ok := run.BackBy(probes); d != wantBack[i].d || ok != wantBack[i].ok {
			t.Errorf("seed %d: back by %v, %v; want %v, %v", run.Seed, d, ok, wantBack[i].d, wantBack[i].ok)
		}
	}
	p, _ := lookup("default")
	r := LowVolumeResult{Policy: p, Runs: runs}
	if met, refused := r.Met(); met != 40 || refused != 5 || r.RefusedShare() != 0.125 {
		t.Errorf("met %d, refused %d, share %v; want 40, 5, 0.125", met, refused, r.RefusedShare())
	}
	if got, want := backBySummary(r, probes).text(), "6m0s (range 1m0s to > 10m0s)"; got != want {
		t.Errorf("back by: %q, want %q", got, want)
	}
	if backBySummary(r, probes).allWithin(time.Hour) {
		t.Error("a censored seed counted as back within an hour")
	}
	last, n := lastRefusalSummary(r)
	if got, want := last.text(), "15s (range 0s to 4m0s)"; got != want || n != 2 {
		t.Errorf("last refusal: %q in %d seeds, want %q in 2", got, n, want)
	}
	if got, want := refusedShareSummary(r), "10.0% (range 0.0% to 20.0%)"; got != want {
		t.Errorf("refused share per seed: %q, want %q", got, want)
	}
	if retried, by := r.Retried(0); retried != 1 || by[X] != 2 || by[B] != 1 {
		t.Errorf("probe 0: %d retried, %v", retried, by)
	}

	checks := LowVolumeTargets(Scenario{Probes: probes}, []LowVolumeResult{r})
	if len(checks) != 2 || checks[0].Met || checks[1].Met {
		t.Errorf("targets %v, want two, neither met", checks)
	}
	good := LowVolumeResult{Policy: p, Runs: runs[:2]}
	checks = LowVolumeTargets(Scenario{Probes: probes}, []LowVolumeResult{good})
	if len(checks) != 2 || !checks[1].Met || checks[0].Met { // 1 of 20 is 5%
		t.Errorf("targets %v, want the share not met and retries back by 2m met", checks)
	}
}

// The low-volume Markdown has both tables, each row as wide as its header,
// and its chart is well-formed SVG with one line per policy.
func TestLowVolumeReportsAreWellFormed(t *testing.T) {
	sc := LowVolumeDefault()
	sc.Seeds = 2
	var rs []LowVolumeResult
	for _, id := range []string{"throttle", "default"} {
		p, _ := lookup(id)
		runs := make([]LowVolumeRun, sc.Seeds)
		for i := range runs {
			runs[i] = LowVolumeRun{Seed: uint64(i + 1), Met: 10, Refused: i, AfterBlip: 300, Probes: make([]ProbeOutcome, len(sc.Probes)), pace: 1}
			for j := range runs[i].Probes {
				runs[i].Probes[j] = ProbeRetried
			}
		}
		rs = append(rs, LowVolumeResult{Policy: p, Runs: runs})
	}
	rep := LowVolumeReport{Scenario: sc, Results: rs, Command: "grantretry sim -scenario low-volume"}
	var md bytes.Buffer
	if err := rep.WriteMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	tables := markdownTables(md.String())
	if len(tables) != 2 || len(tables[0]) != 2+len(rs) || len(tables[1]) != 2+len(sc.Probes) {
		t.Fatalf("tables %v, want one of %d rows and one of %d:\n%s", tables, len(rs), len(sc.Probes), md.String())
	}
	for i, tab := range tables {
		for _, line := range tab {
			if got, want := cells(line), cells(tab[0]); got != want {
				t.Errorf("table %d: %d cells in %q, want %d", i, got, line, want)
			}
		}
	}
	var text bytes.Buffer
	if err := rep.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "NOT MET  full jitter + throttle: 5.0% of the 20 calls") {
		t.Errorf("text lacks the refused-share target:\n%s", text.String())
	}
	var svg bytes.Buffer
	if err := rep.WriteSVG(&svg); err != nil {
		t.Fatal(err)
	}
	if elems := parseXML(t, svg.Bytes()); elems["svg"] != 1 || elems["polyline"] != len(rs) {
		t.Errorf("SVG has %d svg and %d polyline elements, want 1 and %d", elems["svg"], elems["polyline"], len(rs))
	}
}

func TestValidateLowVolume(t *testing.T) {
	if err := LowVolumeDefault().Validate(); err != nil {
		t.Fatalf("low-volume scenario: %v", err)
	}
	for name, mutate := range map[string]func(*Scenario){
		"no blip":             func(s *Scenario) { s.BlipFailures = 0 },
		"blip after the run":  func(s *Scenario) { s.BlipAt = s.Run },
		"no seeds":            func(s *Scenario) { s.Seeds = 0 },
		"probes out of order": func(s *Scenario) { s.Probes = []time.Duration{2 * time.Minute, time.Minute} },
		"a probe of 0":        func(s *Scenario) { s.Probes = []time.Duration{0} },
		"share of 1":          func(s *Scenario) { s.FailShare = 1 },
		"spread of 1":         func(s *Scenario) { s.Spread = 1 },
		"refill under 1ms":    func(s *Scenario) { s.Refill = 500 * time.Millisecond }, // 0.5ms at scale 1000
		"outage past the run": func(s *Scenario) { s.OutageStart, s.Outage = time.Hour, 4*time.Hour },
		"an unknown kind":     func(s *Scenario) { s.Kind = "calm" },
	} {
		s := LowVolumeDefault()
		mutate(&s)
		if err := s.Validate(); err == nil {
			t.Errorf("%s: Validate accepted it", name)
		}
	}
	off := LowVolumeDefault()
	off.Probes = nil
	off.Refill = 100000 * time.Hour
	if err := off.Validate(); err != nil {
		t.Errorf("no probes and a refill of 100000h: %v", err)
	}
	if _, err := RunLowVolume(context.Background(), Default(), Policies(), nil); err == nil {
		t.Error("RunLowVolume ran the outage scenario")
	}
	naive, _ := Lookup([]string{"naive"})
	if _, err := RunLowVolume(context.Background(), LowVolumeDefault(), naive, nil); err == nil {
		t.Error("RunLowVolume ran a policy with no outcomes")
	}
}

// A short low-volume run, with no random failures so the outcome is
// certain: after the blip, a call failing 2 minutes later gets its retry
// with the default refill, and is refused one with a refill so slow that
// only successes count, as in gRFC A6.
func TestShortLowVolumeRun(t *testing.T) {
	sc := LowVolumeDefault()
	sc.Run, sc.BlipAt, sc.FailShare = 8*time.Minute, time.Minute, 0
	sc.Seeds, sc.Probes = 2, []time.Duration{2 * time.Minute}
	ps, _ := Lookup([]string{"throttle"})
	for _, tc := range []struct {
		refill time.Duration
		want   ProbeOutcome
	}{
		{time.Minute, ProbeRetried},
		{100000 * time.Hour, ProbeRefused},
	} {
		sc.Refill = tc.refill
		rs, err := RunLowVolume(context.Background(), sc, ps, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, run := range rs[0].Runs {
			if !run.BlipEnded || run.AfterBlip == 0 || run.Refused > run.Met || run.Met > run.AfterBlip {
				t.Errorf("refill %v, seed %d: %+v", tc.refill, run.Seed, run)
			}
			if run.Probes[0] != tc.want {
				t.Errorf("refill %v, seed %d: the call failing 2m after the blip was %s, want %s", tc.refill, run.Seed, run.Probes[0], tc.want)
			}
		}
	}
}
