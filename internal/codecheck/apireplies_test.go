package codecheck

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// replyCheckedDirs hold tests that talk HTTP to the service (the
// handler's own tests, the Go client against the API, serve started
// in-process or as a binary): every reply they receive must be checked
// against openapi.json.
var replyCheckedDirs = []string{"httpapi", "cmd/hongbao/internal/cli", "internal/clienttest"}

// uncheckedSenders are net/http's package-level ways to send a request,
// none of which checks its reply.
var uncheckedSenders = map[string]bool{
	"Get": true, "Head": true, "Post": true, "PostForm": true, "DefaultClient": true, "DefaultTransport": true,
}

// TestAPITestsCheckReplies fails when a test in replyCheckedDirs can
// receive a reply of the service that openapitest does not check: a
// package-level send of net/http, an http.Client whose Transport is not
// openapitest.Transport, or a client.Options without an HTTPClient (the
// client's own default), except in a file whose service is wrapped in
// openapitest.Handler, which checks on the server's side. (A handler test
// that calls ServeHTTP with a recorder calls openapitest.Check itself.)
func TestAPITestsCheckReplies(t *testing.T) {
	root := moduleRoot(t)
	files := 0
	for _, dir := range replyCheckedDirs {
		paths, err := filepath.Glob(filepath.Join(root, dir, "*_test.go"))
		require.NoError(t, err)
		for _, path := range paths {
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
			require.NoError(t, err)
			rel, err := filepath.Rel(root, path)
			require.NoError(t, err)
			for _, p := range uncheckedHTTP(fset, rel, f) {
				t.Error(p)
			}
			files++
		}
	}
	require.Greater(t, files, 20, "the check found too few test files to prove anything")
}

// TestAPITestsCheckRepliesCanFail: the rule finds each way around the
// check, and passes the checked ones.
func TestAPITestsCheckRepliesCanFail(t *testing.T) {
	src := `package p

import (
	"net/http"

	"github.com/hongbao/hongbao/client"
	"github.com/hongbao/hongbao/internal/openapitest"
)

func f(t testing.TB, tr http.RoundTripper) {
	http.Get("u")
	_ = http.DefaultClient
	_ = &http.Client{Transport: tr}
	_ = http.Client{}
	_, _ = client.New("u", client.Options{Token: "k"})

	_ = &http.Client{Transport: openapitest.Transport(t, tr)}
	_ = openapitest.Client(t)
	_, _ = client.New("u", client.Options{HTTPClient: openapitest.Client(t)})
	_ = http.StatusOK
}
`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "p_test.go", src, parser.SkipObjectResolution)
	require.NoError(t, err)
	got := uncheckedHTTP(fset, "p_test.go", f)
	require.Len(t, got, 5, "%q", got)
	for i, line := range []int{11, 12, 13, 14, 15} {
		require.Contains(t, got[i], "p_test.go:"+strconv.Itoa(line)+":")
	}
	bench := src + "\nfunc BenchmarkF(b *testing.B) { _ = &http.Client{} }\n"
	f, err = parser.ParseFile(fset, "p_test.go", bench, parser.SkipObjectResolution)
	require.NoError(t, err)
	require.Len(t, uncheckedHTTP(fset, "p_test.go", f), 5, "a benchmark's own client is not held to the rule")
	server := src[:len(src)-2] + "\t_ = openapitest.Handler(nil, nil)\n}\n"
	f, err = parser.ParseFile(fset, "p_test.go", server, parser.SkipObjectResolution)
	require.NoError(t, err)
	require.Len(t, uncheckedHTTP(fset, "p_test.go", f), 4, "the service's replies are checked by Handler: a client.Options of its own passes")
}

// uncheckedHTTP lists, as "file:line: what", the places of f whose
// replies would go unchecked.
func uncheckedHTTP(fset *token.FileSet, name string, f *ast.File) []string {
	httpPkg := importName(f, "net/http")
	clientPkg := importName(f, module+"/client")
	checker := importName(f, module+"/internal/openapitest")
	serverChecked := false
	ast.Inspect(f, func(n ast.Node) bool {
		if c, ok := n.(*ast.CallExpr); ok && isPkgSel(c.Fun, checker, "Handler") {
			serverChecked = true
		}
		return true
	})
	var out []string
	report := func(n ast.Node, what string) {
		out = append(out, fmt.Sprintf("%s:%d: %s", name, fset.Position(n.Pos()).Line, what))
	}
	// A benchmark measures the server and checks nothing: its own client
	// may skip the reply checks, which would spend the cores it measures.
	// Everything else in the file is held to the rule.
	inspect := func(visit func(ast.Node) bool) {
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv == nil && strings.HasPrefix(fd.Name.Name, "Benchmark") {
				continue
			}
			ast.Inspect(d, visit)
		}
	}
	inspect(func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.SelectorExpr:
			if isPkgSel(n, httpPkg, "") && uncheckedSenders[n.Sel.Name] {
				report(n, "http."+n.Sel.Name+" does not check the reply against openapi.json: use openapitest.Client(t)")
			}
		case *ast.CompositeLit:
			switch {
			case isPkgSel(n.Type, httpPkg, "Client"):
				if v := field(n, "Transport"); v == nil || !isCallOf(v, checker, "Transport") {
					report(n, "an http.Client whose Transport is not openapitest.Transport(t, ...)")
				}
			case isPkgSel(n.Type, clientPkg, "Options"):
				if field(n, "HTTPClient") == nil && !serverChecked {
					report(n, "a client.Options without an HTTPClient: give it openapitest.Client(t) or a client over openapitest.Transport")
				}
			}
		}
		return true
	})
	return out
}

// importName is the name f uses for the package path, or "" when f does
// not import it.
func importName(f *ast.File, path string) string {
	for _, imp := range f.Imports {
		if p, _ := strconv.Unquote(imp.Path.Value); p == path {
			if imp.Name != nil {
				return imp.Name.Name
			}
			return filepath.Base(path)
		}
	}
	return ""
}

// isPkgSel says whether e is pkg.sel (any sel when sel is "").
func isPkgSel(e ast.Expr, pkg, sel string) bool {
	s, ok := e.(*ast.SelectorExpr)
	if !ok || pkg == "" {
		return false
	}
	x, ok := s.X.(*ast.Ident)
	return ok && x.Name == pkg && (sel == "" || s.Sel.Name == sel)
}

func isCallOf(e ast.Expr, pkg, fn string) bool {
	c, ok := e.(*ast.CallExpr)
	return ok && isPkgSel(c.Fun, pkg, fn)
}

// field is the value of the keyed field name in a composite literal.
func field(lit *ast.CompositeLit, name string) ast.Expr {
	for _, el := range lit.Elts {
		if kv, ok := el.(*ast.KeyValueExpr); ok {
			if k, ok := kv.Key.(*ast.Ident); ok && k.Name == name {
				return kv.Value
			}
		}
	}
	return nil
}
