package trail

import (
	"errors"
	"reflect"
	"slices"
	"testing"

	"github.com/grantretry/grantretry"
)

// readAll returns what Read hands over and returns.
func readAll(t *testing.T, files []string) ([]Record, error) {
	t.Helper()
	var recs []Record
	_, err := Read(files, func(r Record) error {
		recs = append(recs, r)
		return nil
	})
	return recs, err
}

// recordsOf returns what Records yields: the records, and the errors in
// the order yielded, checking that each error comes with a zero Record.
func recordsOf(t *testing.T, files []string) ([]Record, []error) {
	t.Helper()
	var recs []Record
	var errs []error
	for r, err := range Records(files...) {
		if err != nil {
			if !reflect.DeepEqual(r, Record{}) {
				t.Errorf("Records yielded error %v with record %+v, want a zero Record", err, r)
			}
			errs = append(errs, err)
			continue
		}
		if len(errs) > 0 {
			t.Errorf("Records yielded record seq %d after the error %v", r.Seq, errs[0])
		}
		recs = append(recs, r)
	}
	return recs, errs
}

func TestRecordsYieldsWhatReadHandsOver(t *testing.T) {
	files := buildTrail(t, t.TempDir(), 40)
	want, err := readAll(t, files)
	if err != nil {
		t.Fatal(err)
	}
	// The files given in any order: the records come in chain order.
	shuffled := slices.Clone(files)
	slices.Reverse(shuffled)
	got, errs := recordsOf(t, shuffled)
	if len(errs) != 0 {
		t.Fatalf("Records yielded errors %v", errs)
	}
	if len(got) != len(want) || !reflect.DeepEqual(got, want) {
		t.Fatalf("Records yielded %d records, want Read's %d, the same", len(got), len(want))
	}
	for i, r := range got {
		if r.Seq != uint64(i+1) {
			t.Fatalf("record %d has seq %d, want the chain's order", i, r.Seq)
		}
	}
	if got[len(got)-1].File != files[len(files)-1] {
		t.Errorf("the last record is in %s, want the live file %s", got[len(got)-1].File, files[len(files)-1])
	}
}

func TestRecordsYieldsReadsErrorAfterTheRecordsBeforeABreak(t *testing.T) {
	for _, tc := range tamperings {
		t.Run(tc.name, func(t *testing.T) {
			files := buildTrail(t, t.TempDir(), 40)
			tc.do(t, files)
			want, readErr := readAll(t, files)
			if readErr == nil {
				t.Fatal("Read found no break")
			}
			got, errs := recordsOf(t, files)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("Records yielded %d records before the break, want Read's %d, the same", len(got), len(want))
			}
			if len(errs) != 1 || errs[0].Error() != readErr.Error() || !errors.Is(errs[0], grantretry.ErrAuditTrail) {
				t.Errorf("Records yielded errors %v, want Read's alone: %v", errs, readErr)
			}
		})
	}
}

func TestRecordsYieldsOneErrorForAFileItCannotRead(t *testing.T) {
	files := buildTrail(t, t.TempDir(), 40)
	files = append(files[:1:1], files[1]+".gone")
	got, errs := recordsOf(t, files)
	if len(errs) != 1 || !errors.Is(errs[0], grantretry.ErrAuditTrail) {
		t.Fatalf("Records yielded errors %v, want one matching ErrAuditTrail", errs)
	}
	if _, readErr := readAll(t, files); readErr == nil || errs[0].Error() != readErr.Error() {
		t.Errorf("Records yielded %v, want Read's error %v", errs[0], readErr)
	}
	if len(got) != 0 {
		t.Errorf("Records yielded %d records of a trail with a file missing, want none, as Read hands over none", len(got))
	}

	got, errs = recordsOf(t, nil)
	if len(got) != 0 || len(errs) != 1 || !errors.Is(errs[0], grantretry.ErrAuditTrail) {
		t.Errorf("Records of no file: %d records, errors %v; want one error matching ErrAuditTrail", len(got), errs)
	}
}

func TestRecordsStopsAtTheLoopsBreak(t *testing.T) {
	files := buildTrail(t, t.TempDir(), 40)
	n := 0
	for r, err := range Records(files...) {
		if err != nil {
			t.Fatal(err)
		}
		n++
		if r.Seq == 3 {
			break
		}
	}
	if n != 3 {
		t.Errorf("the loop ran %d times, want 3", n)
	}
}
