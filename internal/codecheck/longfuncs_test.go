package codecheck

import (
	"go/parser"
	"go/token"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestLongFuncsCounts: the check counts from the func line to the closing
// brace, names methods and literals, and passes a function of exactly
// maxLines. A check that cannot fail is no check.
func TestLongFuncsCounts(t *testing.T) {
	body := func(n int) string { return strings.Repeat("\t_ = 0\n", n) }
	src := "package p\n\n" +
		"// Doc comments do not count.\nfunc exact() {\n" + body(maxLines-2) + "}\n\n" +
		"func over() {\n" + body(maxLines-1) + "}\n\n" +
		"type T[P any] struct{}\n\nfunc (t *T[P]) method() {\n" + body(maxLines) + "}\n\n" +
		"func outer() {\n\tf := func() {\n" + body(maxLines-1) + "\t}\n\tf()\n}\n\n" +
		"var v = func() {\n" + body(maxLines) + "}\n"
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "p.go", src, parser.SkipObjectResolution)
	require.NoError(t, err)
	got := longFuncs(fset, f)
	want := map[string]int{
		"over":                        maxLines + 1,
		"T.method":                    maxLines + 2,
		"outer":                       maxLines + 4,
		"outer: func literal at line": maxLines + 1,
		"func literal at line":        maxLines + 2,
	}
	trimmed := map[string]int{}
	for name, n := range got {
		if i := strings.Index(name, " at line "); i >= 0 {
			name = name[:i+len(" at line")]
		}
		trimmed[name] = n
	}
	require.Equal(t, want, trimmed)
}
