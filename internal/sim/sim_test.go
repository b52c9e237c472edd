package sim

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
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
