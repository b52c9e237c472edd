package fleetsim

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"strings"
	"testing"
	"time"
)

const ms = time.Millisecond

// chartRuns is a small storm of each kind: up 1 s, down 2 s, up 1 s.
func chartRuns() []Result {
	cfg := Config{Processes: 2, Workers: 1, Pace: 20 * ms, Before: time.Second, Outage: 2 * time.Second, After: time.Second, Seed: 1}
	local, fleetRun, single := Result{Config: cfg}, Result{Config: cfg}, Result{Config: cfg}
	fleetRun.Fleet = true
	single.Processes, single.Workers = 1, 2
	for at := 100 * ms; at < time.Second; at += 100 * ms { // 9 answered, one per 100 ms
		local.hits = append(local.hits, hit{at: at, ok: true})
	}
	local.hits = append(local.hits,
		hit{at: 1000 * ms}, hit{at: 1002 * ms}, hit{at: 1012 * ms}, // 100 ms bucket 10; 5 ms buckets 4, 4, 6
		hit{at: 1150 * ms}, // bucket 11; 5 ms bucket 34
		hit{at: 2000 * ms}, // a probe: bucket 20, out of the zoom
		hit{at: 3050 * ms, ok: true})
	local.OutageAttempts, local.StoppedAfter, local.AllStopped = 5, 4, 500*ms
	fleetRun.hits = []hit{{at: 900 * ms, ok: true}, {at: 1001 * ms}, {at: 1004 * ms}, {at: 3001 * ms, ok: true}}
	fleetRun.OutageAttempts, fleetRun.StoppedAfter, fleetRun.AllStopped = 2, 2, 12*ms
	single.hits = []hit{{at: 1003 * ms}}
	single.OutageAttempts, single.StoppedAfter, single.AllStopped = 1, 1, -1
	return []Result{local, fleetRun, single}
}

// parsed is what the chart's XML holds.
type parsed struct {
	root     string
	comments []string
	paths    map[string]string // id: d
	texts    string            // every text, one a line
}

func parseSVG(t *testing.T, doc []byte) parsed {
	t.Helper()
	p := parsed{paths: map[string]string{}}
	var texts strings.Builder
	d := xml.NewDecoder(bytes.NewReader(doc))
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed XML: %v\n%s", err, doc)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			if p.root == "" {
				p.root = tok.Name.Local
			}
			if tok.Name.Local != "path" {
				continue
			}
			var id, dd string
			for _, a := range tok.Attr {
				switch a.Name.Local {
				case "id":
					id = a.Value
				case "d":
					dd = a.Value
				}
			}
			if id != "" {
				if _, dup := p.paths[id]; dup {
					t.Fatalf("id %q twice", id)
				}
				p.paths[id] = dd
			}
		case xml.CharData:
			texts.Write(tok)
		case xml.Comment:
			p.comments = append(p.comments, string(tok))
		}
	}
	p.texts = texts.String()
	return p
}

func TestWriteSVGSeries(t *testing.T) {
	var b bytes.Buffer
	command := `cd fleet && go run ./cmd/grantretry-fleet sim -pg "$GRANTRETRY_PG_DSN" -chart x.svg`
	if err := WriteSVG(&b, chartRuns(), command); err != nil {
		t.Fatal(err)
	}
	p := parseSVG(t, b.Bytes())
	if p.root != "svg" {
		t.Fatalf("root element %q", p.root)
	}
	if len(p.comments) != 1 || strings.TrimSpace(p.comments[0]) != "$ "+command {
		t.Fatalf("comments %q", p.comments)
	}
	// Bars per series: one subpath per bucket with an attempt of its kind.
	for id, want := range map[string]int{
		"local-full-ok": 10, "local-full-failed": 3, "local-zoom-ok": 0, "local-zoom-failed": 3,
		"fleet-full-ok": 2, "fleet-full-failed": 1, "fleet-zoom-ok": 0, "fleet-zoom-failed": 1,
		"single-full-ok": 0, "single-full-failed": 1, "single-zoom-ok": 0, "single-zoom-failed": 1,
	} {
		d, ok := p.paths[id]
		if !ok {
			t.Errorf("no series %s", id)
			continue
		}
		if got := strings.Count(d, "M"); got != want {
			t.Errorf("%s: %d bars, want %d: %q", id, got, want, d)
		}
	}
	for _, want := range []string{
		"local: 2 processes, each its own state", "fleet: 2 processes sharing the database", "single: 1 process, 2 workers",
		"5 attempts in the outage", "4 before all stopped, 500ms in",
		"all stopped after 500ms, past this window", "all stopped, 12ms", "some process never stopped",
		"attempts per 100 ms", "attempts per 5 ms", "time since the start (s)", "time since the outage began (ms)",
		"answered (201)", "failed (503)", "outage: every attempt 503", "every process refusing calls",
	} {
		if !strings.Contains(p.texts, want) {
			t.Errorf("no text %q", want)
		}
	}
}

func TestWriteSVGCommentStaysWellFormed(t *testing.T) {
	var b bytes.Buffer
	if err := WriteSVG(&b, chartRuns(), "sim --seed 1 -chart a--b.svg-"); err != nil {
		t.Fatal(err)
	}
	if p := parseSVG(t, b.Bytes()); len(p.comments) != 1 {
		t.Fatalf("comments %q", p.comments)
	}
}

func TestWriteSVGRefusesTwoRunsOfOneName(t *testing.T) {
	rs := chartRuns()
	if err := WriteSVG(io.Discard, []Result{rs[0], rs[0]}, ""); err == nil {
		t.Fatal("no error")
	}
}
