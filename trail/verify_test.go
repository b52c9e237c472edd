package trail

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.uber.org/zap/zapcore"

	"github.com/grantretry/grantretry"
)

// buildTrail writes a closed trail of n attempt records in dir, rotated
// over several files, and returns its files in chain order.
func buildTrail(t *testing.T, dir string, n int) []string {
	t.Helper()
	trail := openTestTrail(t, filepath.Join(dir, "trail.jsonl"), Options{MaxFileSize: 4096})
	log := trailLogger(trail, zapcore.DefaultClock)
	for i := range n {
		logAttempt(log, "call-"+strconv.Itoa(i), 1)
	}
	if err := trail.Close(); err != nil {
		t.Fatal(err)
	}
	files := trailFiles(t, dir)
	if len(files) < 4 {
		t.Fatalf("%d files, want 4 or more", len(files))
	}
	return files
}

// forge returns line as a record with seq and prev of the forger's choice
// and a hash recomputed to match them.
func forge(t *testing.T, line []byte, seq uint64, prev [32]byte) []byte {
	t.Helper()
	body := line[:bytes.LastIndex(line, []byte(`,"seq":`))]
	b := append([]byte(nil), body...)
	b = append(b, `,"seq":`+strconv.FormatUint(seq, 10)+`,"prev":"`+hex.EncodeToString(prev[:])+`"`...)
	sum := sha256.Sum256(append(prev[:], b...))
	return append(b, `,"hash":"`+hex.EncodeToString(sum[:])+"\"}\n"...)
}

// rechain rewrites lines[from:] so that each chains to the one before, as
// someone with write access could.
func rechain(t *testing.T, lines [][]byte, from int) {
	t.Helper()
	prev := mustLink(t, lines[from]).prev
	for i := from; i < len(lines); i++ {
		lines[i] = forge(t, lines[i], mustLink(t, lines[i]).seq, prev)
		prev = mustLink(t, lines[i]).hash
	}
}

func seqAt(t *testing.T, file string, line int) uint64 {
	t.Helper()
	return mustLink(t, readLines(t, file)[line-1]).seq
}

func lastSeq(t *testing.T, file string) uint64 {
	t.Helper()
	return seqAt(t, file, len(readLines(t, file)))
}

// tamper changes a trail and returns where and what Verify must
// report.
type tamper func(t *testing.T, files []string) Error

// editFile applies edit to the lines of file.
func editFile(t *testing.T, file string, edit func(lines [][]byte) [][]byte) {
	t.Helper()
	writeLines(t, file, edit(readLines(t, file)))
}

var tamperings = []struct {
	name string
	do   tamper
}{
	{"edit a byte", func(t *testing.T, files []string) Error {
		f := files[1]
		want := Error{File: f, Line: 3, Seq: seqAt(t, f, 3), Problem: "hash does not match the record (edited?)"}
		editFile(t, f, func(lines [][]byte) [][]byte {
			i := bytes.Index(lines[2], []byte(`"call-`)) + 1
			lines[2][i] = 'C'
			return lines
		})
		return want
	}},
	{"delete a line", func(t *testing.T, files []string) Error {
		f := files[1]
		want := Error{File: f, Line: 3, Seq: seqAt(t, f, 4), Problem: "1 record missing"}
		editFile(t, f, func(lines [][]byte) [][]byte { return slices.Delete(lines, 2, 3) })
		return want
	}},
	{"insert a copy of a line", func(t *testing.T, files []string) Error {
		f := files[1]
		want := Error{File: f, Line: 4, Seq: seqAt(t, f, 1), Problem: "inserted or reordered?"}
		editFile(t, f, func(lines [][]byte) [][]byte { return slices.Insert(lines, 3, lines[0]) })
		return want
	}},
	{"insert a forged line", func(t *testing.T, files []string) Error {
		f := files[1]
		seq := seqAt(t, f, 3) + 1
		want := Error{File: f, Line: 4, Seq: seq, Problem: "prev does not match the hash of the record before"}
		editFile(t, f, func(lines [][]byte) [][]byte {
			return slices.Insert(lines, 3, forge(t, lines[2], seq, sha256.Sum256([]byte("forged"))))
		})
		return want
	}},
	{"swap two lines", func(t *testing.T, files []string) Error {
		f := files[1]
		want := Error{File: f, Line: 3, Seq: seqAt(t, f, 4), Problem: "1 record missing"}
		editFile(t, f, func(lines [][]byte) [][]byte {
			lines[2], lines[3] = lines[3], lines[2]
			return lines
		})
		return want
	}},
	{"truncate the tail mid-line", func(t *testing.T, files []string) Error {
		f := files[len(files)-1]
		n := len(readLines(t, f))
		want := Error{File: f, Line: n, Seq: seqAt(t, f, n), Problem: "file ends mid-record (torn or truncated)"}
		data, _ := os.ReadFile(f)
		os.WriteFile(f, data[:len(data)-10], 0o600)
		return want
	}},
	{"truncate the tail at a line boundary", func(t *testing.T, files []string) Error {
		f := files[len(files)-1]
		n := len(readLines(t, f))
		want := Error{File: f, Line: n - 1, Seq: seqAt(t, f, n-1),
			Problem: "trail ends at seq " + strconv.FormatUint(seqAt(t, f, n-2), 10) + " but its head says seq " + strconv.FormatUint(seqAt(t, f, n), 10) + " was synced"}
		editFile(t, f, func(lines [][]byte) [][]byte { return lines[:n-2] })
		return want
	}},
	{"remove a rotated file in the middle", func(t *testing.T, files []string) Error {
		want := Error{File: files[2], Line: 1, Seq: seqAt(t, files[2], 1), Problem: "the file before (trail.jsonl.000001) ends at seq " +
			strconv.FormatUint(lastSeq(t, files[0]), 10) + ": " + strconv.Itoa(len(readLines(t, files[1]))) +
			" records missing, a file is missing (trail.jsonl.000002 is not among the files)"}
		os.Remove(files[1])
		return want
	}},
	{"remove the newest rotated file", func(t *testing.T, files []string) Error {
		live, newest := files[len(files)-1], files[len(files)-2]
		os.Remove(newest)
		return Error{File: live, Line: 1, Seq: seqAt(t, live, 1),
			Problem: "a file is missing (" + filepath.Base(newest) + " is not among the files)"}
	}},
	{"delete the last line of a rotated file", func(t *testing.T, files []string) Error {
		want := Error{File: files[2], Line: 1, Seq: seqAt(t, files[2], 1),
			Problem: "ends at seq " + strconv.FormatUint(lastSeq(t, files[1])-1, 10) + ": 1 record missing from the end of trail.jsonl.000002"}
		editFile(t, files[1], func(lines [][]byte) [][]byte { return lines[:len(lines)-1] })
		return want
	}},
	{"edit the seq of a file's first record", func(t *testing.T, files []string) Error {
		editFile(t, files[2], func(lines [][]byte) [][]byte {
			lines[0] = regexp.MustCompile(`"seq":\d+,`).ReplaceAll(lines[0], []byte(`"seq":999,`))
			return lines
		})
		return Error{File: files[2], Line: 1, Seq: 999, Problem: "hash does not match the record (edited?)"}
	}},
	{"garble the first line of a rotated file", func(t *testing.T, files []string) Error {
		want := Error{File: files[2], Line: 1, Seq: lastSeq(t, files[1]) + 1, Problem: "not a JSON object (torn or edited?)"}
		editFile(t, files[2], func(lines [][]byte) [][]byte {
			lines[0] = append(bytes.Repeat([]byte{0}, len(lines[0])-1), '\n')
			return lines
		})
		return want
	}},
	{"remove the first file", func(t *testing.T, files []string) Error {
		os.Remove(files[0])
		return Error{File: files[1], Line: 1, Seq: seqAt(t, files[1], 1), Problem: "the first file is missing"}
	}},
	{"rewrite the chain after an edit", func(t *testing.T, files []string) Error {
		f := files[len(files)-1]
		n := len(readLines(t, f))
		want := Error{File: f, Line: n, Seq: seqAt(t, f, n), Problem: "trail.jsonl.head says was synced"}
		editFile(t, f, func(lines [][]byte) [][]byte {
			lines[1] = bytes.Replace(lines[1], []byte(`"status":503`), []byte(`"status":201`), 1)
			rechain(t, lines, 1)
			return lines
		})
		return want
	}},
}

// Each kind of tampering is reported at the record where it is, with what
// is wrong.
func TestVerifyAuditTrailDetectsTampering(t *testing.T) {
	for _, tc := range tamperings {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			files := buildTrail(t, dir, 40)
			if _, err := Verify(files...); err != nil {
				t.Fatalf("before tampering: %v", err)
			}
			want := tc.do(t, files)
			_, err := Verify(trailFiles(t, dir)...)
			var te *Error
			if !errors.As(err, &te) || !errors.Is(err, grantretry.ErrAuditTrail) {
				t.Fatalf("VerifyAuditTrail: %v, want a *TrailError", err)
			}
			if te.File != want.File || te.Line != want.Line || te.Seq != want.Seq || !strings.Contains(te.Problem, want.Problem) {
				t.Errorf("reported %s line %d seq %d: %q\nwant     %s line %d seq %d: %q",
					te.File, te.Line, te.Seq, te.Problem, want.File, want.Line, want.Seq, want.Problem)
			}
		})
	}
}

// The trail's own files are put in rotation order, the live file last,
// whatever order they are given in; head files among them are used as
// heads.
func TestVerifyAuditTrailOrdersFilesByRotationIndex(t *testing.T) {
	dir := t.TempDir()
	files := buildTrail(t, dir, 40)
	given := append([]string{filepath.Join(dir, "trail.jsonl.head")}, files...)
	slices.Reverse(given)
	sum, err := Verify(given...)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(sum.Files, files) {
		t.Errorf("files in order %q, want %q", sum.Files, files)
	}
	if sum.FirstSeq != 1 || sum.LastSeq != uint64(sum.Records) || sum.HeadSeq != sum.LastSeq {
		t.Errorf("summary %+v: want seq 1..%d, head at the last", sum, sum.Records)
	}
}

// The summary counts records by message and dispositions by kind, and
// gives the last hash.
func TestVerifyAuditTrailSummary(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "trail.jsonl")
	trail := openTestTrail(t, path, Options{})
	log := trailLogger(trail, zapcore.DefaultClock)
	logAttempt(log, "a", 1)
	logDisposition(log, "a", grantretry.Succeeded)
	logDisposition(log, "b", grantretry.DeadLetter)
	logDisposition(log, "c", grantretry.DeadLetter)
	trail.Close()
	sum, err := Verify(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := readLines(t, path)
	last := mustLink(t, lines[len(lines)-1])
	if sum.Records != 5 || sum.Messages[grantretry.MsgDisposition] != 3 || sum.Messages[MsgOpened] != 1 ||
		sum.Dispositions[string(grantretry.Succeeded)] != 1 || sum.Dispositions[string(grantretry.DeadLetter)] != 2 ||
		sum.LastHash != hex.EncodeToString(last.hash[:]) {
		t.Errorf("summary %+v", sum)
	}
}

// Read hands over each record with its position, time and
// fields, the chain and envelope keys apart.
func TestReadAuditTrailHandsOverRecords(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "trail.jsonl")
	clk := newFakeClock()
	trail := openTestTrail(t, path, Options{Clock: clk})
	logAttempt(trailLogger(trail, fakeZapClock{clk}), "a", 2)
	trail.Close()
	var recs []Record
	if _, err := Read([]string{path}, func(r Record) error {
		recs = append(recs, r)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	r := recs[1]
	if r.File != path || r.Line != 2 || r.Seq != 2 || r.Msg != grantretry.MsgAttempt || r.Level != "info" || !r.Time.Equal(clk.Now()) {
		t.Errorf("record %+v", r)
	}
	if r.Fields[grantretry.FieldCorrelationID] != "a" || r.Fields[grantretry.FieldWait] != "1.5s" || r.Fields[grantretry.FieldAttempt] != json.Number("2") {
		t.Errorf("fields %v", r.Fields)
	}
	for _, k := range []string{"ts", "msg", FieldSeq, FieldPrev, FieldHash} {
		if _, ok := r.Fields[k]; ok {
			t.Errorf("fields have %s", k)
		}
	}
}

// Read stops at fn's first error and returns it.
func TestReadAuditTrailStopsAtCallbackError(t *testing.T) {
	dir := t.TempDir()
	files := buildTrail(t, dir, 40)
	stop := errors.New("enough")
	n := 0
	_, err := Read(files, func(Record) error {
		n++
		if n == 3 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || n != 3 {
		t.Errorf("ReadAuditTrail: %v after %d records, want %v after 3", err, n, stop)
	}
}

func TestVerifyAuditTrailBadInput(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.jsonl")
	os.WriteFile(empty, nil, 0o600)
	notTrail := filepath.Join(dir, "log.jsonl")
	os.WriteFile(notTrail, []byte(`{"msg":"hello"}`+"\n"), 0o600)
	for _, tc := range []struct {
		name  string
		paths []string
		trail bool // a *Error, not an I/O error
	}{
		{"no file", nil, false},
		{"missing file", []string{filepath.Join(dir, "missing.jsonl")}, false},
		{"empty file", []string{empty}, true},
		{"not a trail", []string{notTrail}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Verify(tc.paths...)
			var te *Error
			if !errors.Is(err, grantretry.ErrAuditTrail) || errors.As(err, &te) != tc.trail {
				t.Errorf("VerifyAuditTrail: %v (%T), want ErrAuditTrail, a *TrailError: %v", err, err, tc.trail)
			}
		})
	}
}

// Files that do not carry the trail's own names are put in chain order by
// the seq of their first record.
func TestVerifyAuditTrailOrdersOtherNamesByFirstSeq(t *testing.T) {
	files := buildTrail(t, t.TempDir(), 40)
	dir := t.TempDir()
	var copies []string
	for i, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		c := filepath.Join(dir, fmt.Sprintf("part-%c.log", 'z'-i)) // names sort against chain order
		if err := os.WriteFile(c, data, 0o600); err != nil {
			t.Fatal(err)
		}
		copies = append(copies, c)
	}
	given := slices.Clone(copies)
	slices.Sort(given)
	sum, err := Verify(given...)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(sum.Files, copies) {
		t.Errorf("files in order %q, want %q", sum.Files, copies)
	}
}

// A head file given among the paths is used even when it is not beside
// the trail: the tail cut at a line boundary is found.
func TestVerifyAuditTrailUsesHeadGivenElsewhere(t *testing.T) {
	dir := t.TempDir()
	files := buildTrail(t, dir, 40)
	live := files[len(files)-1]
	moved := filepath.Join(t.TempDir(), "trail.jsonl.head")
	if err := os.Rename(live+".head", moved); err != nil {
		t.Fatal(err)
	}
	n := len(readLines(t, live))
	editFile(t, live, func(lines [][]byte) [][]byte { return lines[:n-1] })
	_, err := Verify(append(trailFiles(t, dir), moved)...)
	var te *Error
	if !errors.As(err, &te) {
		t.Fatalf("VerifyAuditTrail with the head given: %v, want a *TrailError", err)
	}
	if te.File != live || te.Line != n || te.Seq != seqAt(t, live, n-1)+1 || !strings.Contains(te.Problem, "records missing from the end") {
		t.Errorf("reported %v, want %s line %d: records missing from the end", err, live, n)
	}
}

// A broken first line of a file is reported after the files before it
// were read, with their records counted, as the CLI shows them.
func TestVerifyAuditTrailCountsRecordsBeforeABrokenFile(t *testing.T) {
	dir := t.TempDir()
	files := buildTrail(t, dir, 40)
	want := lastSeq(t, files[1])
	editFile(t, files[2], func(lines [][]byte) [][]byte {
		lines[0] = []byte("garbled\n")
		return lines
	})
	sum, err := Verify(trailFiles(t, dir)...)
	if !errors.Is(err, grantretry.ErrAuditTrail) || uint64(sum.Records) != want || sum.LastSeq != want {
		t.Errorf("VerifyAuditTrail: %v, %d records up to seq %d; want a failure after %d records", err, sum.Records, sum.LastSeq, want)
	}
}

// Any record Write accepts verifies, and is counted by its exact msg and
// disposition keys, whatever the type of the other keys.
func TestVerifyAuditTrailAcceptsWhatWriteAccepts(t *testing.T) {
	for _, tc := range []struct {
		name, rec, msg, disposition string
	}{
		{"disposition a number", `{"msg":"grantretry.disposition","disposition":3}`, grantretry.MsgDisposition, ""},
		{"disposition null", `{"msg":"grantretry.disposition","disposition":null}`, grantretry.MsgDisposition, ""},
		{"msg an object", `{"msg":{"a":1},"v":1}`, "", ""},
		{"keys differing in case", `{"MSG":1,"msg":"grantretry.disposition","Disposition":2,"disposition":"succeeded","DISPOSITION":"x"}`, grantretry.MsgDisposition, "succeeded"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "trail.jsonl")
			trail := openTestTrail(t, path, Options{})
			if _, err := trail.Write([]byte(tc.rec + "\n")); err != nil {
				t.Fatal(err)
			}
			trail.Close()
			sum, err := Verify(path)
			if err != nil {
				t.Fatal(err)
			}
			if sum.Messages[tc.msg] != 1 || (tc.msg == grantretry.MsgDisposition && sum.Dispositions[tc.disposition] != 1) {
				t.Errorf("counted messages %v, dispositions %v; want msg %q, disposition %q", sum.Messages, sum.Dispositions, tc.msg, tc.disposition)
			}
			if _, err := Read([]string{path}, func(Record) error { return nil }); err != nil {
				t.Errorf("ReadAuditTrail: %v", err)
			}
		})
	}
}

// A line longer than a record can be is reported as such, at its line,
// however long it is.
func TestVerifyAuditTrailReportsOverlongLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "trail.jsonl")
	trail := openTestTrail(t, path, Options{})
	logAttempt(trailLogger(trail, zapcore.DefaultClock), "c", 1)
	trail.Close()
	lines := readLines(t, path)
	appendBytes(t, path, append(bytes.Repeat([]byte("x"), 3*maxRecordBytes+5), '\n'))
	appendBytes(t, path, lines[1])
	_, err := Verify(path)
	var te *Error
	if !errors.As(err, &te) || te.Line != 3 || te.Seq != 3 || !strings.Contains(te.Problem, "longer than") {
		t.Errorf("VerifyAuditTrail: %v, want line 3 (record seq 3) longer than a record", err)
	}
}
