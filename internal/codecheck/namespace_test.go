package codecheck

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// defaultNamespaceAllowed are the directories whose non-test code may use
// redisstore.Default: the tools that run on a Redis of their own (bench,
// race, the demos' private servers). Everything a deployment runs takes
// its namespace from its configuration.
var defaultNamespaceAllowed = []string{
	"cmd/hongbao/internal/bench",
}

// defaultNamespaceUses lists, as "file:line", where src names
// redisstore.Default or builds a zero redisstore.Namespace.
func defaultNamespaceUses(t *testing.T, fset *token.FileSet, name string, src any) []string {
	t.Helper()
	f, err := parser.ParseFile(fset, name, src, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	ast.Inspect(f, func(n ast.Node) bool {
		var sel *ast.SelectorExpr
		switch n := n.(type) {
		case *ast.SelectorExpr:
			if n.Sel.Name == "Default" {
				sel = n
			}
		case *ast.CompositeLit:
			if s, ok := n.Type.(*ast.SelectorExpr); ok && s.Sel.Name == "Namespace" {
				sel = s
			}
		}
		if sel == nil {
			return true
		}
		if id, ok := sel.X.(*ast.Ident); ok && id.Name == "redisstore" {
			out = append(out, filepath.Base(name)+":"+strconv.Itoa(fset.Position(sel.Pos()).Line))
		}
		return true
	})
	return out
}

// TestNamespaceFromConfig holds the rule that makes two deployments on
// one Redis independent: no code outside internal/redisstore builds keys
// in the default namespace behind its configuration's back. The keys,
// registries, leases and channels of a deployment come from its
// configured namespace (Store.NS), so a forgotten one would read or
// settle another deployment's campaigns.
func TestNamespaceFromConfig(t *testing.T) {
	root := moduleRoot(t)
	fset := token.NewFileSet()
	var bad []string
	files := 0
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel == "deploy" || rel == "internal/redisstore" || strings.HasPrefix(d.Name(), ".") {
				return filepath.SkipDir
			}
			for _, a := range defaultNamespaceAllowed {
				if rel == a {
					return filepath.SkipDir
				}
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		files++
		for _, u := range defaultNamespaceUses(t, fset, p, src) {
			bad = append(bad, filepath.Dir(rel)+"/"+u)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 100 {
		t.Fatalf("found %d files: the check would prove nothing", files)
	}
	sort.Strings(bad)
	for _, b := range bad {
		t.Errorf("%s: keys of the default namespace; take the namespace from the configuration (Store.NS)", b)
	}
}

// TestDefaultNamespaceUsesFinds: the check flags what it is for.
func TestDefaultNamespaceUsesFinds(t *testing.T) {
	src := `package x
func f(s *Store) {
	_ = redisstore.Default.CampaignKeys("a")
	_ = redisstore.Namespace{}.Layout("a", 2)
	_ = s.NS().CampaignKeys("a")
	_ = other.Default
}
`
	got := defaultNamespaceUses(t, token.NewFileSet(), "x.go", src)
	want := []string{"x.go:3", "x.go:4"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("got %v, want %v", got, want)
	}
}
