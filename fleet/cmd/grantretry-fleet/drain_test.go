package main

import (
	"context"
	"strings"
	"testing"

	"github.com/grantretry/grantretry"
	"github.com/grantretry/grantretry/deadletter"
	"github.com/grantretry/grantretry/fleet"
)

func TestDeadletterDrainMovesAFallbackDirectoryIntoTheDatabase(t *testing.T) {
	dsn, pool := newDB(t)
	ctx := context.Background()
	path := t.TempDir()
	dir, err := deadletter.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	inDB, onlyHere := testLetter("http://funder.example", 1, false), testLetter("http://funder.example", 2, false)
	letters := fleet.NewLetters(pool)
	defer letters.Close()
	if err := letters.PutDeadLetter(ctx, inDB); err != nil {
		t.Fatal(err)
	}
	for _, l := range []*grantretry.Letter{inDB, onlyHere} {
		if err := dir.PutDeadLetter(ctx, l); err != nil {
			t.Fatal(err)
		}
	}
	code, out, errOut := runCLI("deadletter", "drain", "-pg", dsn, path)
	if code != exitOK || !strings.Contains(out, "1 letter moved into the database, 1 there already") {
		t.Fatalf("drain: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if ls, err := dir.List(); err != nil || len(ls) != 0 {
		t.Errorf("the directory after drain: %d letters, %v", len(ls), err)
	}
	waiting, err := letters.List(ctx)
	if err != nil || len(waiting) != 2 {
		t.Errorf("the database after drain: %d letters, %v; want 2", len(waiting), err)
	}
	if code, _, _ := runCLI("deadletter", "drain", "-pg", dsn); code != exitUsage {
		t.Errorf("drain without a directory: exit %d, want %d", code, exitUsage)
	}
}
