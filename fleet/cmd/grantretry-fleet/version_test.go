package main

import (
	"bytes"
	"strings"
	"testing"
)

// "version", "-version" and "--version" print one line with the fleet
// module's version and the library's; the line names no database.
func TestVersion(t *testing.T) {
	for _, arg := range []string{"version", "-version", "--version"} {
		var stdout, stderr bytes.Buffer
		if code := run([]string{arg}, &stdout, &stderr); code != exitOK || stderr.Len() > 0 {
			t.Errorf("%s: exit status %d, stderr %q", arg, code, stderr.String())
		}
		line := stdout.String()
		if !strings.HasPrefix(line, "grantretry-fleet ") || !strings.Contains(line, ", grantretry ") ||
			!strings.Contains(line, ", built with go1.") || strings.Count(line, "\n") != 1 {
			t.Errorf("%s: printed %q", arg, line)
		}
	}
	var stdout, stderr bytes.Buffer
	if code := run([]string{"version", "extra"}, &stdout, &stderr); code != exitUsage || !strings.Contains(stderr.String(), `grantretry-fleet: version: unexpected argument "extra"`) {
		t.Errorf("version extra: exit status %d, stderr %q", code, stderr.String())
	}
	stdout.Reset()
	if code := run([]string{"help"}, &stdout, &stderr); code != exitOK || !strings.Contains(stdout.String(), "\n  version ") {
		t.Errorf("help does not list version:\n%s", stdout.String())
	}
}
