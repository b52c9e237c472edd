package operator

import (
	"fmt"
	"io"
	"runtime/debug"
)

// LibraryPath is the module path of the grantretry library.
const LibraryPath = "github.com/grantretry/grantretry"

// BuildVersion is what a program's build info says it was built from.
type BuildVersion struct {
	// Module is the main module's version: the tag of a program installed
	// with "go install ...@v1.2.3", a pseudo-version when the toolchain
	// stamped a commit into the build, and "(devel)" for a program built
	// or run from a checkout without one. "unknown" when the binary
	// carries no build info.
	Module string
	// Library is the version of LibraryPath the program was built with,
	// when the main module is another one that requires it (the fleet's
	// tool); "(devel)" when it is replaced by a local directory, and ""
	// when the main module is the library itself.
	Library string
	// Go is the toolchain that built the program, such as "go1.24.2".
	Go string
}

// Version reads the running program's build info.
func Version() BuildVersion {
	bi, ok := debug.ReadBuildInfo()
	return versionOf(bi, ok)
}

// versionOf reads bi; ok is false when there is none.
func versionOf(bi *debug.BuildInfo, ok bool) BuildVersion {
	if !ok || bi == nil {
		return BuildVersion{Module: "unknown"}
	}
	v := BuildVersion{Module: moduleVersion(bi.Main), Go: bi.GoVersion}
	if bi.Main.Path == LibraryPath {
		return v
	}
	for _, d := range bi.Deps {
		if d.Path == LibraryPath {
			v.Library = moduleVersion(*d)
		}
	}
	return v
}

// moduleVersion is m's version, that of its replacement if it has one, and
// "(devel)" for a module replaced by a directory or with no version.
func moduleVersion(m debug.Module) string {
	if m.Replace != nil {
		if m.Replace.Version == "" {
			return "(devel)"
		}
		return m.Replace.Version
	}
	if m.Version == "" {
		return "(devel)"
	}
	return m.Version
}

// String is "v1.2.3, grantretry v1.2.3, built with go1.24.2", leaving
// out what is not known.
func (v BuildVersion) String() string {
	s := v.Module
	if v.Library != "" {
		s += ", grantretry " + v.Library
	}
	if v.Go != "" {
		s += ", built with " + v.Go
	}
	return s
}

// IsVersionFlag reports whether arg asks a program for its version, as its
// first argument: "version", "-version" or "--version".
func IsVersionFlag(arg string) bool {
	switch arg {
	case "version", "-version", "--version":
		return true
	}
	return false
}

// WriteVersion writes the line a program prints for "version": its name
// and Version().
func WriteVersion(w io.Writer, program string) error {
	_, err := fmt.Fprintf(w, "%s %s\n", program, Version())
	return err
}
