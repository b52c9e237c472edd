package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// testRepo is a module of its own in a temporary directory, with the
// record's files, for the checker to read as it reads the repository.
type testRepo struct {
	t *testing.T
	repo
}

func newTestRepo(t *testing.T, files map[string]string) *testRepo {
	t.Helper()
	dir := t.TempDir()
	r := &testRepo{t: t, repo: repo{
		root:    dir,
		modules: []module{{name: "m", dir: "."}},
		barePkg: "example.com/m",
	}}
	r.put("go.mod", "module example.com/m\n\ngo 1.24\n")
	for name, text := range files {
		r.put(name, text)
	}
	return r
}

func (r *testRepo) put(name, text string) {
	r.t.Helper()
	p := filepath.Join(r.root, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		r.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		r.t.Fatal(err)
	}
}

func (r *testRepo) read(name string) string {
	r.t.Helper()
	b, err := os.ReadFile(filepath.Join(r.root, name))
	if err != nil {
		r.t.Fatal(err)
	}
	return string(b)
}

// check runs the check and returns its report, "" when it passes.
func (r *testRepo) check() string {
	r.t.Helper()
	report, err := r.repo.check()
	if err != nil {
		r.t.Fatal(err)
	}
	return report
}

func (r *testRepo) write() string {
	r.t.Helper()
	out, err := r.repo.write()
	if err != nil {
		r.t.Fatal(err)
	}
	return out
}

// baseline records the code's API as the last release's, as the
// repository's record began.
func (r *testRepo) baseline() {
	r.t.Helper()
	lines, err := moduleAPI(r.root, r.modules[0])
	if err != nil {
		r.t.Fatal(err)
	}
	if err := writeLines(r.basePath(r.modules[0]), lines); err != nil {
		r.t.Fatal(err)
	}
}

func mustContain(t *testing.T, report string, wants ...string) {
	t.Helper()
	if report == "" {
		t.Fatalf("the check passed; want it to fail naming %q", wants)
	}
	for _, w := range wants {
		if !strings.Contains(report, w) {
			t.Errorf("the report does not say %q:\n%s", w, report)
		}
	}
}

func mustPass(t *testing.T, report string) {
	t.Helper()
	if report != "" {
		t.Fatalf("the check failed:\n%s", report)
	}
}

const oldGo = `package m

// Old is there from the start.
func Old(s string, n ...int) error { return nil }
`

const changelogHead = "# Changelog\n\n## Unreleased\n\n"

func TestAddedFuncFailsUntilRecordedAndInTheChangelog(t *testing.T) {
	r := newTestRepo(t, map[string]string{"m.go": oldGo})
	r.baseline()
	mustPass(t, r.check())

	r.put("new.go", "package m\n\nfunc New(limit int) (int, error) { return limit, nil }\n")
	mustContain(t, r.check(),
		"api/next/m.txt: added in the code, not recorded:\n\t+ pkg example.com/m, func New(int) (int, error)",
		writeCommand, `CHANGELOG.md entry under "## Unreleased"`)

	out := r.write()
	if got := r.read("api/next/m.txt"); got != "pkg example.com/m, func New(int) (int, error)\n" {
		t.Errorf("api/next/m.txt is %q", got)
	}
	if !strings.Contains(out, "`New`") {
		t.Errorf("-write does not say the changelog must name New:\n%s", out)
	}
	want := "`New`:\n\tapi/next/m.txt: pkg example.com/m, func New(int) (int, error)"
	mustContain(t, r.check(), want) // no CHANGELOG.md at all

	for _, changelog := range []string{
		changelogHead + "- New returns its limit.\n",                                // not in backquotes
		changelogHead + "- `Newer` and `m.Renew`.\n",                                // another name
		"# Changelog\n\n## Unreleased\n\n## v0.1.0\n\n- `New` returns its limit.\n", // not under Unreleased
	} {
		r.put("CHANGELOG.md", changelog)
		mustContain(t, r.check(), want)
	}
	r.put("CHANGELOG.md", changelogHead+"- `m.New(limit)` returns its limit.\n\n## v0.1.0\n\n- First.\n")
	mustPass(t, r.check())
}

func TestRemovedOrChangedDeclarationFails(t *testing.T) {
	r := newTestRepo(t, map[string]string{
		"m.go": oldGo,
		"sub/sub.go": `package sub

type T struct{ A int }

func (t *T) Get() int { return t.A }
`,
	})
	r.baseline()
	mustPass(t, r.check())

	r.put("m.go", "package m\n")
	r.put("sub/sub.go", "package sub\n\ntype T struct{ A string }\n\nfunc (t *T) Get() int { return 0 }\n")
	mustContain(t, r.check(),
		"removed from the code, still recorded:\n\t- pkg example.com/m, func Old(string, ...int) error",
		"changed in the code, not recorded:\n\t- pkg example.com/m/sub, type T struct, A int\n\t+ pkg example.com/m/sub, type T struct, A string",
		writeCommand)

	r.write()
	wantNext := "- pkg example.com/m, func Old(string, ...int) error\n" +
		"- pkg example.com/m/sub, type T struct, A int\n" +
		"pkg example.com/m/sub, type T struct, A string\n"
	if got := r.read("api/next/m.txt"); got != wantNext {
		t.Errorf("api/next/m.txt is\n%s\nwant\n%s", got, wantNext)
	}
	r.put("CHANGELOG.md", changelogHead+"- `Old` is gone.\n")
	mustContain(t, r.check(), "`T.A`:")

	// A field is named by its type and name; the type alone is not enough.
	r.put("CHANGELOG.md", changelogHead+"- `Old` is gone.\n- `sub.T` changed.\n")
	mustContain(t, r.check(), "`T.A`:")
	r.put("CHANGELOG.md", changelogHead+"- `Old` is gone.\n- `sub.T.A` is a string.\n")
	mustPass(t, r.check())

	// Put back as it was, the record must follow: api/next/ empties.
	r.put("m.go", oldGo)
	r.put("sub/sub.go", "package sub\n\ntype T struct{ A int }\n\nfunc (t *T) Get() int { return t.A }\n")
	mustContain(t, r.check(), "added in the code, not recorded:\n\t+ pkg example.com/m, func Old(string, ...int) error")
	r.write()
	if _, err := os.Stat(filepath.Join(r.root, "api/next/m.txt")); !os.IsNotExist(err) {
		t.Errorf("api/next/m.txt is still there (%v)", err)
	}
	mustPass(t, r.check())
}

func TestAnotherPackagesNamesAreQualified(t *testing.T) {
	r := newTestRepo(t, map[string]string{"m.go": oldGo, "sub/sub.go": "package sub\n\ntype Dir struct{}\n"})
	r.baseline()
	r.put("sub/all.go", "package sub\n\nfunc Records() {}\n\nfunc (d *Dir) All() {}\n")
	r.write()
	r.put("CHANGELOG.md", changelogHead+"- `Records` and `All`.\n")
	mustContain(t, r.check(), "`sub.Records`:", "`Dir.All`:")
	r.put("CHANGELOG.md", changelogHead+"- `sub.Records()` and `(*Dir).All`.\n")
	mustPass(t, r.check())
}

func TestNewPackageOrTypeIsNamedAsAWhole(t *testing.T) {
	r := newTestRepo(t, map[string]string{"m.go": oldGo})
	r.baseline()
	r.put("fake/fake.go", "package fake\n\ntype Funder struct{ Count int }\n\nfunc NewFunder() *Funder { return nil }\n")
	r.put("m2.go", "package m\n\ntype Answer struct{ Status int }\n\nfunc (Answer) String() string { return \"\" }\n")
	r.write()
	r.put("CHANGELOG.md", changelogHead+"- Package `fake`.\n")
	report := r.check()
	mustContain(t, report, "`Answer`:", "`Answer.Status`:", "`Answer.String`:")
	if strings.Contains(report, "fake") {
		t.Errorf("a new package's lines are not covered by its name:\n%s", report)
	}
	r.put("CHANGELOG.md", changelogHead+"- Package `fake`, and `Answer`.\n")
	mustPass(t, r.check())
}

func TestReleaseFoldsNextIntoTheRecord(t *testing.T) {
	r := newTestRepo(t, map[string]string{"m.go": oldGo})
	r.baseline()
	r.put("new.go", "package m\n\nfunc New() {}\n")
	r.write()
	if _, err := r.release(); err == nil || !strings.Contains(err.Error(), "`New`") {
		t.Fatalf("release with the changelog behind: err = %v, want it refused naming New", err)
	}
	r.put("CHANGELOG.md", changelogHead+"- `New`.\n")
	if _, err := r.release(); err != nil {
		t.Fatal(err)
	}
	if got := r.read("api/m.txt"); !strings.Contains(got, "pkg example.com/m, func New()\n") {
		t.Errorf("api/m.txt after the release:\n%s", got)
	}
	if _, err := os.Stat(filepath.Join(r.root, "api/next/m.txt")); !os.IsNotExist(err) {
		t.Errorf("api/next/m.txt is still there (%v)", err)
	}
	r.put("CHANGELOG.md", "# Changelog\n\n## Unreleased\n\n## v0.1.0\n\n- `New`.\n")
	mustPass(t, r.check())
}

// The lines are Go's api/ format: no parameter names, other packages'
// types by their package's name, each field, method and interface method
// a line, constants by value and by type.
func TestLinesInGosAPIFormat(t *testing.T) {
	r := newTestRepo(t, map[string]string{"m.go": `package m

import (
	"context"
	"io"
	"net/http"
)

const Limit = 10

type Kind int

const First Kind = 1

var Default *http.Client

type Option interface{ apply() }

type Sink interface {
	io.Writer
	Sync(ctx context.Context) error
}

type Base struct{}

func (Base) Name() string { return "" }

type Letter struct {
	Base
	ID     string
	hidden int
}

func (l *Letter) Send(ctx context.Context, opts ...Option) (<-chan error, error) { return nil, nil }

type Func func(r *http.Response, peek []byte) bool

type Alias = Letter

type Set[E comparable] struct{ items map[E]bool }

func (s *Set[E]) Add(e E) {}

func Collect[T any](seq func(yield func(T) bool)) []T { return nil }

func unexported() {}
`})
	got, err := moduleAPI(r.root, r.modules[0])
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"pkg example.com/m, const First = 1",
		"pkg example.com/m, const First Kind",
		"pkg example.com/m, const Limit = 10",
		"pkg example.com/m, const Limit ideal-int",
		"pkg example.com/m, func Collect[T any](func(func(T) bool)) []T",
		"pkg example.com/m, method (*Letter) Send(context.Context, ...Option) (<-chan error, error)",
		"pkg example.com/m, method (*Set[E]) Add(E)",
		"pkg example.com/m, method (Base) Name() string",
		"pkg example.com/m, method (Letter) Name() string",
		"pkg example.com/m, type Alias = Letter",
		"pkg example.com/m, type Base struct",
		"pkg example.com/m, type Func func(*http.Response, []byte) bool",
		"pkg example.com/m, type Kind int",
		"pkg example.com/m, type Letter struct",
		"pkg example.com/m, type Letter struct, ID string",
		"pkg example.com/m, type Letter struct, embedded Base",
		"pkg example.com/m, type Option interface { unexported methods }",
		"pkg example.com/m, type Set[E comparable] struct",
		"pkg example.com/m, type Sink interface { Sync, Write }",
		"pkg example.com/m, type Sink interface, Sync(context.Context) error",
		"pkg example.com/m, type Sink interface, Write([]byte) (int, error)",
		"pkg example.com/m, var Default *http.Client",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\n\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// The API is the packages users import: not internal packages, examples
// or the ones skipped, nor the packages of a nested module.
func TestPackagesOfTheAPI(t *testing.T) {
	for _, c := range []struct {
		path string
		want bool
	}{
		{"example.com/m", true},
		{"example.com/m/trail", true},
		{"example.com/m/internal/durable", false},
		{"example.com/m/examples/demo", false},
		{"example.com/m/worm/s3test", false},
		{"example.com/m/worm/s3test/x", false},
		{"example.com/mod", false},
	} {
		if got := inAPI("example.com/m", c.path, []string{"worm/s3test"}); got != c.want {
			t.Errorf("inAPI(%s) = %v, want %v", c.path, got, c.want)
		}
	}
}
