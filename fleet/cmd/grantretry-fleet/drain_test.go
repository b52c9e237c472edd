package main

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
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

// A mistyped directory is an error, as grantretry deadletter list gives
// it, and drain creates nothing in its place nor reports it drained; the
// directories that do exist are still drained.
func TestDeadletterDrainRefusesAMissingDirectoryAndCreatesNothing(t *testing.T) {
	dsn, pool := newDB(t)
	ctx := context.Background()
	path := t.TempDir()
	dir, err := deadletter.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := dir.PutDeadLetter(ctx, testLetter("http://funder.example", 1, false)); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(t.TempDir(), "typo")
	code, out, errOut := runCLI("deadletter", "drain", "-pg", dsn, missing, path)
	if code != exitFailure {
		t.Errorf("drain of a missing directory: exit %d, want %d", code, exitFailure)
	}
	want := "grantretry-fleet: deadletter: drain " + missing + ": dead letter directory: stat " + missing + ": no such file or directory\n"
	if !strings.Contains(errOut, want) {
		t.Errorf("stderr %q, want it to contain %q", errOut, want)
	}
	if strings.Contains(out, missing) {
		t.Errorf("stdout reports the missing directory drained: %q", out)
	}
	if !strings.Contains(out, path+": 1 letter moved into the database") {
		t.Errorf("stdout %q, want the existing directory drained", out)
	}
	if _, err := os.Stat(missing); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("drain created the missing directory: %v", err)
	}
	letters := fleet.NewLetters(pool)
	defer letters.Close()
	if waiting, err := letters.List(ctx); err != nil || len(waiting) != 1 {
		t.Errorf("the database after drain: %d letters, %v; want 1", len(waiting), err)
	}
}
