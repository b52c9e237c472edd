package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/grantretry/grantretry/deadletter"
	"github.com/grantretry/grantretry/fleet"
)

const dlDrainSynopsis = `Usage: grantretry-fleet deadletter drain [-pg DSN] DIR...

Moves the letters of the fallback directories DIR (fleet.WithFallback:
where a process kept the letters the database did not take in time) into
the database, each under its ID unless the database has it already, and
removes each file once its row is there. Then redeliver them from the
database (deadletter redeliver): a letter may be both in a fallback
directory and in the database, so never redeliver a fallback directory
itself. A DIR that does not exist is an error, and is not created. Exits 1
if any letter stays in its directory or any DIR is missing.
`

func dlDrain(args []string, stdout io.Writer) error {
	fs, db := newFlagSet("deadletter drain")
	dirs, err := parse(fs, args, dlDrainSynopsis, stdout)
	if err != nil {
		return err
	}
	if len(dirs) == 0 {
		return usagef("drain: give the fallback directories to drain")
	}
	var errs []error
	var open []*deadletter.Dir
	for _, path := range dirs {
		dir, err := openFallback(path)
		if err != nil {
			errs = append(errs, fmt.Errorf("drain %s: %w", path, libError{err}))
			continue
		}
		open = append(open, dir)
	}
	if len(open) == 0 {
		return errors.Join(errs...)
	}
	ctx := context.Background()
	pool, err := db.open(ctx)
	if err != nil {
		return err
	}
	defer pool.Close()
	for _, dir := range open {
		letters := fleet.NewLetters(pool, fleet.WithFallback(dir))
		moved, present, err := letters.Drain(ctx)
		letters.Close()
		if noTable(err) {
			return errNoLetters("drain") // and so for every directory
		}
		fmt.Fprintf(stdout, "%s: %s moved into the database, %d there already\n", dir.Path(), countNoun(moved, "letter"), present)
		if err != nil {
			errs = append(errs, fmt.Errorf("drain %s: %w", dir.Path(), err))
		}
	}
	return errors.Join(errs...)
}

// openFallback opens an existing fallback directory: a missing one is an
// error, worded as grantretry deadletter list words it, and is not
// created as deadletter.Open would, so a mistyped name is not drained of
// nothing and left behind.
func openFallback(path string) (*deadletter.Dir, error) {
	if _, err := deadletter.OpenReadOnly(path); err != nil {
		return nil, err
	}
	return deadletter.Open(path)
}
