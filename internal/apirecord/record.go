package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// A repo is what the record covers: the repository's root, its modules,
// and the package whose names the changelog may write unqualified.
type repo struct {
	root    string
	modules []module
	barePkg string
}

func (r repo) basePath(m module) string { return filepath.Join(r.root, "api", m.name+".txt") }
func (r repo) nextPath(m module) string {
	return filepath.Join(r.root, "api", "next", m.name+".txt")
}
func (r repo) rel(p string) string {
	if rel, err := filepath.Rel(r.root, p); err == nil {
		return filepath.ToSlash(rel)
	}
	return p
}

// removedPrefix marks a line of api/next/ that the code no longer has.
const removedPrefix = "- "

// readLines reads an api file: one line per declaration; a missing file
// is an empty record.
func readLines(p string) ([]string, error) {
	b, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var lines []string
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimRight(l, "\r"); l != "" {
			lines = append(lines, l)
		}
	}
	return lines, nil
}

// writeLines writes an api file, or removes it when it has no lines.
func writeLines(p string, lines []string) error {
	if len(lines) == 0 {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o644)
}

func set(lines []string) map[string]bool {
	s := make(map[string]bool, len(lines))
	for _, l := range lines {
		s[l] = true
	}
	return s
}

// minus returns the lines of a not in b, sorted.
func minus(a []string, b map[string]bool) []string {
	var out []string
	for _, l := range a {
		if !b[l] {
			out = append(out, l)
		}
	}
	sort.Strings(out)
	return out
}

// nextLines is what api/next/ holds for a module: the lines the code adds
// to the last release's record as they are, and those it removes marked
// "- ", sorted.
func nextLines(base, code []string) []string {
	var next []string
	next = append(next, minus(code, set(base))...)
	for _, l := range minus(base, set(code)) {
		next = append(next, removedPrefix+l)
	}
	sort.Strings(next)
	return next
}

// splitNext splits api/next/ lines into the added and the removed.
func splitNext(next []string) (added, removed []string) {
	for _, l := range next {
		if r, ok := strings.CutPrefix(l, removedPrefix); ok {
			removed = append(removed, r)
		} else {
			added = append(added, l)
		}
	}
	return added, removed
}

// A state is a module's record and its code.
type state struct {
	m          module
	base, next []string // api/<m>.txt, api/next/<m>.txt
	code       []string
}

func (r repo) load() ([]state, error) {
	var states []state
	for _, m := range r.modules {
		base, err := readLines(r.basePath(m))
		if err != nil {
			return nil, err
		}
		next, err := readLines(r.nextPath(m))
		if err != nil {
			return nil, err
		}
		code, err := moduleAPI(r.root, m)
		if err != nil {
			return nil, fmt.Errorf("module %s: %v", m.name, err)
		}
		states = append(states, state{m: m, base: base, next: next, code: code})
	}
	return states, nil
}

// recorded is the API the record says the code has: the last release's
// lines, with api/next/'s added and its removed taken out.
func (s state) recorded() []string {
	added, removed := splitNext(s.next)
	gone := set(removed)
	var lines []string
	for _, l := range s.base {
		if !gone[l] {
			lines = append(lines, l)
		}
	}
	lines = append(lines, added...)
	sort.Strings(lines)
	return lines
}

// A diff is one difference between the code and its record.
type diff struct {
	file     string
	old, new string // old only: removed; new only: added; both: changed
}

func (d diff) String() string {
	switch {
	case d.old == "":
		return fmt.Sprintf("%s: added in the code, not recorded:\n\t+ %s", d.file, d.new)
	case d.new == "":
		return fmt.Sprintf("%s: removed from the code, still recorded:\n\t- %s", d.file, d.old)
	}
	return fmt.Sprintf("%s: changed in the code, not recorded:\n\t- %s\n\t+ %s", d.file, d.old, d.new)
}

// recordDiffs returns every line in which the code and its record differ,
// an added and a removed line of the same declaration as one change; and
// reports whether api/next/ is other than -write would write it, which it
// can be even when the two agree (a line both added and in the release).
func (r repo) recordDiffs(s state) (diffs []diff, stale bool) {
	file := r.rel(r.nextPath(s.m))
	rec := s.recorded()
	added := minus(s.code, set(rec))
	removed := minus(rec, set(s.code))
	byKey := make(map[string]int)
	for _, l := range removed {
		byKey[key(l)] = len(diffs)
		diffs = append(diffs, diff{file: file, old: l})
	}
	for _, l := range added {
		if i, ok := byKey[key(l)]; ok && diffs[i].new == "" {
			diffs[i].new = l
			continue
		}
		diffs = append(diffs, diff{file: file, new: l})
	}
	sort.Slice(diffs, func(i, j int) bool { return diffs[i].old+diffs[i].new < diffs[j].old+diffs[j].new })
	want := nextLines(s.base, s.code)
	stale = strings.Join(want, "\n") != strings.Join(s.next, "\n")
	return diffs, stale
}

// A decl is what one api line declares.
type decl struct {
	pkg   string // import path
	kind  string // func, method, type, const, var
	ident string // Name, or Type.Member for methods, fields and interface methods
	value bool   // a constant's value line, not its type line
}

var (
	reFunc   = regexp.MustCompile(`^func (\w+)`)
	reMethod = regexp.MustCompile(`^method \(\*?(\w+)(?:\[[^\]]*\])?\) (\w+)`)
	reMember = regexp.MustCompile(`^type (\w+)(?:\[.*?\])? (?:struct|interface), (?:embedded \*?(?:\w+\.)?(\w+)|(\w+))`)
	reType   = regexp.MustCompile(`^type (\w+)`)
	reConst  = regexp.MustCompile(`^const (\w+)( =)?`)
	reVar    = regexp.MustCompile(`^var (\w+)`)
)

// parse reads the declaration an api line is about.
func parse(line string) (decl, bool) {
	rest, ok := strings.CutPrefix(line, "pkg ")
	if !ok {
		return decl{}, false
	}
	pkg, rest, ok := strings.Cut(rest, ", ")
	if !ok {
		return decl{}, false
	}
	d := decl{pkg: pkg}
	if m := reMethod.FindStringSubmatch(rest); m != nil {
		d.kind, d.ident = "method", m[1]+"."+m[2]
	} else if m := reMember.FindStringSubmatch(rest); m != nil {
		d.kind, d.ident = "type", m[1]+"."+m[2]+m[3]
	} else if m := reType.FindStringSubmatch(rest); m != nil {
		d.kind, d.ident = "type", m[1]
	} else if m := reFunc.FindStringSubmatch(rest); m != nil {
		d.kind, d.ident = "func", m[1]
	} else if m := reConst.FindStringSubmatch(rest); m != nil {
		d.kind, d.ident, d.value = "const", m[1], m[2] != ""
	} else if m := reVar.FindStringSubmatch(rest); m != nil {
		d.kind, d.ident = "var", m[1]
	} else {
		return decl{}, false
	}
	return d, true
}

// key names the declaration a line is about, so that an old and a new line
// of the same declaration read as one change.
func key(line string) string {
	d, ok := parse(line)
	if !ok {
		return line
	}
	return fmt.Sprintf("%s|%s|%s|%v", d.pkg, d.kind, d.ident, d.value)
}

// owner is the type a member line belongs to, or "".
func (d decl) owner() string {
	if t, _, ok := strings.Cut(d.ident, "."); ok {
		return t
	}
	return ""
}

// mention is the name CHANGELOG.md must give a declaration: Type.Member for
// a method or field; a package-level name qualified by its package's name
// (trail.Records), except in the package the changelog is about
// (WithSlog).
func (r repo) mention(d decl) string {
	if strings.Contains(d.ident, ".") || d.pkg == r.barePkg {
		return d.ident
	}
	return pkgName(d.pkg) + "." + d.ident
}

// unreleased returns the code spans of CHANGELOG.md's "## Unreleased"
// section, and whether it has one.
func unreleased(changelog string) (spans []string, ok bool) {
	in := false
	for _, l := range strings.Split(changelog, "\n") {
		if strings.HasPrefix(l, "## ") {
			in = strings.EqualFold(strings.TrimSpace(strings.TrimPrefix(l, "## ")), "Unreleased")
			ok = ok || in
			continue
		}
		if in {
			for _, m := range reSpan.FindAllStringSubmatch(l, -1) {
				spans = append(spans, m[1])
			}
		}
	}
	return spans, ok
}

var reSpan = regexp.MustCompile("`([^`]+)`")

// mentioned reports whether a code span names name as a whole: WithSlog in
// `grantretry.WithSlog(logger)`, Dir.All in `(*Dir).All`.
func mentioned(spans []string, name string) bool {
	pat := regexp.QuoteMeta(name)
	pat = strings.Replace(pat, `\.`, `\)?\.`, 1)
	re := regexp.MustCompile(`(^|[^\w])` + pat + `($|[^\w])`)
	for _, s := range spans {
		if re.MatchString(s) {
			return true
		}
	}
	return false
}

// A missing is an api/next/ line CHANGELOG.md's Unreleased section does not
// name.
type missing struct {
	file, line, name string
}

// changelogMisses returns the lines of api/next/ that CHANGELOG.md's
// Unreleased section does not name, in a code span. A member of a type
// that is itself added or removed is named by its type; a line of a
// package that is wholly added or removed, by the package's name.
func (r repo) changelogMisses(states []state) ([]missing, error) {
	b, err := os.ReadFile(filepath.Join(r.root, "CHANGELOG.md"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	spans, _ := unreleased(string(b))
	var misses []missing
	for _, s := range states {
		added, removed := splitNext(s.next)
		basePkgs, codePkgs := make(map[string]bool), make(map[string]bool)
		for _, l := range s.base {
			if d, ok := parse(l); ok {
				basePkgs[d.pkg] = true
			}
		}
		for _, l := range s.code {
			if d, ok := parse(l); ok {
				codePkgs[d.pkg] = true
			}
		}
		typesInNext := make(map[string]bool) // pkg|Type of a type line in api/next/
		for _, l := range append(append([]string(nil), added...), removed...) {
			if d, ok := parse(l); ok && d.kind == "type" && d.owner() == "" {
				typesInNext[d.pkg+"|"+d.ident] = true
			}
		}
		for _, l := range s.next {
			d, ok := parse(strings.TrimPrefix(l, removedPrefix))
			if !ok {
				misses = append(misses, missing{file: r.rel(r.nextPath(s.m)), line: l, name: "(a line -write did not write)"})
				continue
			}
			name := r.mention(d)
			if mentioned(spans, name) {
				continue
			}
			if t := d.owner(); t != "" && typesInNext[d.pkg+"|"+t] &&
				mentioned(spans, r.mention(decl{pkg: d.pkg, ident: t})) {
				continue
			}
			if (!basePkgs[d.pkg] || !codePkgs[d.pkg]) && mentioned(spans, pkgName(d.pkg)) {
				continue
			}
			misses = append(misses, missing{file: r.rel(r.nextPath(s.m)), line: l, name: name})
		}
	}
	return misses, nil
}

// check compares the code with its record and the record with CHANGELOG.md,
// and returns the report of every difference, or "" when there is none.
func (r repo) check() (string, error) {
	states, err := r.load()
	if err != nil {
		return "", err
	}
	var b strings.Builder
	stale := false
	for _, s := range states {
		diffs, st := r.recordDiffs(s)
		for _, d := range diffs {
			fmt.Fprintln(&b, d)
		}
		stale = stale || st
		if st && len(diffs) == 0 {
			fmt.Fprintf(&b, "%s: not as -write writes it\n", r.rel(r.nextPath(s.m)))
		}
	}
	if stale {
		fmt.Fprintf(&b, "\nThe exported API differs from its record in api/. Record it with\n\n\t%s\n\n", writeCommand)
		fmt.Fprintln(&b, `AND add a CHANGELOG.md entry under "## Unreleased" that names, in backquotes, each declaration added, removed or changed.`)
		return b.String(), nil
	}
	misses, err := r.changelogMisses(states)
	if err != nil {
		return "", err
	}
	if len(misses) > 0 {
		writeMisses(&b, misses)
		return b.String(), nil
	}
	return "", nil
}

const writeCommand = "go run ./internal/apirecord -write"

func writeMisses(b *strings.Builder, misses []missing) {
	fmt.Fprintln(b, `CHANGELOG.md's "## Unreleased" section does not name these changes to the exported API:`)
	var names []string
	lines := make(map[string][]missing)
	for _, m := range misses {
		if lines[m.name] == nil {
			names = append(names, m.name)
		}
		lines[m.name] = append(lines[m.name], m)
	}
	for _, n := range names {
		fmt.Fprintf(b, "`%s`:\n", n)
		for _, m := range lines[n] {
			fmt.Fprintf(b, "\t%s: %s\n", m.file, m.line)
		}
	}
	quoted := make([]string, len(names))
	for i, n := range names {
		quoted[i] = "`" + n + "`"
	}
	fmt.Fprintf(b, "\nAdd a CHANGELOG.md entry under \"## Unreleased\" that names each in backquotes: %s\n", strings.Join(quoted, ", "))
}

// write records the code's API: api/next/ becomes what the code adds to
// and removes from the last release's record. It returns what it changed.
func (r repo) write() (string, error) {
	states, err := r.load()
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for i, s := range states {
		next := nextLines(s.base, s.code)
		if strings.Join(next, "\n") == strings.Join(s.next, "\n") {
			continue
		}
		if err := writeLines(r.nextPath(s.m), next); err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "wrote %s (%d lines)\n", r.rel(r.nextPath(s.m)), len(next))
		states[i].next = next
	}
	misses, err := r.changelogMisses(states)
	if err != nil {
		return "", err
	}
	if len(misses) > 0 {
		b.WriteString("\n")
		writeMisses(&b, misses)
	}
	return b.String(), nil
}

// release folds api/next/ into the last release's record: api/<module>.txt
// becomes the code's API and api/next/ empties. It refuses while the check
// fails.
func (r repo) release() (string, error) {
	if report, err := r.check(); err != nil || report != "" {
		if err == nil {
			err = fmt.Errorf("the record is not ready for a release:\n%s", report)
		}
		return "", err
	}
	states, err := r.load()
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for _, s := range states {
		if err := writeLines(r.basePath(s.m), s.code); err != nil {
			return "", err
		}
		if err := writeLines(r.nextPath(s.m), nil); err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "wrote %s (%d lines)\n", r.rel(r.basePath(s.m)), len(s.code))
	}
	b.WriteString("\napi/next/ is empty. Now give CHANGELOG.md's \"## Unreleased\" section the release's version and date, and start a new, empty one above it.\n")
	return b.String(), nil
}
