package codecheck

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// maxLines is the longest a function may be, from its func line to its
// closing brace, both counted: past that a function does too many things
// to read in one go.
const maxLines = 80

// allowLong names functions allowed over maxLines, as "path: name".
// There are none: keep it that way (the test fails for an entry that is
// short again, so an exception cannot outlive its reason).
var allowLong = map[string]bool{}

// skipDirs are directories whose Go files are not the module's code.
var skipDirs = map[string]bool{
	"testdata":     true, // inputs of tests
	"vendor":       true,
	"bin":          true, // built binaries
	"scratch":      true, // internal/scratch: ignored by git, throwaway code
	"node_modules": true, // npm packages (proto/'s generators), not the module's
}

// TestFunctionLength parses every non-test Go file of the module and fails
// listing each function and function literal longer than maxLines.
func TestFunctionLength(t *testing.T) {
	root := moduleRoot(t)
	long := map[string]int{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && (strings.HasPrefix(d.Name(), ".") || skipDirs[d.Name()] || isModule(path)) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		for name, n := range longFuncs(fset, f) {
			long[filepath.ToSlash(rel)+": "+name] = n
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var problems []string
	for name, n := range long {
		if !allowLong[name] {
			problems = append(problems, fmt.Sprintf("%s is %d lines, more than %d", name, n, maxLines))
		}
	}
	for name := range allowLong {
		if _, ok := long[name]; !ok {
			problems = append(problems, fmt.Sprintf("%s is no longer over %d lines (or is gone): remove it from allowLong", name, maxLines))
		}
	}
	sort.Strings(problems)
	for _, p := range problems {
		t.Error(p)
	}
}

// longFuncs returns the functions and function literals of f longer than
// maxLines, by name, with their lengths. A method is named Type.Method, a
// literal "func literal at line N" (of the enclosing function, when any,
// as "Outer: func literal at line N").
func longFuncs(fset *token.FileSet, f *ast.File) map[string]int {
	out := map[string]int{}
	lines := func(n ast.Node) int { return fset.Position(n.End()).Line - fset.Position(n.Pos()).Line + 1 }
	for _, decl := range f.Decls {
		fd, ok := decl.(*ast.FuncDecl)
		if !ok {
			// Literals in package-level variables.
			ast.Inspect(decl, func(n ast.Node) bool {
				if fl, ok := n.(*ast.FuncLit); ok && lines(fl) > maxLines {
					out[fmt.Sprintf("func literal at line %d", fset.Position(fl.Pos()).Line)] = lines(fl)
				}
				return true
			})
			continue
		}
		name := funcName(fd)
		if n := lines(fd); n > maxLines {
			out[name] = n
		}
		ast.Inspect(fd, func(n ast.Node) bool {
			if fl, ok := n.(*ast.FuncLit); ok && lines(fl) > maxLines {
				out[fmt.Sprintf("%s: func literal at line %d", name, fset.Position(fl.Pos()).Line)] = lines(fl)
			}
			return true
		})
	}
	return out
}

// funcName is Name for a function, Type.Name for a method.
func funcName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	typ := fd.Recv.List[0].Type
	for {
		switch x := typ.(type) {
		case *ast.StarExpr:
			typ = x.X
			continue
		case *ast.IndexExpr: // a generic receiver T[P]
			typ = x.X
			continue
		case *ast.IndexListExpr: // T[P, Q]
			typ = x.X
			continue
		case *ast.Ident:
			return x.Name + "." + fd.Name.Name
		}
		return fd.Name.Name
	}
}

// moduleRoot finds the directory of go.mod above the test's directory.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for !isModule(dir) {
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
	return dir
}

// isModule reports whether dir holds a go.mod: the root, or a nested
// module whose files are not this module's.
func isModule(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, "go.mod"))
	return err == nil
}
