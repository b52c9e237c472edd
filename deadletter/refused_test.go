package deadletter

import (
	"testing"

	"github.com/grantretry/grantretry"
)

func TestRefusedIsATerminalLastVerdict(t *testing.T) {
	for reason, want := range map[string]bool{
		"terminal:422":             true,
		"terminal:500;soap:Client": true,
		"unclassified:418":         true,
		"transient:503":            false,
		"owed:429;quota":           false,
		"transport:timeout":        false,
		"transport:tls_cert":       false, // no answer from the funder: not its refusal
		"":                         false,
	} {
		if got := Refused(&grantretry.Letter{Reason: reason}); got != want {
			t.Errorf("Refused(reason %q) = %v, want %v", reason, got, want)
		}
	}
}
