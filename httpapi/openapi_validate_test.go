package httpapi_test

import (
	"go/ast"
	"go/parser"
	gotoken "go/token"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao/internal/openapitest"
)

// The document's checks (valid OpenAPI, every reply the tests receive
// against it) are internal/openapitest's; the helpers of these tests run
// them on every reply.

// TestOpenAPIErrorCodes: the error codes of errors.go are the enum of the
// document's Error, so that a code the tests never provoke is documented
// too.
func TestOpenAPIErrorCodes(t *testing.T) {
	t.Parallel()
	f, err := parser.ParseFile(gotoken.NewFileSet(), "errors.go", nil, 0)
	require.NoError(t, err)
	var codes []string
	for _, decl := range f.Decls {
		gd, ok := decl.(*ast.GenDecl)
		if !ok || gd.Tok != gotoken.CONST {
			continue
		}
		for _, spec := range gd.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, name := range vs.Names {
				if !strings.HasPrefix(name.Name, "Code") || i >= len(vs.Values) {
					continue
				}
				lit, ok := vs.Values[i].(*ast.BasicLit)
				require.True(t, ok, "%s is not a literal", name.Name)
				code, err := strconv.Unquote(lit.Value)
				require.NoError(t, err)
				codes = append(codes, code)
			}
		}
	}
	require.NotEmpty(t, codes)
	doc, err := openapitest.Doc()
	require.NoError(t, err)
	var enum []string
	for _, v := range doc.Components.Schemas["Error"].Value.Properties["error"].Value.Properties["code"].Value.Enum {
		enum = append(enum, v.(string))
	}
	require.ElementsMatch(t, codes, enum)
}
