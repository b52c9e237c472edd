package grantretry

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jarcoal/httpmock"
)

// A call the funder owes for later (a quota, or a Retry-After past the
// deadline) leaves a letter that keeps the time: Letter.NotBefore is the
// outcome's, and its JSON names it not_before.
func TestLetterOfOwedCallKeepsNotBefore(t *testing.T) {
	for name, h := range map[string]http.Header{
		"quota":                {"X-Amzn-Errortype": {"LimitExceededException"}, "Retry-After": {"120"}},
		"retry_after_deadline": {"Retry-After": {"36000"}},
	} {
		t.Run(name, func(t *testing.T) {
			sink := &memLetters{}
			hn := newHarness(t, WithDeadLetter(sink))
			hn.mock.RegisterResponder(http.MethodPost, funderURL,
				httpmock.NewStringResponder(429, `{"message":"Rate exceeded"}`).HeaderSet(h))
			o := callOnce(t, hn)
			if o.StopReason != StopOwedLater || o.NotBefore.IsZero() {
				t.Fatalf("outcome %+v, want owed_later with a NotBefore", o)
			}
			l := sink.only(t)
			if !l.NotBefore.Equal(o.NotBefore) {
				t.Errorf("letter NotBefore = %v, want the outcome's %v", l.NotBefore, o.NotBefore)
			}
			if l.Version != LetterVersion || LetterVersion < 3 {
				t.Errorf("letter version %d, LetterVersion %d; want 3 or more", l.Version, LetterVersion)
			}
			b, err := json.Marshal(l)
			if err != nil {
				t.Fatal(err)
			}
			var m map[string]any
			if err := json.Unmarshal(b, &m); err != nil {
				t.Fatal(err)
			}
			if got, _ := m["not_before"].(string); got != o.NotBefore.Format(time.RFC3339Nano) {
				t.Errorf("not_before = %q, want %q", got, o.NotBefore.Format(time.RFC3339Nano))
			}
			var back Letter
			if err := json.Unmarshal(b, &back); err != nil || !back.NotBefore.Equal(l.NotBefore) {
				t.Errorf("read back NotBefore %v (%v), want %v", back.NotBefore, err, l.NotBefore)
			}
		})
	}
}

// A letter of work owed now (retries spent) has no time and writes no
// not_before.
func TestLetterWithoutNotBeforeOmitsIt(t *testing.T) {
	sink := &memLetters{}
	h := newHarness(t, WithDeadLetter(sink), WithBudget(1, time.Hour))
	h.mock.RegisterResponder(http.MethodPost, funderURL, seq(503))
	o := callOnce(t, h)
	if o.StopReason == StopOwedLater {
		t.Fatalf("outcome %+v, want one not owed later", o)
	}
	l := sink.only(t)
	if !l.NotBefore.IsZero() {
		t.Errorf("NotBefore = %v, want zero", l.NotBefore)
	}
	b, err := json.Marshal(l)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "not_before") {
		t.Errorf("letter JSON has not_before: %s", b)
	}
}
