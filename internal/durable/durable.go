// Package durable holds what the packages that keep files (trail,
// deadletter) need to make them survive a crash.
package durable

import (
	"os"
	"runtime"
)

// SyncDir makes a directory's entries durable: a file created, renamed,
// linked or removed in it stays so after a crash. Windows cannot sync a
// directory, and its filesystems journal renames anyway.
func SyncDir(dir string) error {
	if runtime.GOOS == "windows" {
		return nil
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
