// Package deadletter keeps the calls a grantretry Transport could not
// complete as letters in a directory, and sends them again under their
// own Idempotency-Key (see docs/dead-letters.md): Open a Dir and give it
// to grantretry.WithDeadLetter; List (or All), Get and Redeliver work it
// off.
package deadletter

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"iter"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/grantretry/grantretry"
	"github.com/grantretry/grantretry/internal/durable"
)

// RedeliveredDir is the subdirectory of a Dir that holds the letters
// marked redelivered, each with its result.
const RedeliveredDir = "redelivered"

const (
	letterExt = ".json"
	resultExt = ".result.json"
	// tempPrefix starts every temporary file: a leading dot keeps it out
	// of List and of a shell's "*.json".
	tempPrefix = ".tmp-"
	// staleTempAge is how old a temporary file must be before Open
	// removes it, so that opening the directory in one process never
	// deletes a letter another process is writing.
	staleTempAge = time.Minute
	// maxLetterFile bounds what is read back as one letter.
	maxLetterFile = 256 << 20
)

// Dir is the durable grantretry.DeadLetterSink: a directory holding each
// letter as its own file, <ID>.json, written so that a crash leaves either
// a whole letter or none. Letters marked redelivered move to the
// RedeliveredDir subdirectory, next to a record of the redelivery; retired
// letters ([Dir.Retire]) to the RetiredDir subdirectory, each within its
// record. A
// letter file is replaced (whole, atomically) only by Dir.Redeliver, to
// record a redelivery that failed; its body and key never change. Open one with Open to write letters, or
// with OpenReadOnly only to read them; the zero value is not usable. A Dir
// is safe for concurrent use, and several processes may write letters into
// one directory.
type Dir struct {
	dir string
	// readOnly is set by OpenReadOnly: every write is refused.
	readOnly bool
	// mu serialises MarkRedelivered, and publishing where the filesystem
	// has no hard links, within this process, and guards sending.
	mu sync.Mutex
	// sending holds the IDs of the letters a call of Redeliver is sending.
	sending map[string]bool
	// Test seams, nil outside tests: afterTempWrite runs once a temporary
	// file is written and synced, before it gets its final name; link
	// replaces os.Link.
	afterTempWrite func(tmp string)
	link           func(oldname, newname string) error
	// beforeRead, a test seam like the two above, runs as All is about
	// to read the letter id.
	beforeRead func(id string)
}

var _ grantretry.DeadLetterSink = (*Dir)(nil)

// Redelivery records what became of a letter that was sent again. It is
// written as <ID>.result.json next to the letter in RedeliveredDir, and is
// plain data, like a Letter.
type Redelivery struct {
	ID          string                 `json:"id"` // the letter's
	Time        time.Time              `json:"time"`
	Status      int                    `json:"status"`                // the answer's status code
	Disposition grantretry.Disposition `json:"disposition,omitempty"` // when the redelivery went through a Transport
	Attempts    int                    `json:"attempts,omitempty"`    // likewise
	Note        string                 `json:"note,omitempty"`
}

// Open opens dir as a Dir, creating it (mode 0700) and its RedeliveredDir
// if needed (the first Retire creates RetiredDir). It removes the temporary files a
// crashed write left behind, once they are a minute old; a younger one may
// belong to another process still writing, and is ignored by List anyway.
func Open(dir string) (*Dir, error) {
	if dir == "" {
		return nil, errors.New("grantretry: dead letter directory: empty name")
	}
	d := &Dir{dir: dir}
	if err := mkdirDurable(dir); err != nil {
		return nil, fmt.Errorf("grantretry: dead letter directory: %w", err)
	}
	if err := mkdirDurable(d.archive()); err != nil {
		return nil, fmt.Errorf("grantretry: dead letter directory: %w", err)
	}
	for _, sub := range []string{dir, d.archive(), d.retiredPath()} {
		err := removeStaleTemps(sub, time.Now())
		if sub == d.retiredPath() && errors.Is(err, fs.ErrNotExist) {
			continue // the first Retire makes it
		}
		if err != nil {
			return nil, fmt.Errorf("grantretry: dead letter directory: %w", err)
		}
	}
	return d, nil
}

// OpenReadOnly opens dir, which must exist, as a Dir for reading only:
// List, Get and Redelivered work, PutDeadLetter and MarkRedelivered return
// an error matching fs.ErrPermission. Unlike Open it changes nothing on
// disk (it creates no directory and removes no temporary file), so it
// works on a read-only copy, such as an auditor's or a backup. A missing
// dir is an error matching fs.ErrNotExist.
func OpenReadOnly(dir string) (*Dir, error) {
	if dir == "" {
		return nil, errors.New("grantretry: dead letter directory: empty name")
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("grantretry: dead letter directory: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("grantretry: dead letter directory: %s is not a directory", dir)
	}
	return &Dir{dir: dir, readOnly: true}, nil
}

// Path returns the directory's path.
func (d *Dir) Path() string { return d.dir }

func (d *Dir) archive() string { return filepath.Join(d.dir, RedeliveredDir) }

// mkdirDurable creates dir if it is missing and syncs its parent, so the
// new directory survives a crash along with the first letter in it.
func mkdirDurable(dir string) error {
	fi, err := os.Stat(dir)
	if err == nil {
		if !fi.IsDir() {
			return fmt.Errorf("%s is not a directory", dir)
		}
		return nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	return durable.SyncDir(filepath.Dir(dir))
}

func removeStaleTemps(dir string, now time.Time) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if !e.Type().IsRegular() || !strings.HasPrefix(e.Name(), tempPrefix) {
			continue
		}
		fi, err := e.Info()
		if err != nil || now.Sub(fi.ModTime()) < staleTempAge {
			continue // gone already, or perhaps still being written
		}
		if err := os.Remove(filepath.Join(dir, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

// PutDeadLetter validates l and stores it as <ID>.json: written to a
// temporary file, synced, given its final name without replacing anything,
// and the directory synced. It refuses a letter whose ID is already stored
// (the error matches fs.ErrExist), a malformed one (ErrBadLetter), and
// every letter if d was opened with OpenReadOnly (fs.ErrPermission).
// ctx is consulted only before writing starts: a write once begun is
// finished, so that a letter is never lost half way.
func (d *Dir) PutDeadLetter(ctx context.Context, l *grantretry.Letter) error {
	if d == nil {
		return fmt.Errorf("%w: nil *deadletter.Dir", grantretry.ErrInvalidRequest)
	}
	if err := validateLetter(l); err != nil {
		return err
	}
	if err := d.writable(); err != nil {
		return fmt.Errorf("grantretry: letter %s not written: %w", l.ID, err)
	}
	if ctx != nil && ctx.Err() != nil {
		return fmt.Errorf("grantretry: letter %s not written: %w", l.ID, ctx.Err())
	}
	data, err := json.MarshalIndent(l, "", "  ")
	if err != nil {
		return fmt.Errorf("grantretry: letter %s: %w", l.ID, err)
	}
	if err := d.writeFile(d.dir, l.ID+letterExt, append(data, '\n'), d.publishNew); err != nil {
		return fmt.Errorf("grantretry: letter %s: %w", l.ID, err)
	}
	return nil
}

// writable refuses a write to a directory opened with OpenReadOnly.
func (d *Dir) writable() error {
	if d.readOnly {
		return fmt.Errorf("%s was opened read-only (OpenReadOnly): %w", d.dir, fs.ErrPermission)
	}
	return nil
}

// writeFile writes data durably as dir/name: to a temporary file, synced,
// then published under its name by publish, then dir synced.
func (d *Dir) writeFile(dir, name string, data []byte, publish func(tmp, final string) error) error {
	f, err := os.CreateTemp(dir, tempPrefix+name+"-")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp) // once published it is a second name, or gone
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if d.afterTempWrite != nil {
		d.afterTempWrite(tmp)
	}
	if err := publish(tmp, filepath.Join(dir, name)); err != nil {
		return err
	}
	return durable.SyncDir(dir)
}

// publishNew gives tmp the name final unless final exists. A hard link
// refuses atomically, even against another process. Where the filesystem
// has no hard links it falls back to checking, then renaming, under mu:
// another process could slip a letter of the same ID in between, but IDs
// end in a random suffix, so that takes a collision nobody can arrange.
func (d *Dir) publishNew(tmp, final string) error {
	link := os.Link
	if d.link != nil {
		link = d.link
	}
	err := link(tmp, final)
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("already stored as %s: %w", final, fs.ErrExist)
	}
	if err == nil {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, err := os.Lstat(final); err == nil {
		return fmt.Errorf("already stored as %s: %w", final, fs.ErrExist)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return os.Rename(tmp, final)
}

// List returns the letters in the directory, not those redelivered or
// retired, sorted by Created, then ID; a letter marked in flight (see Dir.Redeliver) is
// returned Ambiguous. Temporary files and subdirectories are skipped. A
// .json file that is not a whole, valid letter named after its ID is not
// skipped silently: List still returns every other letter, and err joins
// one error per such file, each naming it and matching ErrBadLetter.
func (d *Dir) List() ([]*grantretry.Letter, error) {
	entries, err := os.ReadDir(d.dir)
	if err != nil {
		return nil, fmt.Errorf("grantretry: dead letter directory: %w", err)
	}
	retired, err := d.retiredIDs()
	if err != nil {
		return nil, err
	}
	var letters []*grantretry.Letter
	var errs []error
	sending := map[string]bool{}
	for _, e := range entries {
		name := e.Name()
		if id, ok := strings.CutSuffix(name, sendingExt); ok {
			sending[id] = true
		}
		if !e.Type().IsRegular() || strings.HasPrefix(name, ".") || !strings.HasSuffix(name, letterExt) ||
			retired[strings.TrimSuffix(name, letterExt)] {
			continue // a retired letter's waiting file is one its retirement was cut short before removing
		}
		l, err := readLetter(d.dir, strings.TrimSuffix(name, letterExt))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		letters = append(letters, l)
	}
	for _, l := range letters {
		l.Ambiguous = l.Ambiguous || sending[l.ID]
	}
	sortLetters(letters)
	return letters, errors.Join(errs...)
}

// All yields the letters List returns, one at a time: it reads the
// directory's entries first, then each letter only as it is yielded, so
// that a directory of many letters is never held in memory at once. It
// yields them in the order of their file names (their IDs), not sorted by
// Created as List does; otherwise it yields what List returns: not the
// letters redelivered or retired, a letter marked in flight (see
// Dir.Redeliver), when the directory was read or when All reaches it, as
// Ambiguous, temporary files and subdirectories skipped. A letter redelivered or retired by another process while the
// loop runs, its file gone before All reaches it, is skipped too. A .json
// file that is not a whole, valid letter named after its ID yields a nil
// letter and an error naming it and matching ErrBadLetter, and All goes
// on to the next. If the directory cannot be read, All yields that error
// alone. It stops as soon as the loop does.
func (d *Dir) All() iter.Seq2[*grantretry.Letter, error] {
	return func(yield func(*grantretry.Letter, error) bool) {
		if d == nil {
			yield(nil, fmt.Errorf("%w: nil *deadletter.Dir", grantretry.ErrInvalidRequest))
			return
		}
		entries, err := os.ReadDir(d.dir)
		if err != nil {
			yield(nil, fmt.Errorf("grantretry: dead letter directory: %w", err))
			return
		}
		retired, err := d.retiredIDs()
		if err != nil {
			yield(nil, err)
			return
		}
		var ids []string
		sending := map[string]bool{}
		for _, e := range entries {
			name := e.Name()
			if id, ok := strings.CutSuffix(name, sendingExt); ok {
				sending[id] = true
			}
			if !e.Type().IsRegular() || strings.HasPrefix(name, ".") || !strings.HasSuffix(name, letterExt) ||
				retired[strings.TrimSuffix(name, letterExt)] {
				continue // as in List
			}
			ids = append(ids, strings.TrimSuffix(name, letterExt))
		}
		for _, id := range ids {
			if d.beforeRead != nil {
				d.beforeRead(id)
			}
			l, err := readLetter(d.dir, id)
			if errors.Is(err, fs.ErrNotExist) {
				continue // no longer waiting
			}
			if err != nil {
				if !yield(nil, err) {
					return
				}
				continue
			}
			l.Ambiguous = l.Ambiguous || sending[id] || d.inFlight(id)
			if !yield(l, nil) {
				return
			}
		}
	}
}

func sortLetters(ls []*grantretry.Letter) {
	slices.SortFunc(ls, func(a, b *grantretry.Letter) int {
		if c := a.Created.Compare(b.Created); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
}

// Get returns the letter id, not yet redelivered: Ambiguous if it is
// marked in flight (see Dir.Redeliver). The error matches fs.ErrNotExist
// if there is none, ErrRetired (and fs.ErrNotExist) if it was retired
// ([Dir.Retirement] reads it), and ErrBadLetter if id is not a valid
// letter ID or the file is not a valid letter.
func (d *Dir) Get(id string) (*grantretry.Letter, error) {
	if err := validateLetterID(id); err != nil {
		return nil, err
	}
	if err := d.retiredErr(id, ""); err != nil {
		return nil, err
	}
	l, err := readLetter(d.dir, id)
	if err != nil {
		return nil, err
	}
	l.Ambiguous = l.Ambiguous || d.inFlight(id)
	return l, nil
}

// Redelivered returns the letter id from RedeliveredDir and the record of
// its redelivery. The error matches fs.ErrNotExist if it was not marked
// redelivered.
func (d *Dir) Redelivered(id string) (*grantretry.Letter, *Redelivery, error) {
	if err := validateLetterID(id); err != nil {
		return nil, nil, err
	}
	l, err := readLetter(d.archive(), id)
	if err != nil {
		return nil, nil, err
	}
	data, err := readFileLimited(filepath.Join(d.archive(), id+resultExt))
	if err != nil {
		return l, nil, fmt.Errorf("grantretry: letter %s: redelivery record: %w", id, err)
	}
	var r Redelivery
	if err := json.Unmarshal(data, &r); err != nil {
		return l, nil, badLetter(id, "redelivery record %s: %v", filepath.Join(d.archive(), id+resultExt), err)
	}
	return l, &r, nil
}

// readLetter reads dir/<id>.json and checks that it is a valid letter
// named after its own ID.
func readLetter(dir, id string) (*grantretry.Letter, error) {
	path := filepath.Join(dir, id+letterExt)
	data, err := readFileLimited(path)
	if err != nil {
		return nil, fmt.Errorf("grantretry: letter %s: %w", shownID(id), err)
	}
	l := new(grantretry.Letter)
	if err := json.Unmarshal(data, l); err != nil {
		return nil, badLetter(id, "%s: %v", path, err)
	}
	if err := validateLetter(l); err != nil {
		return nil, badLetter(id, "%s: %v", path, err)
	}
	if l.ID != id {
		return nil, badLetter(id, "%s holds letter %s", path, shownID(l.ID))
	}
	return l, nil
}

func readFileLimited(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxLetterFile+1))
	if err == nil && len(data) > maxLetterFile {
		err = fmt.Errorf("%s is larger than %d bytes", path, maxLetterFile)
	}
	return data, err
}

// MarkRedelivered records r as the result of redelivering the letter id,
// then moves the letter into RedeliveredDir and removes its in-flight mark
// (see Dir.Redeliver); each step is durable, and the letter's file is
// moved as it is. r.ID is set to id, and a zero
// r.Time to now. The record is written first, so a crash between the two
// leaves the letter in place, to be redelivered (with the same key) and
// marked again, never a moved letter without its record. Two processes
// marking one letter at once may leave the record of either. If d was
// opened with OpenReadOnly it changes nothing and returns an error
// matching fs.ErrPermission.
func (d *Dir) MarkRedelivered(id string, r Redelivery) error {
	if err := validateLetterID(id); err != nil {
		return err
	}
	if err := d.writable(); err != nil {
		return fmt.Errorf("grantretry: letter %s not marked redelivered: %w", id, err)
	}
	r.ID = id
	if r.Time.IsZero() {
		r.Time = time.Now().UTC()
	}
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("grantretry: letter %s: %w", id, err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	from, to := filepath.Join(d.dir, id+letterExt), filepath.Join(d.archive(), id+letterExt)
	if err := checkMovable(from, to); err != nil {
		return fmt.Errorf("grantretry: letter %s: %w", id, err)
	}
	if err := d.writeFile(d.archive(), id+resultExt, append(data, '\n'), os.Rename); err != nil {
		return fmt.Errorf("grantretry: letter %s: redelivery record: %w", id, err)
	}
	if err := moveDurable(from, to); err != nil {
		return fmt.Errorf("grantretry: letter %s: %w", id, err)
	}
	if err := d.unmarkSending(id); err != nil {
		return fmt.Errorf("grantretry: letter %s: redelivered, but its in-flight mark stays: %w", id, err)
	}
	return nil
}

// checkMovable reports whether the letter from exists and to does not.
func checkMovable(from, to string) error {
	if _, err := os.Lstat(from); err != nil {
		return err
	}
	if _, err := os.Lstat(to); err == nil {
		return fmt.Errorf("already redelivered as %s: %w", to, fs.ErrExist)
	}
	return nil
}

func moveDurable(from, to string) error {
	if err := os.Rename(from, to); err != nil {
		return err
	}
	if err := durable.SyncDir(filepath.Dir(to)); err != nil {
		return err
	}
	return durable.SyncDir(filepath.Dir(from))
}
