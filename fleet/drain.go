package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
)

// Drain moves the letters kept in the fallback directory (WithFallback)
// into the database, once it is back: each is inserted under its ID
// unless a row of that ID is there already, and its file is removed once
// the row is known to be there. A letter whose insert was cut at the
// limit but committed after all, as its fallback file was written, is
// thus not added twice, nor sent again if it was redelivered from the
// database meanwhile. Redeliver a fallback directory's letters only
// through Drain, never from the directory itself (grantretry deadletter
// redeliver): a letter may be in both.
//
// moved counts the letters inserted, present those whose row was there
// already; err joins one error per letter that stays in the directory
// (and a directory's unreadable files, see deadletter.Dir.List). A
// fallback directory that is gone is an error matching [io/fs.ErrNotExist]:
// Drain reads the directory and never creates it.
func (s *Letters) Drain(ctx context.Context) (moved, present int, err error) {
	dir := s.cfg.fallback
	if dir == nil {
		return 0, 0, errors.New("grantretry: fleet: drain: no fallback directory (WithFallback)")
	}
	if s.own == nil {
		return 0, 0, fmt.Errorf("grantretry: fleet: drain: %w", errLettersClosed)
	}
	letters, err := dir.List()
	errs := []error{err}
	for _, l := range letters {
		if ctx.Err() != nil {
			errs = append(errs, ctx.Err())
			break
		}
		data, err := json.Marshal(l)
		if err != nil {
			errs = append(errs, fmt.Errorf("grantretry: fleet: drain: letter %s: %w", l.ID, err))
			continue
		}
		tag, err := s.own.Exec(ctx, insertSQL, l.ID, l.Created, data, notBefore(l), dueBy(l), l.Late)
		if err != nil {
			errs = append(errs, fmt.Errorf("grantretry: fleet: drain: letter %s: %w", l.ID, err))
			continue
		}
		if tag.RowsAffected() == 1 {
			moved++
		} else {
			present++
		}
		// deadletter.Dir stores a letter as <ID>.json.
		if err := removeLetterFile(filepath.Join(dir.Path(), l.ID+".json")); err != nil {
			errs = append(errs, fmt.Errorf("grantretry: fleet: drain: letter %s is in the database; its file stays: %w", l.ID, err))
		}
	}
	return moved, present, errors.Join(errs...)
}
