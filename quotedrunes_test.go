package grantretry

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// An error that quotes the body with %q writes its non-printable runes
// (a no-break space, a zero-width joiner) and its invalid UTF-8 bytes as
// escapes: the body's runs are removed as %q writes them, too.
func TestScrubRemovesTheBodyAsPercentQWritesNonPrintableRunes(t *testing.T) {
	for _, body := range []string{
		"Jane\u00a0Doe\u00a0SSN\u00a0123\u00a045\u00a06789",
		"applicant\u200dRiverside\u200dArts 123-45-6789",
		"legacy \xff\xfe bytes of applicant 123-45-6789",
		"tax id\U000e0001 tag 98-7654321 of Riverside",
	} {
		tr := New(roundTripFunc(func(r *http.Request) (*http.Response, error) {
			b, _ := io.ReadAll(r.Body)
			r.Body.Close()
			return nil, fmt.Errorf("bad body %q", b)
		}), WithClock(newFakeClock()), WithBudget(0, time.Hour))
		req, _ := http.NewRequest(http.MethodPost, funderURL, strings.NewReader(body))
		_, err := tr.RoundTrip(req)
		if err == nil {
			t.Fatal("the call succeeded")
		}
		q := fmt.Sprintf("%q", body)
		q = q[1 : len(q)-1] // the body's bytes as %q writes them, without its quotes
		for i := 0; i+minBodyRun <= len(q); i++ {
			if w := q[i : i+minBodyRun]; strings.Contains(err.Error(), w) {
				t.Errorf("Error() = %s: holds %q of the body as %%q writes it", err, w)
				break
			}
		}
	}
}
