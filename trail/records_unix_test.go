//go:build unix

package trail

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// A loop that stops in the first file stops the reading: Records never
// opens the next. The live file is a named pipe that nothing writes to,
// so opening it would block.
func TestRecordsReadsNoFurtherWhenTheLoopStops(t *testing.T) {
	dir := t.TempDir()
	files := buildTrail(t, dir, 40)
	live := filepath.Join(dir, "trail.jsonl")
	if files[len(files)-1] != live {
		t.Fatalf("the last file is %s, want %s", files[len(files)-1], live)
	}
	if err := os.Remove(live); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(live, 0o600); err != nil {
		t.Skipf("no named pipe here: %v", err)
	}
	done := make(chan int)
	go func() {
		var seq uint64
		for r, err := range Records(files...) {
			if err != nil {
				t.Error(err)
				break
			}
			seq = r.Seq
			if r.File == files[0] && r.Line == 2 {
				break
			}
		}
		done <- int(seq)
	}()
	select {
	case seq := <-done:
		if seq != 2 {
			t.Errorf("the loop stopped at seq %d, want 2", seq)
		}
	case <-time.After(10 * time.Second):
		t.Error("Records went on to open the live file after the loop stopped in the first")
		// Let the blocked open return, so that the goroutine ends.
		if f, err := os.OpenFile(live, os.O_RDWR, 0); err == nil {
			f.Close()
		}
		<-done
	}
}
