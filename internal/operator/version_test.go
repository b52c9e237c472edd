package operator

import (
	"bytes"
	"runtime/debug"
	"strings"
	"testing"
)

func TestVersionOf(t *testing.T) {
	lib := &debug.Module{Path: LibraryPath, Version: "v1.2.3"}
	for _, tc := range []struct {
		name string
		bi   *debug.BuildInfo
		ok   bool
		want BuildVersion
		text string
	}{
		{"no build info", nil, false, BuildVersion{Module: "unknown"}, "unknown"},
		{"a checkout", &debug.BuildInfo{GoVersion: "go1.24.2", Main: debug.Module{Path: LibraryPath, Version: "(devel)"}},
			true, BuildVersion{Module: "(devel)", Go: "go1.24.2"}, "(devel), built with go1.24.2"},
		{"go install @v1.2.3", &debug.BuildInfo{GoVersion: "go1.24.2", Main: *lib},
			true, BuildVersion{Module: "v1.2.3", Go: "go1.24.2"}, "v1.2.3, built with go1.24.2"},
		{"a stamped commit", &debug.BuildInfo{Main: debug.Module{Path: LibraryPath, Version: "v0.0.0-20260102030405-abcdefabcdef+dirty"}},
			true, BuildVersion{Module: "v0.0.0-20260102030405-abcdefabcdef+dirty"}, "v0.0.0-20260102030405-abcdefabcdef+dirty"},
		{"the fleet's tool, installed", &debug.BuildInfo{GoVersion: "go1.25.0",
			Main: debug.Module{Path: LibraryPath + "/fleet", Version: "v1.2.3"}, Deps: []*debug.Module{{Path: "github.com/jackc/pgx/v5", Version: "v5.12.0"}, lib}},
			true, BuildVersion{Module: "v1.2.3", Library: "v1.2.3", Go: "go1.25.0"}, "v1.2.3, grantretry v1.2.3, built with go1.25.0"},
		{"the fleet's tool, from a checkout", &debug.BuildInfo{GoVersion: "go1.25.0",
			Main: debug.Module{Path: LibraryPath + "/fleet", Version: "(devel)"},
			Deps: []*debug.Module{{Path: LibraryPath, Version: "v0.0.0-00010101000000-000000000000", Replace: &debug.Module{Path: "../"}}}},
			true, BuildVersion{Module: "(devel)", Library: "(devel)", Go: "go1.25.0"}, "(devel), grantretry (devel), built with go1.25.0"},
	} {
		got := versionOf(tc.bi, tc.ok)
		if got != tc.want || got.String() != tc.text {
			t.Errorf("%s: got %+v %q, want %+v %q", tc.name, got, got.String(), tc.want, tc.text)
		}
	}
}

// The test binary has build info: its line names the program and a
// version, and the Go toolchain.
func TestWriteVersion(t *testing.T) {
	var b bytes.Buffer
	if err := WriteVersion(&b, "grantretry"); err != nil {
		t.Fatal(err)
	}
	line := b.String()
	if !strings.HasPrefix(line, "grantretry ") || !strings.Contains(line, ", built with go1.") ||
		strings.Count(line, "\n") != 1 || strings.Contains(line, "unknown") {
		t.Errorf("version line %q", line)
	}
	for _, arg := range []string{"version", "-version", "--version"} {
		if !IsVersionFlag(arg) {
			t.Errorf("%q does not ask for the version", arg)
		}
	}
	for _, arg := range []string{"-v", "versions", "", "sim"} {
		if IsVersionFlag(arg) {
			t.Errorf("%q asks for the version", arg)
		}
	}
}
