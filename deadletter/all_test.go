package deadletter

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/grantretry/grantretry"
)

// allOf collects what d.All yields: the letters, and the errors' texts.
func allOf(t *testing.T, d *Dir) ([]*grantretry.Letter, []error) {
	t.Helper()
	var letters []*grantretry.Letter
	var errs []error
	for l, err := range d.All() {
		switch {
		case err != nil && l != nil:
			t.Fatalf("All yielded letter %s with error %v", l.ID, err)
		case err != nil:
			errs = append(errs, err)
		case l == nil:
			t.Fatal("All yielded a nil letter without an error")
		default:
			letters = append(letters, l)
		}
	}
	return letters, errs
}

// mixedDir returns a directory holding every kind of file List tells
// apart: waiting letters, one marked in flight, one redelivered, a retired
// one whose waiting file its retirement left behind, two bad .json files,
// a temporary file, a stray file and a subdirectory.
func mixedDir(t *testing.T) *Dir {
	t.Helper()
	d := dlOpen(t)
	dlPut(t, d, dlLetter("L1", dlT0.Add(time.Hour)), dlLetter("L3", dlT0), dlLetter("L5", dlT0.Add(time.Minute)),
		dlLetter("fly-1", dlT0.Add(-time.Hour)), dlLetter("sent-1", dlT0), dlLetter("ret-1", dlT0))
	if err := d.markSending("fly-1", dlT0); err != nil {
		t.Fatal(err)
	}
	if err := d.MarkRedelivered("sent-1", Redelivery{Status: 200}); err != nil {
		t.Fatal(err)
	}
	if err := d.Retire("ret-1", "refused for good"); err != nil {
		t.Fatal(err)
	}
	leftover, err := json.Marshal(dlLetter("ret-1", dlT0))
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string]string{
		"ret-1.json":       string(leftover),               // a retirement cut short before removing it
		"L2.json":          `{"version":1,"id":"L2","bo`,   // torn
		".tmp-L6.json-123": `{"version":1,"id":"L6"`,       // a crashed write
		"README.txt":       "letters go here",              // not a letter
		"L7.json":          `{"version":1,"id":"someone"}`, // not a valid letter
	} {
		if err := os.WriteFile(filepath.Join(d.Path(), name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(d.Path(), "old.json"), 0o700); err != nil {
		t.Fatal(err)
	}
	return d
}

func TestDirAllYieldsWhatListReturns(t *testing.T) {
	d := mixedDir(t)
	want, listErr := d.List()
	got, errs := allOf(t, d)
	sortLetters(got)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("All yielded %v, want List's %v", letterIDs(got), letterIDs(want))
	}
	if ids := letterIDs(got); !slices.Equal(ids, []string{"fly-1", "L3", "L5", "L1"}) {
		t.Errorf("All yielded %q, want fly-1, L3, L5, L1 (sorted by Created)", ids)
	}
	for _, l := range got {
		if l.Ambiguous != (l.ID == "fly-1") {
			t.Errorf("letter %s Ambiguous = %v, want it only for the letter marked in flight", l.ID, l.Ambiguous)
		}
	}
	if listErr == nil || len(errs) != 2 {
		t.Fatalf("All yielded errors %v and List returned %v; want one error per bad file, two", errs, listErr)
	}
	if !reflect.DeepEqual(errors.Join(errs...).Error(), listErr.Error()) {
		t.Errorf("All's errors\n%v\nwant List's\n%v", errors.Join(errs...), listErr)
	}
	for _, err := range errs {
		if !errors.Is(err, ErrBadLetter) {
			t.Errorf("error %v does not match ErrBadLetter", err)
		}
	}
}

func TestDirAllYieldsInFileNameOrderAndGoesOnAfterABadFile(t *testing.T) {
	d := dlOpen(t)
	dlPut(t, d, dlLetter("L1", dlT0.Add(time.Hour)), dlLetter("L3", dlT0))
	if err := os.WriteFile(filepath.Join(d.Path(), "L2.json"), []byte(`{"version":1,"id":"L2","bo`), 0o600); err != nil {
		t.Fatal(err)
	}
	var seq []string
	for l, err := range d.All() {
		if err != nil {
			if !errors.Is(err, ErrBadLetter) || !strings.Contains(err.Error(), "L2.json") {
				t.Errorf("error %v, want ErrBadLetter naming L2.json", err)
			}
			seq = append(seq, "error")
			continue
		}
		seq = append(seq, l.ID)
	}
	if want := []string{"L1", "error", "L3"}; !slices.Equal(seq, want) {
		t.Errorf("All yielded %q, want %q", seq, want)
	}
}

func TestDirAllReadsEachLetterAsItIsYieldedAndStopsWithTheLoop(t *testing.T) {
	d := dlOpen(t)
	for _, id := range []string{"L1", "L2", "L3", "L4", "L5"} {
		dlPut(t, d, dlLetter(id, dlT0))
	}
	var read []string
	d.beforeRead = func(id string) { read = append(read, id) }
	var yielded []string
	for l, err := range d.All() {
		if err != nil {
			t.Fatal(err)
		}
		yielded = append(yielded, l.ID)
		if want := yielded; !slices.Equal(read, want) {
			t.Fatalf("when letter %s is yielded All has read %q, want %q", l.ID, read, want)
		}
		if len(yielded) == 2 {
			break
		}
	}
	if want := []string{"L1", "L2"}; !slices.Equal(read, want) {
		t.Errorf("after the loop stopped at the second letter All had read %q, want %q", read, want)
	}

	// A loop that stops at an error stops the reading too.
	if err := os.WriteFile(filepath.Join(d.Path(), "L2.json"), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	read = nil
	for _, err := range d.All() {
		if err != nil {
			break
		}
	}
	if want := []string{"L1", "L2"}; !slices.Equal(read, want) {
		t.Errorf("after the loop stopped at L2's error All had read %q, want %q", read, want)
	}
}

func TestDirAllSkipsALetterGoneWhileTheLoopRuns(t *testing.T) {
	d := dlOpen(t)
	dlPut(t, d, dlLetter("L1", dlT0), dlLetter("L2", dlT0), dlLetter("L3", dlT0))
	var got []string
	for l, err := range d.All() {
		if err != nil {
			t.Fatalf("All yielded %v, want a letter redelivered meanwhile skipped", err)
		}
		got = append(got, l.ID)
		if l.ID == "L1" { // another process redelivers L2
			if err := d.MarkRedelivered("L2", Redelivery{Status: 200}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if want := []string{"L1", "L3"}; !slices.Equal(got, want) {
		t.Errorf("All yielded %q, want %q", got, want)
	}
}

func TestDirAllMarksALetterMarkedInFlightWhileTheLoopRuns(t *testing.T) {
	d := dlOpen(t)
	dlPut(t, d, dlLetter("L1", dlT0), dlLetter("L2", dlT0))
	ambiguous := map[string]bool{}
	for l, err := range d.All() {
		if err != nil {
			t.Fatal(err)
		}
		ambiguous[l.ID] = l.Ambiguous
		if l.ID == "L1" { // another process starts sending L2
			if err := d.markSending("L2", dlT0); err != nil {
				t.Fatal(err)
			}
		}
	}
	if want := map[string]bool{"L1": false, "L2": true}; !reflect.DeepEqual(ambiguous, want) {
		t.Errorf("Ambiguous %v, want %v", ambiguous, want)
	}
}

func TestDirAllYieldsOneErrorForAnUnreadableDirectory(t *testing.T) {
	d := dlOpen(t)
	if err := os.RemoveAll(d.Path()); err != nil {
		t.Fatal(err)
	}
	letters, errs := allOf(t, d)
	if len(letters) != 0 || len(errs) != 1 || !errors.Is(errs[0], fs.ErrNotExist) {
		t.Errorf("All of a missing directory: %v, %v; want one error matching fs.ErrNotExist", letterIDs(letters), errs)
	}

	var nilDir *Dir
	letters, errs = allOf(t, nilDir)
	if len(letters) != 0 || len(errs) != 1 || !errors.Is(errs[0], grantretry.ErrInvalidRequest) {
		t.Errorf("All of a nil *Dir: %v, %v; want one error matching ErrInvalidRequest", letterIDs(letters), errs)
	}
}

func letterIDs(ls []*grantretry.Letter) []string {
	ids := make([]string, 0, len(ls))
	for _, l := range ls {
		ids = append(ids, l.ID)
	}
	return ids
}
