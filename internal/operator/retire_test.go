package operator

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/grantretry/grantretry"
	"github.com/grantretry/grantretry/deadletter"
)

// A letter named twice is retired once; a usage error retires none; a
// letter not retired is reported with the library's prefixes and
// "letter ID not retired" dropped, and does not stop the others.
func TestRetireOncePerLetterAndWordsEachResult(t *testing.T) {
	var calls []string
	retire := func(id, reason string) (*deadletter.Retirement, error) {
		calls = append(calls, id)
		if id == "L-busy" {
			return nil, fmt.Errorf("%w: letter L-busy not retired: a call is redelivering it", deadletter.ErrInFlight)
		}
		return &deadletter.Retirement{ID: id, Reason: reason, Letter: &grantretry.Letter{ID: id, SubmissionID: "GRANT-" + id}}, nil
	}
	for _, tc := range []struct {
		ids    []string
		reason string
	}{{nil, "withdrawn"}, {[]string{"L-a"}, ""}, {[]string{"L-a"}, " \t"}} {
		var out, errOut bytes.Buffer
		err := Retire(&out, &errOut, tc.ids, tc.reason, retire)
		var uerr UsageError
		if !errors.As(err, &uerr) || out.Len()+errOut.Len() > 0 {
			t.Errorf("%q %q: err %v, output %q%q: want a UsageError and no line", tc.ids, tc.reason, err, out.String(), errOut.String())
		}
	}
	if len(calls) > 0 {
		t.Fatalf("usage errors retired %q", calls)
	}

	var out, errOut bytes.Buffer
	err := Retire(&out, &errOut, []string{"L-a", "L-busy", "L-a"}, "withdrawn", retire)
	if err == nil || err.Error() != "1 of 2 letters not retired" {
		t.Errorf("err %v, want 1 of 2 letters not retired", err)
	}
	if want := "retired: letter L-a (submission GRANT-L-a): withdrawn\nretired 1 of 2 letters\n"; out.String() != want {
		t.Errorf("stdout %q, want %q", out.String(), want)
	}
	if want := "not retired: letter L-busy: a call is redelivering it\n"; errOut.String() != want {
		t.Errorf("stderr %q, want %q", errOut.String(), want)
	}
	if len(calls) != 2 {
		t.Errorf("retire called for %q, want L-a and L-busy once each", calls)
	}
}
