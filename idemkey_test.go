package grantretry

import (
	"encoding/hex"
	"strings"
	"testing"
)

// The key is "grant-" and the first 32 hex digits of SHA-256(id || payload);
// the expected values were computed independently (Python hashlib).
func TestIdempotencyKeyKnownValues(t *testing.T) {
	cases := []struct{ id, payload, want string }{
		{"GRANT-2026-0042", `{"amount":125000}`, "grant-49e7fc8413d1f4f3f30521114a1784f5"},
		{"", "", "grant-e3b0c44298fc1c149afbf4c8996fb924"},
	}
	for _, c := range cases {
		if got := IdempotencyKey(c.id, []byte(c.payload)); got != c.want {
			t.Errorf("IdempotencyKey(%q, %q) = %s, want %s", c.id, c.payload, got, c.want)
		}
	}
}

func TestIdempotencyKeyIsStableAndSensitive(t *testing.T) {
	a := IdempotencyKey("S-1", []byte("payload"))
	if a != IdempotencyKey("S-1", []byte("payload")) {
		t.Error("same input, different keys")
	}
	for _, other := range []string{
		IdempotencyKey("S-2", []byte("payload")),
		IdempotencyKey("S-1", []byte("payload2")),
	} {
		if other == a {
			t.Error("different submission or payload, same key")
		}
	}
}

func TestNewCorrelationID(t *testing.T) {
	seen := make(map[string]bool)
	for i := 0; i < 1000; i++ {
		id := NewCorrelationID()
		if len(id) != 16 || strings.ToLower(id) != id {
			t.Fatalf("correlation id %q, want 16 lower-case hex digits", id)
		}
		if _, err := hex.DecodeString(id); err != nil {
			t.Fatalf("correlation id %q is not hex", id)
		}
		if seen[id] {
			t.Fatalf("correlation id %q repeated", id)
		}
		seen[id] = true
	}
}
