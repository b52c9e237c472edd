package main

import (
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// apache20SHA256 is the SHA-256 of the Apache License 2.0 as the Apache
// Software Foundation publishes it (LICENSE-2.0.txt): a legal review
// compares the file with that text, so it must be that text to the byte.
const apache20SHA256 = "cfc7749b96f63bd31c3c42b5c471bf756814053e847c10f3eb003417bc523d30"

// TestLicenseIsApache20AtTheRoot checks that the repository root carries
// the Apache License 2.0 unchanged, and that the README says so.
func TestLicenseIsApache20AtTheRoot(t *testing.T) {
	root := repoRoot(t)
	b, err := os.ReadFile(filepath.Join(root, "LICENSE"))
	if err != nil {
		t.Fatalf("no licence at the root: %v", err)
	}
	sum := sha256.Sum256(b)
	if got := hex.EncodeToString(sum[:]); got != apache20SHA256 {
		t.Errorf("LICENSE is not the Apache License 2.0 text as published: sha256 %s, want %s", got, apache20SHA256)
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), "Apache License 2.0 ([LICENSE](LICENSE))") {
		t.Error("README.md does not name the licence and link LICENSE")
	}
}

// TestEveryModuleIsCoveredByTheRootLicense checks that no module of the
// repository carries a licence file of its own that differs from the
// root's. A module in a subdirectory with no LICENSE gets the repository
// root's LICENSE in the zip the go command makes of it, so one file
// covers them all; a different one would put two licences in front of a
// reviewer.
func TestEveryModuleIsCoveredByTheRootLicense(t *testing.T) {
	root := repoRoot(t)
	want, err := os.ReadFile(filepath.Join(root, "LICENSE"))
	if err != nil {
		t.Fatalf("no licence at the root: %v", err)
	}
	modules := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if d.IsDir() || d.Name() != "go.mod" {
			return nil
		}
		modules++
		dir := filepath.Dir(path)
		for _, name := range []string{"LICENSE", "LICENSE.txt", "LICENSE.md", "COPYING", "LICENCE"} {
			got, err := os.ReadFile(filepath.Join(dir, name))
			if err != nil {
				continue
			}
			if string(got) != string(want) {
				rel, _ := filepath.Rel(root, filepath.Join(dir, name))
				t.Errorf("%s differs from the root's LICENSE", rel)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if modules < 2 {
		t.Fatalf("found %d modules under %s: the walk is looking in the wrong place", modules, root)
	}
}
