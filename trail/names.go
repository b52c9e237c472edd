package trail

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// newestRotated returns the largest index among the rotated files of the
// trail at path, and that file's base name.
func newestRotated(path string) (int, string, error) {
	entries, err := os.ReadDir(filepath.Dir(path))
	if err != nil {
		return 0, "", err
	}
	base := filepath.Base(path)
	index, name := 0, ""
	for _, e := range entries {
		if n, ok := rotatedIndex(base, e.Name()); ok && n > index {
			index, name = n, e.Name()
		}
	}
	return index, name, nil
}

// rotatedIndex returns the index of name if it is a rotated file of the
// trail whose live file is base: base, a dot, six digits or more.
func rotatedIndex(base, name string) (int, bool) {
	digits, ok := strings.CutPrefix(name, base+".")
	if !ok || len(digits) < 6 {
		return 0, false
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	n, err := strconv.Atoi(digits)
	return n, err == nil
}

// RotatedIndex reports whether name, a file's base name, is a rotated file
// of the trail whose live file's base name is live (live, a dot, six
// digits or more, as Trail names them), and its index: rotated files hold
// the trail in the order of their indexes, and the live file follows them.
func RotatedIndex(live, name string) (int, bool) { return rotatedIndex(live, name) }

// LiveFile returns the path of the live file of the trail whose file is
// at p: p without its rotation suffix if it is a rotated file, else p.
func LiveFile(p string) string { return trailBase(p) }

// isHeadPath reports whether p is a head file, as a glob like trail.jsonl*
// picks it up with the trail's files.
func isHeadPath(p string) bool { return strings.HasSuffix(p, ".head") }

// trailBase is the live file's path of the trail p belongs to.
func trailBase(p string) string {
	dir, name := filepath.Split(p)
	if i := strings.LastIndexByte(name, '.'); i > 0 {
		if _, ok := rotatedIndex(name[:i], name); ok {
			return filepath.Join(dir, name[:i])
		}
	}
	return p
}
