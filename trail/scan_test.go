package trail

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"go.uber.org/zap/zapcore"

	"github.com/grantretry/grantretry"
)

// bigTrail writes a closed trail of one file larger than three of the
// blocks a file is read in, and returns its path and lines.
func bigTrail(t *testing.T) (string, [][]byte) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "trail.jsonl")
	trail := openTestTrail(t, path, Options{MaxFileSize: 1 << 30})
	log := trailLogger(trail, zapcore.DefaultClock)
	for i := 0; ; i++ {
		logAttempt(log, "call-"+strconv.Itoa(i), 1)
		if i%1000 == 0 {
			if fi, err := os.Stat(path); err != nil {
				t.Fatal(err)
			} else if fi.Size() > 3*fileBlock+fileBlock/2 {
				break
			}
		}
	}
	if err := trail.Close(); err != nil {
		t.Fatal(err)
	}
	return path, readLines(t, path)
}

// lineAt returns the index of the line that holds byte offset off.
func lineAt(lines [][]byte, off int) int {
	for i, l := range lines {
		if off < len(l) {
			return i
		}
		off -= len(l)
	}
	return -1
}

// withProcs runs f with GOMAXPROCS at 1 (the scan on the caller's
// goroutine), 2 and 5.
func withProcs(t *testing.T, f func(t *testing.T)) {
	for _, n := range []int{1, 2, 5} {
		t.Run(fmt.Sprintf("procs=%d", n), func(t *testing.T) {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(n))
			f(t)
		})
	}
}

func wantTrailError(t *testing.T, err error, file string, line int, seq uint64, problem string) {
	t.Helper()
	var te *Error
	if !errors.As(err, &te) || !errors.Is(err, grantretry.ErrAuditTrail) {
		t.Fatalf("error %v, want a *Error", err)
	}
	if te.File != file || te.Line != line || te.Seq != seq || !strings.Contains(te.Problem, problem) {
		t.Fatalf("reported %q line %d seq %d: %q\nwant     %q line %d seq %d: %q", te.File, te.Line, te.Seq, te.Problem, file, line, seq, problem)
	}
}

// A trail read in several blocks verifies, and an edit is reported at its
// line whatever block it is in: the first, the one that a block's end
// cuts, the first of the next block, the last.
func TestVerifyFindsEditsInEveryBlock(t *testing.T) {
	path, lines := bigTrail(t)
	orig, _ := os.ReadFile(path)
	cut := lineAt(lines, fileBlock)
	for _, i := range []int{0, 1, cut, cut + 1, lineAt(lines, 2*fileBlock), len(lines) - 1} {
		edited := make([][]byte, len(lines))
		for k := range lines {
			edited[k] = bytes.Clone(lines[k])
		}
		j := bytes.Index(edited[i], []byte(`"status":503`))
		edited[i][j+len(`"status":`)] = '2'
		t.Run("line "+strconv.Itoa(i+1), func(t *testing.T) {
			writeLines(t, path, edited)
			defer os.WriteFile(path, orig, 0o600)
			withProcs(t, func(t *testing.T) {
				sum, err := Verify(path)
				wantTrailError(t, err, path, i+1, uint64(i+1), "hash does not match the record (edited?)")
				if sum.Records != i || sum.LastSeq != uint64(i) {
					t.Errorf("summary of %d records to seq %d, want %d", sum.Records, sum.LastSeq, i)
				}
			})
		})
	}
	t.Run("whole", func(t *testing.T) {
		withProcs(t, func(t *testing.T) {
			sum, err := Verify(path)
			if err != nil || sum.Records != len(lines) || sum.LastHash != mustLinkHex(t, lines[len(lines)-1]) {
				t.Fatalf("Verify: %+v, %v; want %d records", sum, err, len(lines))
			}
		})
	})
}

func mustLinkHex(t *testing.T, line []byte) string {
	t.Helper()
	l := mustLink(t, line)
	return fmt.Sprintf("%x", l.hash[:])
}

// A record deleted at a block's end is a gap at the next line.
func TestVerifyFindsDeletionAtBlockEnd(t *testing.T) {
	path, lines := bigTrail(t)
	cut := lineAt(lines, fileBlock)
	writeLines(t, path, append(lines[:cut:cut], lines[cut+1:]...))
	withProcs(t, func(t *testing.T) {
		_, err := Verify(path)
		wantTrailError(t, err, path, cut+1, uint64(cut+2), fmt.Sprintf("seq %d after seq %d: 1 record missing", cut+2, cut))
	})
}

// Read hands over every record of a trail of several blocks once, in
// order, at its line.
func TestReadAcrossBlocksHandsOverRecordsInOrder(t *testing.T) {
	path, lines := bigTrail(t)
	withProcs(t, func(t *testing.T) {
		n := 0
		sum, err := Read([]string{path}, func(r Record) error {
			n++
			if r.File != path || r.Line != n || r.Seq != uint64(n) || r.Hash != mustLinkHex(t, lines[n-1]) {
				return fmt.Errorf("record %d: %s line %d seq %d hash %s", n, r.File, r.Line, r.Seq, r.Hash)
			}
			return nil
		})
		if err != nil || n != len(lines) || sum.Records != n {
			t.Fatalf("Read: %d records, %+v, %v; want %d", n, sum, err, len(lines))
		}
	})
}

// A line is too long from maxRecordBytes bytes on, newline not counted,
// wherever it is and whether or not it ends in one.
func TestVerifyLineLengthLimitAfterBlocks(t *testing.T) {
	path, lines := bigTrail(t)
	orig, _ := os.ReadFile(path)
	n := len(lines)
	for _, tc := range []struct {
		name    string
		tail    []byte
		problem string
	}{
		{"longest line", append(bytes.Repeat([]byte("x"), maxRecordBytes-1), '\n'), "not a JSON object (torn or edited?)"},
		{"one byte more", append(bytes.Repeat([]byte("x"), maxRecordBytes), '\n'), "longer than"},
		{"longer than a block", append(bytes.Repeat([]byte("x"), fileBlock+7), '\n'), "longer than"},
		{"longest torn tail", bytes.Repeat([]byte("x"), maxRecordBytes-1), "file ends mid-record"},
		{"torn tail of the limit", bytes.Repeat([]byte("x"), maxRecordBytes), "longer than"},
		{"torn tail longer than a block", bytes.Repeat([]byte("x"), 2*fileBlock+3), "longer than"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			os.WriteFile(path, append(bytes.Clone(orig), tc.tail...), 0o600)
			defer os.WriteFile(path, orig, 0o600)
			withProcs(t, func(t *testing.T) {
				_, err := Verify(path)
				wantTrailError(t, err, path, n+1, uint64(n+1), tc.problem)
			})
		})
	}
}

// The summary counts every msg, however many there are.
func TestVerifySummaryCountsManyMessages(t *testing.T) {
	path := filepath.Join(t.TempDir(), "trail.jsonl")
	trail := openTestTrail(t, path, Options{})
	want := map[string]int{MsgOpened: 1}
	for i := range 3 * countList {
		msg := "m" + strconv.Itoa(i%(2*countList))
		want[msg]++
		if _, err := trail.Write([]byte(`{"msg":"` + msg + `"}` + "\n")); err != nil {
			t.Fatal(err)
		}
	}
	trail.Close()
	sum, err := Verify(path)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(sum.Messages) != fmt.Sprint(want) {
		t.Errorf("messages %v\nwant     %v", sum.Messages, want)
	}
}

func TestVerifyLines(t *testing.T) {
	_, lines := bigTrail(t)
	data := bytes.Join(lines, nil)
	third := lineAt(lines, len(data)/3)
	var mid int
	for _, l := range lines[:third] {
		mid += len(l)
	}
	at := func(i int) link { return mustLink(t, lines[i]) }
	withProcs(t, func(t *testing.T) {
		// The whole chain, and the same in two pieces, the second
		// checked from the first's last link.
		last, err := VerifyLines(data, 0, [32]byte{})
		if err != nil || last.Seq != uint64(len(lines)) || last.Hash != at(len(lines)-1).hash || last.Prev != at(len(lines)-2).hash ||
			!bytes.Equal(append(bytes.Clone(last.Hashed), lines[len(lines)-1][len(last.Hashed):]...), lines[len(lines)-1]) {
			t.Fatalf("VerifyLines(whole): %d, %v", last.Seq, err)
		}
		first, err := VerifyLines(data[:mid], 0, [32]byte{})
		if err != nil || first.Seq != uint64(third) {
			t.Fatalf("VerifyLines(first piece): %d, %v", first.Seq, err)
		}
		if second, err := VerifyLines(data[mid:], first.Seq, first.Hash); err != nil || second.Hash != last.Hash {
			t.Fatalf("VerifyLines(second piece): %d, %v", second.Seq, err)
		}
		// Nothing to check.
		if l, err := VerifyLines(nil, 7, at(6).hash); err != nil || l.Seq != 7 || l.Hash != at(6).hash {
			t.Fatalf("VerifyLines(nil): %+v, %v", l, err)
		}
		// No record can follow the largest seq: said so, not wrapped to 0.
		if _, err := VerifyLines(data[mid:], math.MaxUint64, at(0).hash); err == nil || !strings.Contains(err.Error(), "no record can follow seq 18446744073709551615") {
			t.Fatalf("VerifyLines(after MaxUint64): %v", err)
		}
		// The piece does not follow what it is said to follow.
		_, err = VerifyLines(data[mid:], first.Seq-1, at(third-2).hash)
		wantTrailError(t, err, "", 1, uint64(third+1), fmt.Sprintf("seq %d after seq %d: 1 record missing", third+1, third-1))
		_, err = VerifyLines(data[mid:], first.Seq, at(0).hash)
		wantTrailError(t, err, "", 1, uint64(third+1), "prev does not match the hash of the record before")
		_, err = VerifyLines(data[mid:], 0, [32]byte{})
		wantTrailError(t, err, "", 1, uint64(third+1), fmt.Sprintf("trail starts at seq %d, not 1: %d records missing before it", third+1, third))
		// An edit deep in the piece; the link returned is the record's
		// before it.
		edited := bytes.Clone(data)
		i := bytes.Index(edited[mid+len(data)/3:], []byte(`"status":503`)) + mid + len(data)/3
		edited[i+len(`"status":`)] = '2'
		line := lineAt(lines, i)
		l, err := VerifyLines(edited[mid:], first.Seq, first.Hash)
		wantTrailError(t, err, "", line-third+1, uint64(line+1), "hash does not match the record (edited?)")
		if l.Seq != uint64(line) || l.Hash != at(line-1).hash {
			t.Errorf("link %d returned with the error, want %d", l.Seq, line)
		}
		if got := err.Error(); !strings.HasPrefix(got, "grantretry: audit trail: line ") {
			t.Errorf("error %q", got)
		}
		// A torn end.
		_, err = VerifyLines(data[:len(data)-1], 0, [32]byte{})
		wantTrailError(t, err, "", len(lines), uint64(len(lines)), "ends mid-record")
		// Garbage that is no trail.
		_, err = VerifyLines([]byte("hello\n"), 0, [32]byte{})
		var te *Error
		if !errors.As(err, &te) || !te.NotTrail {
			t.Errorf("VerifyLines(hello): %v, want not a trail", err)
		}
		if _, err := VerifyLines(data, 0, at(0).hash); err == nil || !errors.Is(err, grantretry.ErrAuditTrail) || !strings.HasPrefix(err.Error(), "grantretry: ") {
			t.Errorf("VerifyLines(after 0, a prev): %v, want an error", err)
		}
	})
}
