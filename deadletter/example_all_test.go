package deadletter_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/grantretry/grantretry/deadletter"
)

// All reads the letters one at a time, so a loop over a directory of
// many letters holds one letter in memory, not all of them; a file that
// is not a valid letter yields its error, and the loop goes on.
func ExampleDir_All() {
	dir, err := os.MkdirTemp("", "letters")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	letters, err := deadletter.Open(dir)
	if err != nil {
		panic(err)
	}
	// The Transport wrote these letters when their calls were
	// dead-lettered (WithDeadLetter); here they are written by hand.
	for _, id := range []string{"20260115T093000Z-5f2a", "20260115T094500Z-77c1"} {
		l := ledgerLetter("https://funder.example")
		l.ID = id
		if err := letters.PutDeadLetter(context.Background(), l); err != nil {
			panic(err)
		}
	}
	// A file cut short by a disk that filled up.
	if err := os.WriteFile(filepath.Join(dir, "20260115T100000Z-0b3e.json"), []byte(`{"version":1,`), 0o600); err != nil {
		panic(err)
	}

	for l, err := range letters.All() {
		if err != nil {
			fmt.Println("not a letter:", errors.Is(err, deadletter.ErrBadLetter))
			continue
		}
		fmt.Println(l.ID, l.Method, l.URL, l.Attempts, "attempts")
	}
	// Output:
	// 20260115T093000Z-5f2a POST https://funder.example/v1/applications?cycle=2026 5 attempts
	// 20260115T094500Z-77c1 POST https://funder.example/v1/applications?cycle=2026 5 attempts
	// not a letter: true
}
