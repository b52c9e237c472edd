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
itself. Exits 1 if any letter stays in its directory.
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
	ctx := context.Background()
	pool, err := db.open(ctx)
	if err != nil {
		return err
	}
	defer pool.Close()
	var errs []error
	for _, path := range dirs {
		dir, err := deadletter.Open(path)
		if err != nil {
			errs = append(errs, fmt.Errorf("drain %s: %w", path, err))
			continue
		}
		letters := fleet.NewLetters(pool, fleet.WithFallback(dir))
		moved, present, err := letters.Drain(ctx)
		letters.Close()
		if noTable(err) {
			return errNoLetters("drain") // and so for every directory
		}
		fmt.Fprintf(stdout, "%s: %s moved into the database, %d there already\n", path, countNoun(moved, "letter"), present)
		if err != nil {
			errs = append(errs, fmt.Errorf("drain %s: %w", path, err))
		}
	}
	return errors.Join(errs...)
}
