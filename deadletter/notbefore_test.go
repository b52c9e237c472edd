package deadletter_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/grantretry/grantretry/deadletter"
)

// A letter of version 2, written before letters kept the funder's time,
// still reads, with no NotBefore: it is due now.
func TestDeadLetterOfVersion2ReadsWithoutNotBefore(t *testing.T) {
	dir := t.TempDir()
	const id = "20260101T000000.000000000Z-0123456789abcdef"
	const v2 = `{"version":2,"id":"` + id + `","disposition":"dead_letter",
"stop_reason":"owed_later","reason":"owed:429","method":"PUT","url":"http://127.0.0.1:1/a",
"body_sha256":"","body_bytes":0,"correlation_id":"c1","attempts":1,
"last_status":429,"first_attempt":"2026-01-01T00:00:00Z","last_attempt":"2026-01-01T00:00:00Z","created":"2026-01-01T00:00:00Z"}`
	if err := os.WriteFile(filepath.Join(dir, id+".json"), []byte(v2), 0o600); err != nil {
		t.Fatal(err)
	}
	d, err := deadletter.OpenReadOnly(dir)
	if err != nil {
		t.Fatal(err)
	}
	l, err := d.Get(id)
	if err != nil {
		t.Fatal(err)
	}
	if l.Version != 2 || !l.NotBefore.IsZero() || l.StopReason != "owed_later" {
		t.Fatalf("letter %+v, want version 2 with a zero NotBefore", l)
	}
	if _, err := deadletter.NewRedeliveryRequest(context.Background(), l); err != nil {
		t.Fatal(err)
	}
}
