package deadletter

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/grantretry/grantretry"
)

// dlLetter returns a valid letter: a POST with a JSON body, as the
// Transport would write it.
func dlLetter(id string, created time.Time) *grantretry.Letter {
	body := []byte(`{"applicant":"Riverside Food Bank","amount":25000}`)
	sum := sha256.Sum256(body)
	return &grantretry.Letter{
		Version:        grantretry.LetterVersion,
		ID:             id,
		Disposition:    grantretry.DeadLetter,
		StopReason:     grantretry.StopRetriesSpent,
		Reason:         "transient:503",
		Method:         http.MethodPost,
		URL:            "https://funder.example/v1/applications?cycle=2026",
		Header:         http.Header{"Content-Type": {"application/json"}},
		Redacted:       []string{"Authorization"},
		RedactedQuery:  []string{"api_key"},
		Body:           body,
		BodySHA256:     hex.EncodeToString(sum[:]),
		BodyBytes:      int64(len(body)),
		IdempotencyKey: grantretry.IdempotencyKey("GRANT-"+id, body),
		CorrelationID:  "c0ffee00" + strconv.Itoa(len(id)),
		SubmissionID:   "GRANT-" + id,
		Attempts:       5,
		LastStatus:     503,
		FirstAttempt:   created.Add(-40 * time.Second),
		LastAttempt:    created.Add(-time.Second),
		Created:        created,
	}
}

var dlT0 = time.Date(2026, 1, 15, 9, 30, 0, 0, time.UTC)

func dlOpen(t *testing.T) *Dir {
	t.Helper()
	d, err := Open(filepath.Join(t.TempDir(), "letters"))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func dlPut(t *testing.T, d *Dir, ls ...*grantretry.Letter) {
	t.Helper()
	for _, l := range ls {
		if err := d.PutDeadLetter(context.Background(), l); err != nil {
			t.Fatal(err)
		}
	}
}

// dlNames lists the names in dir, sorted.
func dlNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

func TestDeadLetterDirStoresAndReadsBackALetter(t *testing.T) {
	d := dlOpen(t)
	want := dlLetter("20260115T093000Z-a1", dlT0)
	dlPut(t, d, want)
	got, err := d.Get(want.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("read back\n%+v\nwant\n%+v", got, want)
	}
	fi, err := os.Stat(filepath.Join(d.Path(), want.ID+".json"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("letter file mode %v, want 0600", fi.Mode().Perm())
	}
	if names := dlNames(t, d.Path()); !reflect.DeepEqual(names, []string{want.ID + ".json", RedeliveredDir}) {
		t.Errorf("directory holds %q", names)
	}
}

func TestOpenDeadLetterDirCreatesPrivateDirectories(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "letters")
	if _, err := Open(dir); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{dir, filepath.Join(dir, RedeliveredDir)} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if !fi.IsDir() || fi.Mode().Perm() != 0o700 {
			t.Errorf("%s: mode %v, want a directory with 0700", p, fi.Mode())
		}
	}
}

func TestOpenDeadLetterDirRefusesAFileAndAnEmptyName(t *testing.T) {
	file := filepath.Join(t.TempDir(), "letters")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{file, ""} {
		if d, err := Open(dir); err == nil {
			t.Errorf("Open(%q) = %v, want an error", dir, d)
		}
	}
}

func TestDeadLetterDirNeverOverwritesALetter(t *testing.T) {
	d := dlOpen(t)
	first := dlLetter("L1", dlT0)
	dlPut(t, d, first)
	second := dlLetter("L1", dlT0.Add(time.Hour))
	second.LastStatus = 502
	err := d.PutDeadLetter(context.Background(), second)
	if !errors.Is(err, fs.ErrExist) {
		t.Fatalf("second letter with the same id: %v, want fs.ErrExist", err)
	}
	got, err := d.Get("L1")
	if err != nil || got.LastStatus != 503 {
		t.Errorf("after the refused write: %+v, %v; want the first letter", got, err)
	}
	if names := dlNames(t, d.Path()); len(names) != 2 {
		t.Errorf("directory holds %q, want the letter and %s only", names, RedeliveredDir)
	}
}

func TestDeadLetterDirRefusesBadLetters(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(l *grantretry.Letter) *grantretry.Letter
	}{
		{"nil letter", func(*grantretry.Letter) *grantretry.Letter { return nil }},
		{"no id", func(l *grantretry.Letter) *grantretry.Letter { l.ID = ""; return l }},
		{"path separator", func(l *grantretry.Letter) *grantretry.Letter { l.ID = "a/b"; return l }},
		{"backslash", func(l *grantretry.Letter) *grantretry.Letter { l.ID = `a\b`; return l }},
		{"parent directory", func(l *grantretry.Letter) *grantretry.Letter { l.ID = ".."; return l }},
		{"dot dot inside", func(l *grantretry.Letter) *grantretry.Letter { l.ID = "a..b"; return l }},
		{"leading dot", func(l *grantretry.Letter) *grantretry.Letter { l.ID = ".tmp-x"; return l }},
		{"space", func(l *grantretry.Letter) *grantretry.Letter { l.ID = "a b"; return l }},
		{"newline", func(l *grantretry.Letter) *grantretry.Letter { l.ID = "a\nb"; return l }},
		{"too long", func(l *grantretry.Letter) *grantretry.Letter { l.ID = strings.Repeat("x", MaxLetterIDLen+1); return l }},
		{"names a record", func(l *grantretry.Letter) *grantretry.Letter { l.ID = "L1.result"; return l }},
		{"no version", func(l *grantretry.Letter) *grantretry.Letter { l.Version = 0; return l }},
		{"future version", func(l *grantretry.Letter) *grantretry.Letter { l.Version = grantretry.LetterVersion + 1; return l }},
		{"body edited", func(l *grantretry.Letter) *grantretry.Letter { l.Body[0] ^= 1; return l }},
		{"body length lies", func(l *grantretry.Letter) *grantretry.Letter { l.BodyBytes++; return l }},
		{"no digest", func(l *grantretry.Letter) *grantretry.Letter { l.BodySHA256 = ""; return l }},
		{"digest without body", func(l *grantretry.Letter) *grantretry.Letter { l.Body = nil; l.BodyBytes = 0; return l }},
		{"omitted yet present", func(l *grantretry.Letter) *grantretry.Letter { l.BodyOmitted = "too large"; return l }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := dlOpen(t)
			err := d.PutDeadLetter(context.Background(), tc.edit(dlLetter("L1", dlT0)))
			if !errors.Is(err, ErrBadLetter) {
				t.Errorf("PutDeadLetter: %v, want ErrBadLetter", err)
			}
			if err != nil && !strings.HasPrefix(err.Error(), "grantretry: letter") {
				t.Errorf("message %q does not start with \"grantretry: letter\"", err)
			}
			if names := dlNames(t, d.Path()); len(names) != 1 {
				t.Errorf("directory holds %q after a refused letter", names)
			}
		})
	}
}

func TestDeadLetterDirAcceptsLettersWithoutBody(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(l *grantretry.Letter)
	}{
		{"empty body, no digest", func(l *grantretry.Letter) { l.Body, l.BodyBytes, l.BodySHA256 = nil, 0, "" }},
		{"empty body, empty digest", func(l *grantretry.Letter) { l.Body, l.BodyBytes, l.BodySHA256 = nil, 0, hexSHA256(nil) }},
		{"omitted body", func(l *grantretry.Letter) { l.Body, l.BodyOmitted = nil, "body_not_replayable" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := dlLetter("L1", dlT0)
			tc.edit(l)
			if err := dlOpen(t).PutDeadLetter(context.Background(), l); err != nil {
				t.Error(err)
			}
		})
	}
}

func TestDeadLetterDirHonoursContextOnlyBeforeWriting(t *testing.T) {
	d := dlOpen(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := d.PutDeadLetter(ctx, dlLetter("L1", dlT0)); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled before writing: %v, want context.Canceled", err)
	}
	if _, err := d.Get("L1"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a letter refused for its context was written: %v", err)
	}
	ctx, cancel = context.WithCancel(context.Background())
	d.afterTempWrite = func(string) { cancel() }
	if err := d.PutDeadLetter(ctx, dlLetter("L2", dlT0)); err != nil {
		t.Errorf("cancelled while writing: %v, want the letter kept", err)
	}
}

func TestDeadLetterDirListSortsByCreatedThenID(t *testing.T) {
	d := dlOpen(t)
	dlPut(t, d, dlLetter("c", dlT0), dlLetter("b", dlT0.Add(time.Minute)), dlLetter("a", dlT0.Add(time.Minute)), dlLetter("d", dlT0.Add(-time.Hour)))
	ls, err := d.List()
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, l := range ls {
		ids = append(ids, l.ID)
	}
	if want := []string{"d", "c", "a", "b"}; !reflect.DeepEqual(ids, want) {
		t.Errorf("List order %q, want %q", ids, want)
	}
}

func TestDeadLetterDirListSkipsTemporaryAndOtherFiles(t *testing.T) {
	d := dlOpen(t)
	dlPut(t, d, dlLetter("L1", dlT0))
	for name, data := range map[string]string{
		".tmp-L2.json-123": `{"version":1,"id":"L2"`, // a crashed write
		"README.txt":       "letters go here",
	} {
		if err := os.WriteFile(filepath.Join(d.Path(), name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(d.Path(), "old.json"), 0o700); err != nil {
		t.Fatal(err)
	}
	ls, err := d.List()
	if err != nil || len(ls) != 1 || ls[0].ID != "L1" {
		t.Errorf("List = %v, %v; want L1 alone", ls, err)
	}
}

func TestDeadLetterDirListReportsCorruptFilesAndKeepsTheRest(t *testing.T) {
	d := dlOpen(t)
	dlPut(t, d, dlLetter("L1", dlT0), dlLetter("L3", dlT0))
	if err := os.WriteFile(filepath.Join(d.Path(), "L2.json"), []byte(`{"version":1,"id":"L2","bo`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(d.Path(), "L3.json"), filepath.Join(d.Path(), "L4.json")); err != nil {
		t.Fatal(err)
	}
	ls, err := d.List()
	if len(ls) != 1 || ls[0].ID != "L1" {
		t.Errorf("List returned %d letters, want L1 alone", len(ls))
	}
	if !errors.Is(err, ErrBadLetter) {
		t.Fatalf("List error %v, want ErrBadLetter", err)
	}
	for _, name := range []string{"L2.json", "L4.json"} {
		if !strings.Contains(err.Error(), name) {
			t.Errorf("List error does not name %s: %v", name, err)
		}
	}
}

func TestDeadLetterDirGetRefusesMissingAndUnsafeIDs(t *testing.T) {
	d := dlOpen(t)
	if _, err := d.Get("nope"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Get of a missing letter: %v, want fs.ErrNotExist", err)
	}
	if err := os.WriteFile(filepath.Join(filepath.Dir(d.Path()), "outside.json"), []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"../outside", "", "a/b", ".tmp-x"} {
		if _, err := d.Get(id); !errors.Is(err, ErrBadLetter) {
			t.Errorf("Get(%q): %v, want ErrBadLetter", id, err)
		}
	}
}

func TestDeadLetterDirMarkRedeliveredMovesTheLetterWithItsRecord(t *testing.T) {
	d := dlOpen(t)
	dlPut(t, d, dlLetter("L1", dlT0), dlLetter("L2", dlT0))
	before, err := os.ReadFile(filepath.Join(d.Path(), "L1.json"))
	if err != nil {
		t.Fatal(err)
	}
	at := dlT0.Add(24 * time.Hour)
	if err := d.MarkRedelivered("L1", Redelivery{Time: at, Status: 201, Disposition: grantretry.Succeeded, Attempts: 1}); err != nil {
		t.Fatal(err)
	}
	after, err := os.ReadFile(filepath.Join(d.Path(), RedeliveredDir, "L1.json"))
	if err != nil || string(after) != string(before) {
		t.Errorf("moved letter differs from the letter written (%v)", err)
	}
	if ls, _ := d.List(); len(ls) != 1 || ls[0].ID != "L2" {
		t.Errorf("List after the move holds %d letters, want L2 alone", len(ls))
	}
	l, r, err := d.Redelivered("L1")
	want := &Redelivery{ID: "L1", Time: at, Status: 201, Disposition: grantretry.Succeeded, Attempts: 1}
	if err != nil || l.ID != "L1" || !reflect.DeepEqual(r, want) {
		t.Errorf("Redelivered = %+v, %+v, %v; want the letter and %+v", l, r, err, want)
	}
}

func TestDeadLetterDirMarkRedeliveredRefusesMissingLetter(t *testing.T) {
	d := dlOpen(t)
	dlPut(t, d, dlLetter("L1", dlT0))
	if err := d.MarkRedelivered("L1", Redelivery{Status: 200}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"L1", "L9"} {
		if err := d.MarkRedelivered(id, Redelivery{Status: 500}); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("MarkRedelivered(%s): %v, want fs.ErrNotExist", id, err)
		}
	}
	if _, r, err := d.Redelivered("L1"); err != nil || r.Status != 200 {
		t.Errorf("the first record was replaced: %+v, %v", r, err)
	}
	if _, _, err := d.Redelivered("L9"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Redelivered of a letter never redelivered: %v, want fs.ErrNotExist", err)
	}
}

func TestDeadLetterDirConcurrentWritersKeepOneLetterPerID(t *testing.T) {
	d := dlOpen(t)
	const writers, ids = 16, 8
	var wg sync.WaitGroup
	var mu sync.Mutex
	stored := map[string]int{}
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range ids {
				l := dlLetter("L"+strconv.Itoa(i), dlT0)
				l.Attempts = w
				err := d.PutDeadLetter(context.Background(), l)
				mu.Lock()
				if err == nil {
					stored[l.ID]++
				} else if !errors.Is(err, fs.ErrExist) {
					t.Error(err)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	for i := range ids {
		if n := stored["L"+strconv.Itoa(i)]; n != 1 {
			t.Errorf("L%d stored %d times, want once", i, n)
		}
	}
	if ls, err := d.List(); err != nil || len(ls) != ids {
		t.Errorf("List: %d letters, %v; want %d whole letters", len(ls), err, ids)
	}
}

func TestDeadLetterDirWithoutHardLinksStillRefusesOverwrite(t *testing.T) {
	d := dlOpen(t)
	d.link = func(string, string) error { return &os.LinkError{Op: "link", Err: errors.ErrUnsupported} }
	dlPut(t, d, dlLetter("L1", dlT0))
	if err := d.PutDeadLetter(context.Background(), dlLetter("L1", dlT0)); !errors.Is(err, fs.ErrExist) {
		t.Errorf("second letter with the same id: %v, want fs.ErrExist", err)
	}
	if names := dlNames(t, d.Path()); !reflect.DeepEqual(names, []string{"L1.json", RedeliveredDir}) {
		t.Errorf("directory holds %q", names)
	}
}

func TestOpenDeadLetterDirRemovesOnlyStaleTemporaryFiles(t *testing.T) {
	d := dlOpen(t)
	stale := filepath.Join(d.Path(), ".tmp-L1.json-1")
	staleInArchive := filepath.Join(d.Path(), RedeliveredDir, ".tmp-L0.result.json-2")
	fresh := filepath.Join(d.Path(), ".tmp-L2.json-3")
	old := time.Now().Add(-2 * staleTempAge)
	for _, p := range []string{stale, staleInArchive, fresh} {
		if err := os.WriteFile(p, []byte("{"), 0o600); err != nil {
			t.Fatal(err)
		}
		if p != fresh {
			if err := os.Chtimes(p, old, old); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := Open(d.Path()); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]bool{stale: false, staleInArchive: false, fresh: true} {
		if _, err := os.Stat(p); (err == nil) != want {
			t.Errorf("%s: exists %v, want %v", filepath.Base(p), err == nil, want)
		}
	}
}

// Crash tests: the child process writes letters into the directory named
// by dlCrashDirEnv, printing "put <id>" once PutDeadLetter has returned,
// until it is killed: by itself in the test hook, between the synced write
// of the dlCrashAtEnv-th letter and its rename, or by the parent.
const (
	dlCrashDirEnv = "GRANTRETRY_TEST_DEADLETTER_CRASH_DIR"
	dlCrashAtEnv  = "GRANTRETRY_TEST_DEADLETTER_CRASH_AT"
)

func TestDeadLetterDirCrashChild(t *testing.T) {
	dir := os.Getenv(dlCrashDirEnv)
	if dir == "" {
		t.Skip("runs only as the child of a crash test")
	}
	crashAt, _ := strconv.Atoi(os.Getenv(dlCrashAtEnv))
	d, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	writes := 0
	d.afterTempWrite = func(string) {
		mu.Lock()
		writes++
		crash := writes == crashAt
		mu.Unlock()
		if crash {
			p, _ := os.FindProcess(os.Getpid())
			p.Kill() // SIGKILL: no deferred call, no exit handler runs
			select {}
		}
	}
	if crashAt > 0 {
		dlChildWrite(t, d, 0, 1) // one writer, so the crash point is exact
		return
	}
	// Four writers at once, so that a kill from outside often finds
	// several writes in progress.
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() { defer wg.Done(); dlChildWrite(t, d, w, 4) }()
	}
	wg.Wait()
}

// dlChildWrite writes letters w, w+step, w+2*step and so on, reporting
// each once it is stored.
func dlChildWrite(t *testing.T, d *Dir, w, step int) {
	for i := w; i < 1000; i += step {
		l := dlLetter(fmt.Sprintf("L%05d", i), dlT0.Add(time.Duration(i)*time.Second))
		dlBigBody(l, i)
		if err := d.PutDeadLetter(context.Background(), l); err != nil {
			t.Error(err)
			return
		}
		fmt.Printf("put %s\n", l.ID)
	}
}

// dlBigBody gives letter i a body of up to 256 KiB, so that a kill at a
// random moment often lands in the middle of a write.
func dlBigBody(l *grantretry.Letter, i int) {
	l.Body = []byte(strings.Repeat("grant", (i%7)*10000+1))
	sum := sha256.Sum256(l.Body)
	l.BodySHA256, l.BodyBytes = hex.EncodeToString(sum[:]), int64(len(l.Body))
}

// dlStartChild starts the crash child on dir and returns it with a scanner
// of its standard output.
func dlStartChild(t *testing.T, dir string, crashAt int) (*exec.Cmd, *bufio.Scanner) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestDeadLetterDirCrashChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), dlCrashDirEnv+"="+dir, dlCrashAtEnv+"="+strconv.Itoa(crashAt))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() }) // if the test ends first
	return cmd, bufio.NewScanner(out)
}

// dlNextPut returns the id of the next letter the child reports stored.
func dlNextPut(out *bufio.Scanner) (string, bool) {
	for out.Scan() {
		if id, ok := strings.CutPrefix(out.Text(), "put "); ok {
			return id, true
		}
	}
	return "", false
}

// dlCheckWhole checks that dir holds only whole, valid letters, and every
// letter in reported among them.
func dlCheckWhole(t *testing.T, dir string, reported []string) {
	t.Helper()
	d := &Dir{dir: dir} // not Open: it could clean up
	ls, err := d.List()
	if err != nil {
		t.Fatalf("after the crash: %v", err)
	}
	have := map[string]bool{}
	for _, l := range ls {
		have[l.ID] = true
	}
	for _, id := range reported {
		if !have[id] {
			t.Errorf("letter %s was reported stored, and is missing after the crash", id)
		}
	}
}

func dlTemps(t *testing.T, dir string) []string {
	t.Helper()
	var temps []string
	for _, name := range dlNames(t, dir) {
		if strings.HasPrefix(name, tempPrefix) {
			temps = append(temps, filepath.Join(dir, name))
		}
	}
	return temps
}

func TestDeadLetterDirCrashBetweenWriteAndRenameLeavesNoHalfLetter(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "letters")
	const crashAt = 7
	cmd, out := dlStartChild(t, dir, crashAt)
	var reported []string
	for id, ok := dlNextPut(out); ok; id, ok = dlNextPut(out) {
		reported = append(reported, id)
	}
	if err := cmd.Wait(); err == nil {
		t.Fatal("the child exited normally; it was to kill itself")
	}
	if len(reported) != crashAt-1 {
		t.Fatalf("child reported %d letters, want %d", len(reported), crashAt-1)
	}
	temps := dlTemps(t, dir)
	if len(temps) != 1 {
		t.Fatalf("temporary files after the crash: %q, want the one being written", temps)
	}
	dlCheckWhole(t, dir, reported)
	if ls, _ := (&Dir{dir: dir}).List(); len(ls) != crashAt-1 {
		t.Errorf("%d letters after the crash, want %d", len(ls), crashAt-1)
	}
	old := time.Now().Add(-2 * staleTempAge)
	if err := os.Chtimes(temps[0], old, old); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir); err != nil {
		t.Fatal(err)
	}
	if temps := dlTemps(t, dir); len(temps) != 0 {
		t.Errorf("Open left %q", temps)
	}
}

// dlAwaitTemp returns once a temporary file is in dir, which is while a
// letter is being written, or after many looks.
func dlAwaitTemp(dir string) {
	for range 100000 {
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), tempPrefix) {
				return
			}
		}
	}
}

func TestDeadLetterDirKilledAtRandomLeavesNoHalfLetter(t *testing.T) {
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 5))
	midWrite := 0
	for round := range 4 {
		dir := filepath.Join(t.TempDir(), "letters")
		cmd, out := dlStartChild(t, dir, 0)
		var reported []string
		stopAfter := 1 + rng.IntN(20)
		for len(reported) < stopAfter {
			id, ok := dlNextPut(out)
			if !ok {
				break
			}
			reported = append(reported, id)
		}
		dlAwaitTemp(dir)
		if err := cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		// What it printed before it died was reported too.
		for id, ok := dlNextPut(out); ok; id, ok = dlNextPut(out) {
			reported = append(reported, id)
		}
		cmd.Wait()
		if len(reported) < stopAfter {
			t.Fatalf("round %d: child reported %d letters before it was killed, want %d", round, len(reported), stopAfter)
		}
		dlCheckWhole(t, dir, reported)
		temps := len(dlTemps(t, dir))
		t.Logf("round %d: killed after %d letters, %d temporary files left", round, len(reported), temps)
		if temps > 0 {
			midWrite++
		}
	}
	if midWrite == 0 {
		t.Error("no kill landed while a letter was being written: the test proved nothing")
	}
}

// dlTree describes every file and directory under dir (path, mode, size,
// modification time), to show that nothing was created, removed or
// touched.
func dlTree(t *testing.T, dir string) []string {
	t.Helper()
	var tree []string
	err := filepath.WalkDir(dir, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := e.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		tree = append(tree, fmt.Sprintf("%s %v %d %d", rel, fi.Mode(), fi.Size(), fi.ModTime().UnixNano()))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return tree
}

// dlStaleTemp leaves a temporary file old enough for Open to
// remove, as a crashed write would.
func dlStaleTemp(t *testing.T, dir, name string) {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-2 * staleTempAge)
	if err := os.Chtimes(p, old, old); err != nil {
		t.Fatal(err)
	}
}

// dlReadOnlyFixture is a directory holding a waiting letter, a redelivered
// one and a stale temporary file in each directory; it returns the path
// and the two letters.
func dlReadOnlyFixture(t *testing.T) (dir string, waiting, done *grantretry.Letter) {
	t.Helper()
	d := dlOpen(t)
	waiting, done = dlLetter("L-waiting", dlT0), dlLetter("L-done", dlT0.Add(time.Second))
	dlPut(t, d, waiting, done)
	if err := d.MarkRedelivered(done.ID, Redelivery{Time: dlT0.Add(time.Hour), Status: 201}); err != nil {
		t.Fatal(err)
	}
	dlStaleTemp(t, d.Path(), ".tmp-L1.json-1")
	dlStaleTemp(t, filepath.Join(d.Path(), RedeliveredDir), ".tmp-L2.result.json-2")
	return d.Path(), waiting, done
}

// dlReadAll reads everything in the fixture through d and checks it.
func dlReadAll(t *testing.T, d *Dir, waiting, done *grantretry.Letter) {
	t.Helper()
	ls, err := d.List()
	if err != nil || len(ls) != 1 || !reflect.DeepEqual(ls[0], waiting) {
		t.Errorf("List = %v, %v; want only %s", ls, err, waiting.ID)
	}
	if got, err := d.Get(waiting.ID); err != nil || !reflect.DeepEqual(got, waiting) {
		t.Errorf("Get(%s) = %v, %v", waiting.ID, got, err)
	}
	got, rec, err := d.Redelivered(done.ID)
	if err != nil || !reflect.DeepEqual(got, done) || rec == nil || rec.Status != 201 {
		t.Errorf("Redelivered(%s) = %v, %+v, %v", done.ID, got, rec, err)
	}
}

func TestReadDeadLetterDirReadsWithoutChangingAnything(t *testing.T) {
	dir, waiting, done := dlReadOnlyFixture(t)
	before := dlTree(t, dir)
	d, err := OpenReadOnly(dir)
	if err != nil {
		t.Fatal(err)
	}
	dlReadAll(t, d, waiting, done)
	if after := dlTree(t, dir); !reflect.DeepEqual(after, before) {
		t.Errorf("reading changed the directory:\nbefore %q\nafter  %q", before, after)
	}
}

func TestReadDeadLetterDirCreatesNoRedeliveredDir(t *testing.T) {
	d := dlOpen(t)
	l := dlLetter("L-1", dlT0)
	dlPut(t, d, l)
	if err := os.Remove(filepath.Join(d.Path(), RedeliveredDir)); err != nil {
		t.Fatal(err)
	}
	r, err := OpenReadOnly(d.Path())
	if err != nil {
		t.Fatal(err)
	}
	if ls, err := r.List(); err != nil || len(ls) != 1 {
		t.Errorf("List = %v, %v; want %s", ls, err, l.ID)
	}
	if _, _, err := r.Redelivered(l.ID); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Redelivered(%s) = %v, want fs.ErrNotExist", l.ID, err)
	}
	if names := dlNames(t, d.Path()); !reflect.DeepEqual(names, []string{l.ID + ".json"}) {
		t.Errorf("directory holds %q, want only the letter", names)
	}
}

func TestReadDeadLetterDirRefusesWrites(t *testing.T) {
	dir, waiting, _ := dlReadOnlyFixture(t)
	before := dlTree(t, dir)
	d, err := OpenReadOnly(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.PutDeadLetter(context.Background(), dlLetter("L-new", dlT0)); !errors.Is(err, fs.ErrPermission) {
		t.Errorf("PutDeadLetter = %v, want fs.ErrPermission", err)
	}
	if err := d.MarkRedelivered(waiting.ID, Redelivery{Status: 201}); !errors.Is(err, fs.ErrPermission) {
		t.Errorf("MarkRedelivered = %v, want fs.ErrPermission", err)
	}
	if after := dlTree(t, dir); !reflect.DeepEqual(after, before) {
		t.Errorf("refused writes changed the directory:\nbefore %q\nafter  %q", before, after)
	}
}

func TestReadDeadLetterDirRefusesMissingDirFileAndEmptyName(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nowhere")
	file := filepath.Join(t.TempDir(), "letters")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenReadOnly(missing); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("OpenReadOnly(missing) = %v, want fs.ErrNotExist", err)
	}
	if _, err := os.Stat(missing); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the missing directory was created: %v", err)
	}
	for _, dir := range []string{file, ""} {
		if d, err := OpenReadOnly(dir); err == nil {
			t.Errorf("OpenReadOnly(%q) = %v, want an error", dir, d)
		}
	}
}

// dlMakeReadOnly makes dir and its RedeliveredDir read-only until the test
// ends. As root, where permissions do not bite, it skips the test.
func dlMakeReadOnly(t *testing.T, dir string) {
	t.Helper()
	if os.Geteuid() == 0 {
		t.Skip("root ignores directory permissions")
	}
	for _, p := range []string{dir, filepath.Join(dir, RedeliveredDir)} {
		if err := os.Chmod(p, 0o500); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Chmod(p, 0o700) })
	}
}

func TestReadDeadLetterDirWorksOnAReadOnlyDirectory(t *testing.T) {
	dir, waiting, done := dlReadOnlyFixture(t)
	dlMakeReadOnly(t, dir)
	if _, err := Open(dir); err == nil {
		t.Fatal("Open opened a read-only directory holding stale temporary files; the test proves nothing")
	}
	d, err := OpenReadOnly(dir)
	if err != nil {
		t.Fatal(err)
	}
	dlReadAll(t, d, waiting, done)
}

// A nil *Dir refuses a letter with an error instead of panicking, should
// one reach a Transport in an interface the Transport cannot see into.
func TestNilDirRefusesLetters(t *testing.T) {
	var d *Dir
	if err := d.PutDeadLetter(context.Background(), &grantretry.Letter{}); err == nil {
		t.Error("PutDeadLetter on a nil *Dir returned nil")
	}
}
