package codecheck

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// storeListParams are the names a list of strings may have among the
// parameters of an exported method of *redisstore.Store: lists whose
// every element is one thing the method encodes itself. A script's ARGV
// (or its field, value pairs) is never one of them: the method takes
// typed values and encodes KEYS and ARGV next to the reply's decoding.
var storeListParams = map[string]bool{
	"keys":     true, // a script's KEYS, from the package's own *Keys builders
	"users":    true, // user ids
	"xids":     true, // transfer ids
	"entryIDs": true, // stream entry ids
}

// rawListParams lists, as "Method(name)", the parameters of exported
// methods of *Store in src that are lists of strings not named in
// storeListParams.
func rawListParams(t *testing.T, fset *token.FileSet, name string, src any) []string {
	t.Helper()
	f, err := parser.ParseFile(fset, name, src, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, d := range f.Decls {
		fn, ok := d.(*ast.FuncDecl)
		if !ok || fn.Recv == nil || !fn.Name.IsExported() || !isStorePointer(fn.Recv.List[0].Type) {
			continue
		}
		for _, p := range fn.Type.Params.List {
			if !isStringList(p.Type) {
				continue
			}
			for _, n := range p.Names {
				if !storeListParams[n.Name] {
					out = append(out, fn.Name.Name+"("+n.Name+")")
				}
			}
		}
	}
	return out
}

func isStorePointer(e ast.Expr) bool {
	star, ok := e.(*ast.StarExpr)
	if !ok {
		return false
	}
	id, ok := star.X.(*ast.Ident)
	return ok && id.Name == "Store"
}

// isStringList is true for []string, [][]string and ...string.
func isStringList(e ast.Expr) bool {
	switch e := e.(type) {
	case *ast.ArrayType:
		if e.Len != nil {
			return false
		}
		if id, ok := e.Elt.(*ast.Ident); ok {
			return id.Name == "string"
		}
		return isStringList(e.Elt)
	case *ast.Ellipsis:
		id, ok := e.Elt.(*ast.Ident)
		return ok && id.Name == "string"
	}
	return false
}

// TestStoreTakesTypedScriptArgs holds the rule of internal/redisstore's
// package doc: no exported method of *Store takes a script's arguments as
// raw strings (args, fields, pairs); it takes typed values and encodes
// them itself.
func TestStoreTakesTypedScriptArgs(t *testing.T) {
	dir := filepath.Join(moduleRoot(t), "internal", "redisstore")
	paths, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var bad []string
	files := 0
	for _, p := range paths {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		src, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		files++
		for _, b := range rawListParams(t, fset, p, src) {
			bad = append(bad, filepath.Base(p)+": "+b)
		}
	}
	if files < 10 {
		t.Fatalf("found %d files in %s: the check would prove nothing", files, dir)
	}
	sort.Strings(bad)
	for _, b := range bad {
		t.Errorf("%s: a raw list of script arguments; take typed values and encode KEYS and ARGV in redisstore (or name the list in storeListParams if each element is one thing the method encodes)", b)
	}
}

// TestRawListParamsFinds: the check flags what it is for.
func TestRawListParamsFinds(t *testing.T) {
	src := `package redisstore
func (s *Store) Begin(ctx context.Context, token string, fields []string) {}
func (s *Store) Grab(ctx context.Context, keys, args []string, out []GrabResult) {}
func (s *Store) Dead(ctx context.Context, reason string, pairs ...string) {}
func (s *Store) Stage(ctx context.Context, grants [][]string) {}
func (s *Store) Block(ctx context.Context, users []string) {}
func (s *Store) dead(ctx context.Context, pairs []string) {}
func (s Other) Dead(pairs []string) {}
`
	got := rawListParams(t, token.NewFileSet(), "x.go", src)
	want := []string{"Begin(fields)", "Grab(args)", "Dead(pairs)", "Stage(grants)"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("got %v, want %v", got, want)
	}
}
