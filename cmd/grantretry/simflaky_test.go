package main

import (
	"bytes"
	"errors"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/grantretry/grantretry/internal/sim"
)

// -scenario flaky starts from its own preset and policies, wherever the
// flag is, and the other flags given override it.
func TestFlakyFlags(t *testing.T) {
	var stdout bytes.Buffer
	f, err := parseSimFlags([]string{"-workers", "8", "-scenario", "flaky", "-fail-first", "3", "-throttle", "20,2"}, &stdout)
	if err != nil {
		t.Fatal(err)
	}
	want := sim.FlakyDefault()
	if got := f.sc; got.Kind != sim.KindFlaky || got.Workers != 8 || got.FailFirst != 3 || got.MaxTokens != 20 || got.TokenRatio != 2 ||
		got.Run != want.Run || got.Load != want.Load || got.Outage != 0 || f.policies != sim.FlakyPolicies {
		t.Errorf("parsed %+v, policies %q; want %+v", got, f.policies, want)
	}
	if _, err := parseSimFlags([]string{"-scenario", "calm"}, &stdout); err == nil || !strings.Contains(err.Error(), "flaky") {
		t.Errorf("-scenario calm: %v, want an error naming the scenarios", err)
	}
}

// The flaky scenario draws no chart, and runs only grantretry's policies:
// both are refused before the run.
func TestSimFlakyRefusesWhatItCannotDo(t *testing.T) {
	var ue usageError
	err := runSim([]string{"-scenario", "flaky", "-svg", filepath.Join(t.TempDir(), "x.svg")}, io.Discard, io.Discard)
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "no chart") {
		t.Errorf("-svg: %v, want a usage error saying it draws no chart", err)
	}
	err = runSim([]string{"-scenario", "flaky", "-policies", "naive"}, io.Discard, io.Discard)
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "not a grantretry policy") {
		t.Errorf("-policies naive: %v, want a usage error", err)
	}
}
