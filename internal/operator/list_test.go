package operator

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/grantretry/grantretry"
	"github.com/grantretry/grantretry/deadletter"
)

// List's JSON leaves the letters' bodies out, unless Bodies asks for
// them; either way it is "[]" when no letter waits.
func TestListJSONCarriesBodiesOnlyWhenAsked(t *testing.T) {
	d, err := deadletter.Open(filepath.Join(t.TempDir(), "letters"))
	if err != nil {
		t.Fatal(err)
	}
	s := DirStore{Dir: d}
	ctx := context.Background()
	var empty bytes.Buffer
	if err := List(ctx, &empty, s, ListOptions{JSON: true, Bodies: true}); err != nil || empty.String() != "[]\n" {
		t.Fatalf("List of no letter = %q, %v; want []", empty.String(), err)
	}
	body := []byte(`{"applicant":"Riverside Food Bank"}`)
	sum := sha256.Sum256(body)
	l := &grantretry.Letter{
		Version: grantretry.LetterVersion, ID: "L-1", Disposition: grantretry.DeadLetter,
		StopReason: grantretry.StopRetriesSpent, Method: "POST", URL: "https://funder.example/v1",
		Body: body, BodyBytes: int64(len(body)), BodySHA256: hex.EncodeToString(sum[:]), Created: time.Now().UTC(),
	}
	if err := d.PutDeadLetter(ctx, l); err != nil {
		t.Fatal(err)
	}
	for _, bodies := range []bool{false, true} {
		var out bytes.Buffer
		if err := List(ctx, &out, s, ListOptions{JSON: true, Bodies: bodies}); err != nil {
			t.Fatal(err)
		}
		var got []grantretry.Letter
		if err := json.Unmarshal(out.Bytes(), &got); err != nil || len(got) != 1 || got[0].ID != l.ID {
			t.Fatalf("List with Bodies %v = %s, %v; want the letter", bodies, out.String(), err)
		}
		if has := got[0].Body != nil; has != bodies || bodies && !bytes.Equal(got[0].Body, l.Body) {
			t.Errorf("List with Bodies %v: body %q", bodies, got[0].Body)
		}
	}
}
