package main

import (
	"bytes"
	"regexp"
	"testing"
)

// The demo runs to its end: the ledger agrees with the pipeline, and each
// fault shows in the call it befell.
func TestDemoStartsAndSubmitsEachApplicationOnce(t *testing.T) {
	var out bytes.Buffer
	if err := run(&out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	for _, line := range []string{
		`sub-0002 +start +succeeded +reconciled +1 `,
		`sub-0003 +submit +succeeded +reconciled +1 `,
		`sub-0004 +submit +succeeded +reconciled +1 +transient:504;simplergrants:gateway_timeout`,
		`sub-0005 +start +succeeded +success +[2-5] `,
		`sub-0006 +start +dead_letter +owed_later +1 +owed:503;simplergrants:maintenance +2026-12-04T18:30`,
		`sub-0006 +start \(again\) +succeeded`,
		`sub-0007 +submit +dead_letter +owed_later +1 +owed:429;aws:LimitExceededException +not said`,
		`sub-0007 +submit \(again\) +succeeded`,
		`Each of the 7 applications was started once and submitted once`,
	} {
		if !regexp.MustCompile(line).Match(out.Bytes()) {
			t.Errorf("no line matches %q in:\n%s", line, out.String())
		}
	}
}
