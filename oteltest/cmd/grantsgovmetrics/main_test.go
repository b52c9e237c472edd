package main

import (
	"bytes"
	"strings"
	"testing"
)

// The demo's run exports what the demo did: its calls by disposition
// (eight succeeded, one failed_terminal, one dead_letter, then the
// redelivery), the dead letter, the reconcile, and the audit records.
func TestDemoRunExportsItsMetrics(t *testing.T) {
	var out, demoOut bytes.Buffer
	if err := run(&out, &demoOut, ""); err != nil {
		t.Fatalf("%v\n%s", err, demoOut.String())
	}
	exp := out.String()
	for _, want := range []string{
		`grantretry_calls_total{`,
		`grantretry_disposition="failed_terminal"`,
		`grantretry_disposition="dead_letter"`,
		`grantretry_dead_letters_total{`,
		`grantretry_reconcile_checks_total{`,
		`grantretry_reconcile_verdict="applied"`,
		`grantretry_audit_records_total{`,
		`http_client_request_duration_seconds_bucket{`,
	} {
		if !strings.Contains(exp, want) {
			t.Errorf("the exposition lacks %s", want)
		}
	}
	for _, secret := range []string{"GRANT-2026-", "/v1/applications", "Idempotency"} {
		if strings.Contains(exp, secret) {
			t.Errorf("the exposition carries %q: attributes must stay bounded", secret)
		}
	}
}
