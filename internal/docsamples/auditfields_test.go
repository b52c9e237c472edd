package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// auditConst is one Msg* or Field* constant of auditlog.go: its value,
// and whether its comment says the record is written at WARN.
type auditConst struct {
	name, value string
	warn        bool
}

func auditConsts(t *testing.T, root string) []auditConst {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(root, "auditlog.go"), nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	var out []auditConst
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, s := range g.Specs {
			vs := s.(*ast.ValueSpec)
			for i, n := range vs.Names {
				if !strings.HasPrefix(n.Name, "Msg") && !strings.HasPrefix(n.Name, "Field") || i >= len(vs.Values) {
					continue
				}
				lit, ok := vs.Values[i].(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					continue
				}
				v, _ := strconv.Unquote(lit.Value)
				out = append(out, auditConst{name: n.Name, value: v,
					warn: strings.HasPrefix(n.Name, "Msg") && strings.Contains(vs.Comment.Text(), "WARN")})
			}
		}
	}
	if len(out) == 0 {
		t.Fatal("no Msg or Field constant in auditlog.go")
	}
	return out
}

// docs/audit-trail.md describes the records an auditor reads: every
// message and field the Transport writes is on it, and the level row names
// every message that can be written at warn.
func TestAuditTrailPageNamesEveryRecordFieldAndLevel(t *testing.T) {
	root := repoRoot(t)
	data, err := os.ReadFile(filepath.Join(root, "docs", "audit-trail.md"))
	if err != nil {
		t.Fatal(err)
	}
	page := string(data)
	levelRow := ""
	for _, line := range strings.Split(page, "\n") {
		if strings.HasPrefix(line, "| `level` |") {
			levelRow = line
		}
	}
	if levelRow == "" {
		t.Fatal("docs/audit-trail.md has no row for `level`")
	}
	for _, c := range auditConsts(t, root) {
		quoted := "`" + c.value + "`"
		if !strings.Contains(page, quoted) {
			t.Errorf("%s (%s) is written on the trail, and docs/audit-trail.md does not name it", c.name, quoted)
		}
		if c.warn && !strings.Contains(levelRow, quoted) {
			t.Errorf("%s (%s) can be written at warn, and the page's `level` row does not say so", c.name, quoted)
		}
	}
}
