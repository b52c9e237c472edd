package grantretry

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// textError is an error whose text is made once, so that measuring a
// scrub measures the scrub alone.
type textError struct{ text string }

func (e textError) Error() string { return e.text }

// An error that quotes a body of megabytes is scrubbed as far as its text
// is kept (maxErrorText), not whole: the scrub's memory does not grow with
// the quote, and the text it returns fits an audit field uncut.
func TestScrubWorksOnlyOnTheTextItKeeps(t *testing.T) {
	body := randomText(8 << 20)
	req, _ := http.NewRequest(http.MethodPost, funderURL, nil)
	c := &call{t: New(nil), req: req, p: payload{orig: io.NopCloser(nil), buf: []byte(body)}, out: Outcome{Attempts: 1}}
	err := textError{"validation failed for request body " + body}
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	got := c.scrub(err)
	runtime.ReadMemStats(&m1)
	if n := m1.TotalAlloc - m0.TotalAlloc; n > 1<<20 {
		t.Errorf("scrubbing an error that quotes an 8 MiB body allocated %d bytes, want under 1 MiB", n)
	}
	if len(got) > maxFieldText || capText(got) != got {
		t.Errorf("the scrubbed text is %d bytes, want it within an audit field's %d", len(got), maxFieldText)
	}
	if !strings.HasPrefix(got, "validation failed for request body "+redacted) || strings.Contains(got, body[:64]) {
		t.Errorf("scrubbed text %.120q: want the body's run removed", got)
	}
}

// Each distinct error text of a call is scrubbed once, whoever writes it
// (its attempt line, the disposition line, the letter, Error): three
// attempts that fail with the same text read the body through GetBody for
// the attempts, the hash, the letter and one scrub, not once per text
// written.
func TestScrubReadsTheBodyOncePerDistinctErrorText(t *testing.T) {
	body := randomText(64 << 10)
	logger := zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(io.Discard), zapcore.InfoLevel))
	tr := New(roundTripFunc(func(r *http.Request) (*http.Response, error) {
		_, _ = io.Copy(io.Discard, r.Body)
		r.Body.Close()
		return nil, errors.New("read tcp 192.0.2.7:443: connection reset by peer")
	}), WithClock(newFakeClock()), WithBudget(2, time.Hour), WithLogger(logger), WithDeadLetter(&memLetters{}))
	req, _ := http.NewRequest(http.MethodPost, funderURL, strings.NewReader(body))
	gb, calls := req.GetBody, 0
	req.GetBody = func() (io.ReadCloser, error) { calls++; return gb() }
	_, err := tr.RoundTrip(req)
	if !errors.Is(err, ErrDeadLetter) {
		t.Fatalf("error %v, want a dead letter", err)
	}
	const attempts, hash, letter, scrub = 3, 1, 1, 1
	if want := attempts + hash + letter + scrub; calls > want {
		t.Errorf("GetBody called %d times, want at most %d (3 attempts, the hash, the letter, one scrub)", calls, want)
	}
}

// A scrubbed text is cut at maxErrorText bytes even where its markers are
// longer than what they replace, and its note counts the bytes of the
// message it left out.
func TestScrubbedTextIsCutWithHowMuchItLeftOut(t *testing.T) {
	msg := strings.Repeat("pin 4321; ", 1000) // 10,000 bytes, a 4-byte secret in each 10
	req, _ := http.NewRequest(http.MethodGet, funderURL, nil)
	req.Header.Set("X-Portal-Pin", "4321")
	got := redactor{}.scrub(textError{msg}, req)
	kept, note, ok := strings.Cut(got, "...[")
	if !ok || len(kept) > maxErrorText || capText(got) != got {
		t.Fatalf("scrubbed text of %d bytes (%d before its note): want at most %d, and a note", len(got), len(kept), maxErrorText)
	}
	var more int
	if _, err := fmt.Sscanf(note, "%d more bytes of the error not kept]", &more); err != nil {
		t.Fatalf("note %q: %v", note, err)
	}
	if shown := strings.ReplaceAll(kept, redacted, "4321"); shown != msg[:len(msg)-more] {
		t.Errorf("the note says %d bytes were left out, but the text kept stands for %d", more, len(shown))
	}
	if strings.Contains(got, "4321") {
		t.Errorf("the secret survives: %q", got[len(got)-80:])
	}
}
