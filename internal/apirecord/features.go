package main

import (
	"bufio"
	"bytes"
	"fmt"
	"go/constant"
	"go/importer"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path"
	"sort"
	"strings"
)

// A module is one Go module of the repository whose packages users import.
type module struct {
	name string   // the record's file name: api/<name>.txt, api/next/<name>.txt
	dir  string   // its directory, relative to the repository root
	skip []string // packages, relative to the module's path, that are not part of its API
}

// modulePackages lists the import paths of a module's API: its packages
// other than commands, internal packages, examples and the ones it skips.
// The export data of each, and of everything they import, comes from the
// build cache through go list -export; exports maps import paths to it.
func modulePackages(dir string, m module) (pkgs []string, exports map[string]string, err error) {
	cmd := exec.Command("go", "list", "-deps", "-export",
		"-f", "{{.ImportPath}}\t{{.Name}}\t{{.DepOnly}}\t{{.Module}}\t{{.Export}}", "./...")
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, nil, fmt.Errorf("go list in %s: %v\n%s", dir, err, stderr.Bytes())
	}
	modPath, err := goListModule(dir)
	if err != nil {
		return nil, nil, err
	}
	exports = make(map[string]string)
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Split(sc.Text(), "\t")
		if len(f) != 5 {
			return nil, nil, fmt.Errorf("go list in %s: unexpected line %q", dir, sc.Text())
		}
		importPath, name, depOnly, export := f[0], f[1], f[2] == "true", f[4]
		exports[importPath] = export
		if depOnly || name == "main" || !inAPI(modPath, importPath, m.skip) {
			continue
		}
		pkgs = append(pkgs, importPath)
	}
	sort.Strings(pkgs)
	return pkgs, exports, nil
}

func goListModule(dir string) (string, error) {
	cmd := exec.Command("go", "list", "-m")
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go list -m in %s: %v\n%s", dir, err, stderr.Bytes())
	}
	return strings.TrimSpace(string(out)), nil
}

// inAPI reports whether a package of the module at modPath is part of its
// API: not internal, not an example, not skipped.
func inAPI(modPath, importPath string, skip []string) bool {
	rel, ok := strings.CutPrefix(importPath, modPath)
	if !ok || (rel != "" && rel[0] != '/') {
		return false // a package of a nested module
	}
	rel = strings.TrimPrefix(rel, "/")
	for _, elem := range strings.Split(rel, "/") {
		if elem == "internal" || elem == "examples" || elem == "testdata" {
			return false
		}
	}
	for _, s := range skip {
		if rel == s || strings.HasPrefix(rel, s+"/") {
			return false
		}
	}
	return true
}

// moduleAPI returns the lines of a module's exported API, sorted.
func moduleAPI(root string, m module) ([]string, error) {
	dir := root
	if m.dir != "." {
		dir = root + string(os.PathSeparator) + m.dir
	}
	pkgs, exports, err := modulePackages(dir, m)
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	imp := importer.ForCompiler(fset, "gc", func(p string) (io.ReadCloser, error) {
		file := exports[p]
		if file == "" {
			return nil, fmt.Errorf("no export data for %s", p)
		}
		return os.Open(file)
	})
	var lines []string
	for _, p := range pkgs {
		pkg, err := imp.Import(p)
		if err != nil {
			return nil, fmt.Errorf("reading %s: %v", p, err)
		}
		lines = append(lines, packageAPI(pkg)...)
	}
	sort.Strings(lines)
	return lines, nil
}

// packageAPI returns a package's exported API, one line per exported
// declaration, as Go's own api/ files write it: parameter names left out,
// other packages' types by their package's name.
func packageAPI(pkg *types.Package) []string {
	w := &writer{pkg: pkg}
	prefix := "pkg " + pkg.Path() + ", "
	var lines []string
	emit := func(s string) { lines = append(lines, prefix+s) }
	scope := pkg.Scope()
	for _, name := range scope.Names() {
		obj := scope.Lookup(name)
		if !obj.Exported() {
			continue
		}
		switch obj := obj.(type) {
		case *types.Const:
			emit("const " + name + " = " + constValue(obj.Val()))
			emit("const " + name + " " + w.typ(obj.Type()))
		case *types.Var:
			emit("var " + name + " " + w.typ(obj.Type()))
		case *types.Func:
			sig := obj.Type().(*types.Signature)
			emit("func " + name + w.typeParams(sig.TypeParams()) + w.signature(sig))
		case *types.TypeName:
			for _, l := range w.typeDecl(obj) {
				emit(l)
			}
		}
	}
	return lines
}

func constValue(v constant.Value) string {
	if v.Kind() == constant.Float {
		if f, exact := constant.Float64Val(v); exact {
			return fmt.Sprint(f)
		}
	}
	return v.ExactString()
}

// typeDecl returns the lines of a type: the type itself, its exported
// fields or interface methods, and the exported methods of its method set
// (the promoted ones too, which are part of what a user can call).
func (w *writer) typeDecl(obj *types.TypeName) []string {
	name := obj.Name()
	if obj.IsAlias() {
		return []string{"type " + name + " = " + w.typ(types.Unalias(obj.Type()))}
	}
	named, ok := obj.Type().(*types.Named)
	if !ok {
		return []string{"type " + name + " " + w.typ(obj.Type())}
	}
	head := "type " + name + w.typeParams(named.TypeParams())
	var lines []string
	switch u := named.Underlying().(type) {
	case *types.Struct:
		lines = append(lines, head+" struct")
		for i := range u.NumFields() {
			f := u.Field(i)
			switch {
			case f.Embedded() && f.Exported():
				lines = append(lines, head+" struct, embedded "+w.typ(f.Type()))
			case f.Exported():
				lines = append(lines, head+" struct, "+f.Name()+" "+w.typ(f.Type()))
			}
		}
	case *types.Interface:
		var names []string
		unexported := false
		for i := range u.NumMethods() {
			m := u.Method(i)
			if !m.Exported() {
				unexported = true
				continue
			}
			names = append(names, m.Name())
			lines = append(lines, head+" interface, "+m.Name()+w.signature(m.Type().(*types.Signature)))
		}
		sort.Strings(names)
		if unexported {
			names = append(names, "unexported methods")
		}
		lines = append(lines, head+" interface { "+strings.Join(names, ", ")+" }")
		return lines
	default:
		lines = append(lines, head+" "+w.typ(u))
	}
	recv := name
	if tp := named.TypeParams(); tp.Len() > 0 {
		var ps []string
		for i := range tp.Len() {
			ps = append(ps, tp.At(i).Obj().Name())
		}
		recv += "[" + strings.Join(ps, ", ") + "]"
	}
	byValue := types.NewMethodSet(named)
	all := types.NewMethodSet(types.NewPointer(named))
	for i := range all.Len() {
		sel := all.At(i)
		m := sel.Obj()
		if !m.Exported() {
			continue
		}
		r := "*" + recv
		if byValue.Lookup(m.Pkg(), m.Name()) != nil {
			r = recv
		}
		lines = append(lines, "method ("+r+") "+m.Name()+w.signature(sel.Type().(*types.Signature)))
	}
	return lines
}

// writer writes types as Go's api files do: the package's own types
// unqualified, others by their package's name, and no parameter names, so
// that renaming a parameter is not a change of the API.
type writer struct {
	pkg *types.Package
}

func (w *writer) qualify(p *types.Package) string {
	if p == nil || p == w.pkg {
		return ""
	}
	return p.Name() + "."
}

func (w *writer) typeParams(tp *types.TypeParamList) string {
	if tp == nil || tp.Len() == 0 {
		return ""
	}
	var ps []string
	for i := range tp.Len() {
		t := tp.At(i)
		ps = append(ps, t.Obj().Name()+" "+w.typ(t.Constraint()))
	}
	return "[" + strings.Join(ps, ", ") + "]"
}

// signature writes a function's parameters and results, without "func".
func (w *writer) signature(sig *types.Signature) string {
	var b strings.Builder
	b.WriteString("(")
	params := sig.Params()
	for i := range params.Len() {
		if i > 0 {
			b.WriteString(", ")
		}
		t := params.At(i).Type()
		if sig.Variadic() && i == params.Len()-1 {
			if s, ok := t.(*types.Slice); ok {
				b.WriteString("..." + w.typ(s.Elem()))
				continue
			}
		}
		b.WriteString(w.typ(t))
	}
	b.WriteString(")")
	res := sig.Results()
	switch res.Len() {
	case 0:
	case 1:
		b.WriteString(" " + w.typ(res.At(0).Type()))
	default:
		b.WriteString(" (")
		for i := range res.Len() {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(w.typ(res.At(i).Type()))
		}
		b.WriteString(")")
	}
	return b.String()
}

func (w *writer) typeArgs(args *types.TypeList) string {
	if args == nil || args.Len() == 0 {
		return ""
	}
	var as []string
	for i := range args.Len() {
		as = append(as, w.typ(args.At(i)))
	}
	return "[" + strings.Join(as, ", ") + "]"
}

func (w *writer) typ(t types.Type) string {
	switch t := t.(type) {
	case *types.Basic:
		if t.Info()&types.IsUntyped != 0 {
			return "ideal-" + strings.TrimPrefix(t.Name(), "untyped ")
		}
		return t.Name()
	case *types.Pointer:
		return "*" + w.typ(t.Elem())
	case *types.Slice:
		return "[]" + w.typ(t.Elem())
	case *types.Array:
		return fmt.Sprintf("[%d]%s", t.Len(), w.typ(t.Elem()))
	case *types.Map:
		return "map[" + w.typ(t.Key()) + "]" + w.typ(t.Elem())
	case *types.Chan:
		switch t.Dir() {
		case types.SendOnly:
			return "chan<- " + w.typ(t.Elem())
		case types.RecvOnly:
			return "<-chan " + w.typ(t.Elem())
		}
		return "chan " + w.typ(t.Elem())
	case *types.Signature:
		return "func" + w.signature(t)
	case *types.Named:
		obj := t.Obj()
		return w.qualify(obj.Pkg()) + obj.Name() + w.typeArgs(t.TypeArgs())
	case *types.Alias:
		obj := t.Obj()
		return w.qualify(obj.Pkg()) + obj.Name() + w.typeArgs(t.TypeArgs())
	case *types.TypeParam:
		return t.Obj().Name()
	case *types.Interface:
		if t.Empty() {
			if t.IsComparable() {
				return "comparable"
			}
			return "interface{}"
		}
		var parts []string
		for i := range t.NumEmbeddeds() {
			parts = append(parts, w.typ(t.EmbeddedType(i)))
		}
		for i := range t.NumExplicitMethods() {
			m := t.ExplicitMethod(i)
			parts = append(parts, m.Name()+w.signature(m.Type().(*types.Signature)))
		}
		return "interface { " + strings.Join(parts, "; ") + " }"
	case *types.Union:
		var terms []string
		for i := range t.Len() {
			term := t.Term(i)
			s := w.typ(term.Type())
			if term.Tilde() {
				s = "~" + s
			}
			terms = append(terms, s)
		}
		return strings.Join(terms, " | ")
	case *types.Struct:
		var fields []string
		for i := range t.NumFields() {
			f := t.Field(i)
			if f.Embedded() {
				fields = append(fields, w.typ(f.Type()))
				continue
			}
			s := f.Name() + " " + w.typ(f.Type())
			if tag := t.Tag(i); tag != "" {
				s += " " + fmt.Sprintf("%q", tag)
			}
			fields = append(fields, s)
		}
		return "struct { " + strings.Join(fields, "; ") + " }"
	}
	return types.TypeString(t, func(p *types.Package) string { return strings.TrimSuffix(w.qualify(p), ".") })
}

// pkgName is the name a package's path gives it: its last element.
func pkgName(importPath string) string {
	return path.Base(importPath)
}
