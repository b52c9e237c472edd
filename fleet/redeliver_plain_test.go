package fleet

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/grantretry/grantretry"
	"github.com/grantretry/grantretry/deadletter"
)

// Through a plain client (no grantretry Transport, no outcome),
// Redeliver records what the send did as deadletter.Dir.Redeliver does,
// by the client's trace: a refused connection sent nothing, and leaves
// the letter as it was, not ambiguous; a request sent and then hung up
// on adds one attempt and its error, and makes the letter ambiguous.
func TestRedeliverThroughAPlainClientRecordsWhatLeft(t *testing.T) {
	ctx := context.Background()
	letters := NewLetters(newPool(t))
	defer letters.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	ln.Close() // nothing listens: the connection is refused
	hangUp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, _, _ := w.(http.Hijacker).Hijack()
		c.Close()
	}))
	defer hangUp.Close()

	send := func(url string, i int) (before, after *grantretry.Letter, err error) {
		t.Helper()
		l := testLetter(url, i)
		if err := letters.PutDeadLetter(ctx, l); err != nil {
			t.Fatal(err)
		}
		cs, cerr := letters.ClaimIDs(ctx, "w", []string{l.ID})
		if cerr != nil || len(cs) != 1 {
			t.Fatalf("ClaimIDs: %d, %v", len(cs), cerr)
		}
		b := *cs[0].Letter
		_, err = letters.Redeliver(ctx, cs[0], &http.Client{}, deadletter.TrustKey)
		got, _, gerr := letters.Get(ctx, l.ID)
		if gerr != nil {
			t.Fatal(gerr)
		}
		return &b, got, err
	}

	before, after, err := send(closed, 1)
	if err == nil || errors.Is(err, ErrLeaseLost) {
		t.Errorf("Redeliver to a closed port: %v; want the client's error", err)
	}
	if after.Ambiguous || after.Attempts != before.Attempts || after.LastError != before.LastError || !after.FirstAttempt.Equal(before.FirstAttempt) {
		t.Errorf("a refused connection (nothing sent) changed the letter: attempts %d→%d, ambiguous %v, last error %q, first attempt %v",
			before.Attempts, after.Attempts, after.Ambiguous, after.LastError, after.FirstAttempt)
	}

	before, after, err = send(hangUp.URL, 2)
	if err == nil {
		t.Errorf("Redeliver to a funder that hung up: nil error")
	}
	if after.Attempts != before.Attempts+1 || after.LastError == "" || after.LastStatus != 0 || !after.Ambiguous || after.FirstAttempt.IsZero() {
		t.Errorf("a hang-up after the request was sent: attempts %d→%d, last error %q, last status %d, ambiguous %v, first attempt %v; want one attempt more, its error, ambiguous",
			before.Attempts, after.Attempts, after.LastError, after.LastStatus, after.Ambiguous, after.FirstAttempt)
	}
}
