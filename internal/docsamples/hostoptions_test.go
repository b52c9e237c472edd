package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// perHostOptions returns the exported options ForHost takes: those whose
// constructor returns a policyOption (also taken for one call) or a
// hostOption (the breaker and throttle every call to a host shares), read
// from the root package's source.
func perHostOptions(t *testing.T, root string) []string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(root, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, path := range paths {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || !fn.Name.IsExported() || fn.Body == nil {
				continue
			}
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				if ret, ok := n.(*ast.ReturnStmt); ok && len(ret.Results) == 1 {
					if call, ok := ret.Results[0].(*ast.CallExpr); ok {
						if id, ok := call.Fun.(*ast.Ident); ok && (id.Name == "policyOption" || id.Name == "hostOption") {
							names = append(names, fn.Name.Name)
							return false
						}
					}
				}
				return true
			})
		}
	}
	if len(names) == 0 {
		t.Fatal("no option of the retry policy found in the root package")
	}
	sort.Strings(names)
	return names
}

func TestPerHostOptionListIsEveryPolicyOption(t *testing.T) {
	root := repoRoot(t)
	want := perHostOptions(t, root)
	data, err := os.ReadFile(filepath.Join(root, "docs", "choosing-budgets.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := oneLine(string(data))
	const lead = "Only options of the retry policy can be set per host ("
	i := strings.Index(text, lead)
	if i < 0 {
		t.Fatalf("docs/choosing-budgets.md no longer says %q", lead)
	}
	list := text[i+len(lead):]
	list = list[:strings.Index(list, ")")]
	var got []string
	for _, m := range regexp.MustCompile("`(With[A-Za-z]+)`").FindAllStringSubmatch(list, -1) {
		got = append(got, m[1])
	}
	sort.Strings(got)
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("docs/choosing-budgets.md lists the per-host options\n\t%v\nForHost takes\n\t%v", got, want)
	}
}
