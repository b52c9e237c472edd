package grantsgov

import (
	"bufio"
	"bytes"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// sample is one real answer kept under testdata/corpus: its body, byte for
// byte, and the status and Content-Type its note records.
type sample struct {
	name   string
	body   []byte
	status int
	header http.Header
	note   map[string]string
}

func loadSample(t testing.TB, name string) sample {
	t.Helper()
	base := filepath.Join("testdata", "corpus", name)
	body, err := os.ReadFile(base + ".body")
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(base + ".note")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	note := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ": ")
		if ok {
			note[k] = v
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	status, err := strconv.Atoi(note["status"])
	if err != nil {
		t.Fatalf("%s.note: status: %v", name, err)
	}
	return sample{name: name, body: body, status: status,
		header: http.Header{"Content-Type": {note["content-type"]}}, note: note}
}

func (s sample) response() *http.Response {
	return &http.Response{StatusCode: s.status, Header: s.header.Clone(), Body: http.NoBody}
}

// corpusVerdicts is what each real answer must be read as. Every Grants.gov
// refusal is terminal; the generic server error is transient; a text no
// rule knows is the status's verdict, marked unknown; an answer that is no
// fault and no refusal is left to the status.
var corpusVerdicts = []struct {
	name      string
	ok        bool
	retryable bool
	reason    string
}{
	{"authorization-error", true, false, "grantsgov:authorization"},
	{"certificate-expired", true, false, "grantsgov:certificate"},
	{"confirm-delivery-already-retrieved", true, false, "grantsgov:retrieved"},
	{"confirm-delivery-authorization-failure", true, false, "grantsgov:authorization"},
	{"confirm-delivery-no-application-status", true, true, "grantsgov:unknown"},
	{"confirm-delivery-status-received", true, false, "grantsgov:status"},
	{"confirm-delivery-status-received-by-agency", true, false, "grantsgov:status"},
	{"confirm-delivery-status-tracking-number-assigned", true, false, "grantsgov:status"},
	{"get-application-not-found", true, false, "grantsgov:not_found"},
	{"get-application-zip-not-found", true, false, "grantsgov:not_found"},
	{"get-application-zip-with-attachment", false, false, ""},
	{"missing-certificate", true, false, "grantsgov:certificate"},
	{"no-tcertificate", true, false, "grantsgov:certificate"},
	{"opportunity-list-filter-required", true, false, "grantsgov:filter"},
	{"server-error", true, true, "grantsgov:server"},
	{"simpler-soap-certificate-not-configured", true, false, "grantsgov:certificate"},
	{"submission-list-invalid-filter", true, false, "grantsgov:filter"},
	{"update-application-info-success-false", true, false, "grantsgov:authorization"},
	{"validation-tracking-number-missing", true, false, "grantsgov:validation"},
	{"validation-tracking-number-pattern", true, false, "grantsgov:validation"},
}

// TestClassifyFaultReadsGrantsGovCorpus reads every real answer kept under
// testdata/corpus as the table says, and leaves each body as it was.
func TestClassifyFaultReadsGrantsGovCorpus(t *testing.T) {
	for _, tc := range corpusVerdicts {
		t.Run(tc.name, func(t *testing.T) {
			s := loadSample(t, tc.name)
			orig := bytes.Clone(s.body)
			c, ok := ClassifyFault(s.response(), s.body)
			if ok != tc.ok || c.Retryable != tc.retryable || c.Reason != tc.reason {
				t.Errorf("ClassifyFault = %+v, %v; want {Retryable:%v Reason:%s}, %v",
					c, ok, tc.retryable, tc.reason, tc.ok)
			}
			if !bytes.Equal(s.body, orig) {
				t.Error("ClassifyFault changed the body")
			}
		})
	}
}

// TestGrantsGovCorpusSamplesNameTheirSource holds every sample to a note
// that says where it comes from, and to a verdict in the table.
func TestGrantsGovCorpusSamplesNameTheirSource(t *testing.T) {
	bodies, err := filepath.Glob(filepath.Join("testdata", "corpus", "*.body"))
	if err != nil {
		t.Fatal(err)
	}
	inTable := map[string]bool{}
	for _, tc := range corpusVerdicts {
		inTable[tc.name] = true
	}
	if len(bodies) != len(corpusVerdicts) {
		t.Errorf("%d samples, %d verdicts", len(bodies), len(corpusVerdicts))
	}
	for _, b := range bodies {
		name := strings.TrimSuffix(filepath.Base(b), ".body")
		s := loadSample(t, name)
		for _, k := range []string{"repository", "commit", "source", "how", "content-type"} {
			if s.note[k] == "" {
				t.Errorf("%s.note has no %s", name, k)
			}
		}
		if len(s.note["commit"]) != 40 {
			t.Errorf("%s.note: commit %q is not a full hash", name, s.note["commit"])
		}
		if !inTable[name] {
			t.Errorf("%s has no verdict in corpusVerdicts", name)
		}
	}
}
