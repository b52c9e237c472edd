package trail_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/grantretry/grantretry/trail"
)

// Verify of a file that is no trail at all says so in Error.NotTrail,
// rather than calling it a torn or edited trail; a trail whose later
// record is damaged is not called one.
func TestVerifyOfAFileThatIsNotATrail(t *testing.T) {
	dir := t.TempDir()
	notTrail := filepath.Join(dir, "go.mod")
	os.WriteFile(notTrail, []byte("module example.com/pipeline\n\ngo 1.26\n"), 0o600)
	_, err := trail.Verify(notTrail)
	var te *trail.Error
	if !errors.As(err, &te) || !te.NotTrail || te.Line != 1 {
		t.Fatalf("Verify(go.mod): %v, want an *Error with NotTrail at line 1", err)
	}

	path := filepath.Join(dir, "trail.jsonl")
	tl, err := trail.Open(path, trail.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tl.Write([]byte(`{"msg":"a"}` + "\n"))
	tl.Close()
	f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString("garbage\n")
	f.Close()
	if _, err := trail.Verify(path); !errors.As(err, &te) || te.NotTrail {
		t.Fatalf("Verify of a trail with a damaged record: %v, want an *Error without NotTrail", err)
	}
}
