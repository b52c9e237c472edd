package deadletter

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"testing"
	"time"
)

// An in-flight mark is taken exclusively: a second sender, in this
// process or another, never replaces the first one's.
func TestInFlightMarkIsNeverReplaced(t *testing.T) {
	d := dlOpen(t)
	first := time.Date(2026, 1, 15, 10, 0, 0, 0, time.UTC)
	if err := d.markSending("L-1", first); err != nil {
		t.Fatal(err)
	}
	if err := d.markSending("L-1", first.Add(time.Minute)); !errors.Is(err, fs.ErrExist) {
		t.Errorf("a second mark: %v, want an error matching fs.ErrExist", err)
	}
	var m sendingMark
	data, err := os.ReadFile(d.sendingPath("L-1"))
	if err == nil {
		err = json.Unmarshal(data, &m)
	}
	if err != nil || !m.Since.Equal(first) {
		t.Errorf("the mark says %v (%v), want the first sender's %v", m.Since, err, first)
	}
}
