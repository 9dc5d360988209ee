package codecheck

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/internal/redisstore"
)

// words returns the API words (or, with labels, the metric labels) of
// call's outcomes in hongbao.OutcomeTable, in its order.
func words(call hongbao.OutcomeCall, labels bool) []string {
	var out []string
	for _, r := range hongbao.OutcomeTable() {
		if r.Call == call {
			out = append(out, map[bool]string{false: r.Word, true: r.Label}[labels])
		}
	}
	return out
}

// luaCodes reads the codes lib/outcomes.lua defines, by name.
func luaCodes(t *testing.T) map[string]int {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(moduleRoot(t), "internal/redisstore/lua/lib/outcomes.lua"))
	require.NoError(t, err)
	codes := map[string]int{}
	byCode := map[int][]string{}
	for _, m := range regexp.MustCompile(`(?m)^local ([A-Z_]+) = (\d+)$`).FindAllStringSubmatch(string(src), -1) {
		n, err := strconv.Atoi(m[2])
		require.NoError(t, err)
		codes[m[1]] = n
		byCode[n] = append(byCode[n], m[1])
	}
	for code, names := range byCode {
		require.Len(t, names, 1, "outcomes.lua gives code %d two names: one code space, one name a code", code)
	}
	return codes
}

// TestOutcomeCodes holds the outcome codes together: each row of the
// outcome table answers with the code lib/outcomes.lua gives its Lua
// name, and redisstore decodes the scripts' replies with the same codes.
func TestOutcomeCodes(t *testing.T) {
	t.Parallel()
	codes := luaCodes(t)
	seen := map[string]bool{}
	for _, r := range hongbao.OutcomeTable() {
		code, ok := codes[r.Lua]
		require.True(t, ok, "outcome %s names Lua code %s, which lib/outcomes.lua does not define", r.Const, r.Lua)
		require.Equal(t, code, int(r.Code), "outcome %s: lib/outcomes.lua's %s", r.Const, r.Lua)
		require.Less(t, int(r.Code), hongbao.MaxOutcomeCode, r.Const)
		key := string(r.Call) + " " + r.Word
		require.False(t, seen[key], "two %s outcomes are spelled %q", r.Call, r.Word)
		seen[key] = true
		require.Regexp(t, `^[a-z]+(_[a-z]+)*$`, r.Word, "API words are lower case with underscores")
		require.Regexp(t, `^[a-z]+(_[a-z]+)*$`, r.Label)
	}
	// redisstore's constants, by the Lua name of the code they decode.
	for name, consts := range map[string][]int{
		"OK":          {redisstore.Granted, redisstore.DiscountReserved},
		"ALREADY":     {redisstore.Already, redisstore.DiscountAlready},
		"RAN_OUT":     {redisstore.SoldOut, redisstore.DiscountExhausted},
		"NOT_OPEN":    {redisstore.NotOpen, redisstore.DiscountNotOpen},
		"CLOSED":      {redisstore.Closed, redisstore.DiscountClosed},
		"NO_CAMPAIGN": {redisstore.NoCampaign, redisstore.DiscountNoCampaign},
		"DRY":         {redisstore.Dry, redisstore.DiscountDry},
		"LIMIT":       {redisstore.DiscountLimit},
		"CANCELLED":   {redisstore.DiscountCancelled},
		"EXPIRED":     {redisstore.DiscountExpired},
		"NOT_FOUND":   {redisstore.DiscountNotFound},
		"CONFIRMED":   {redisstore.DiscountConfirmed},
		"MISMATCH":    {redisstore.DiscountMismatch},
		"PAUSED":      {redisstore.Paused, redisstore.DiscountPaused},
		"BLOCKED":     {redisstore.Blocked, redisstore.DiscountBlocked},
		"SEALED":      {redisstore.Sealed},
		"LOW":         {0},
	} {
		code, ok := codes[name]
		require.True(t, ok, "lib/outcomes.lua does not define %s", name)
		for _, c := range consts {
			require.Equal(t, code, c, "redisstore's constant for %s", name)
		}
		delete(codes, name)
	}
	// What is left are the codes only the table names: answered through
	// to the caller, never decoded by redisstore.
	for _, r := range hongbao.OutcomeTable() {
		delete(codes, r.Lua)
	}
	require.Empty(t, codes, "codes of lib/outcomes.lua that neither redisstore decodes nor the outcome table names")
}

// TestOutcomeWordsEverywhere fails when a place that spells the outcomes
// of a grab or a reservation lacks one of hongbao.OutcomeTable's words or
// spells one otherwise: the API contract, the Go client, the console and
// the play page and the docs. Each place is read in its scope (a line, a
// block), so a word elsewhere in the file does not count. The dashboard
// and the README list no outcome on purpose: the dashboard's legends are
// the metrics' labels (whose help text package metrics derives from the
// table), the README names hongbao.GrabOutcomes; TestNoOutcomeLists holds
// them so.
func TestOutcomeWordsEverywhere(t *testing.T) {
	t.Parallel()
	root := moduleRoot(t)
	read := func(rel string) string {
		b, err := os.ReadFile(filepath.Join(root, rel))
		require.NoError(t, err)
		return string(b)
	}
	// line is the line of src that holds marker.
	line := func(src, marker string) string {
		i := strings.Index(src, marker)
		require.GreaterOrEqual(t, i, 0, "marker %q", marker)
		start := strings.LastIndex(src[:i], "\n") + 1
		end, _, _ := strings.Cut(src[start:], "\n")
		return end
	}
	// block is src from marker to the first end after it.
	block := func(src, marker, end string) string {
		_, after, ok := strings.Cut(src, marker)
		require.True(t, ok, "marker %q", marker)
		b, _, ok := strings.Cut(after, end)
		require.True(t, ok, "end %q after %q", end, marker)
		return b
	}
	grab, reserve := words(hongbao.CallGrab, false), words(hongbao.CallReserve, false)
	grabLabels := words(hongbao.CallGrab, true)
	play, panels, service := read("httpapi/web/static/play.js"), read("httpapi/web/static/panels.js"), read("docs/service.md")
	for _, c := range []struct {
		where  string
		text   string   // the place's scope
		words  []string // what it must spell
		format string   // how it spells one
	}{
		{"the play page's answers (play.js)", block(play, "switch (g.outcome)", "\n  }\n"), grab, "case '%s':"},
		{"the console's outcome counts (panels.js)", block(panels, "const outcomeLabels = [", "];"), grabLabels, "['%s', "},
		{"docs/service.md's grab route", line(service, "| `POST /v1/campaigns/{id}/grab`"), grab, "`%s`"},
		{"docs/discounts.md's reserve route", line(read("docs/discounts.md"), "| `POST /v1/discounts/{id}/reserve`"), reserve, "`%s`"},
	} {
		for _, w := range c.words {
			want := strings.ReplaceAll(c.format, "%s", w)
			require.Contains(t, c.text, want, "%s lacks the outcome %q (or spells it otherwise)", c.where, w)
		}
	}

	// openapi.json: the enums of the answers, and the live counts.
	var doc struct {
		Components struct {
			Schemas map[string]struct {
				Properties map[string]json.RawMessage `json:"properties"`
			} `json:"schemas"`
		} `json:"components"`
	}
	require.NoError(t, json.Unmarshal([]byte(read("httpapi/openapi.json")), &doc))
	enum := func(schema string) []string {
		var p struct {
			Enum []string `json:"enum"`
		}
		require.NoError(t, json.Unmarshal(doc.Components.Schemas[schema].Properties["outcome"], &p))
		return p.Enum
	}
	require.Equal(t, grab, enum("Grab"), "openapi.json's Grab outcomes")
	require.Equal(t, reserve, enum("Reservation"), "openapi.json's Reservation outcomes")
	var live struct {
		Properties struct {
			Outcomes struct {
				Required []string `json:"required"`
			} `json:"outcomes"`
		} `json:"properties"`
	}
	require.NoError(t, json.Unmarshal(doc.Components.Schemas["LiveView"].Properties["live"], &live))
	for _, w := range grabLabels {
		require.Contains(t, live.Properties.Outcomes.Required, w, "openapi.json's live outcome counts")
	}

	// The client's constants: the grab block is the grab's words; every
	// reserve word is one of its constants.
	blocks := clientConsts(t, filepath.Join(root, "client/types.go"))
	grabBlock := blocks["The outcomes of a grab."]
	require.NotNil(t, grabBlock, "client/types.go has no const block \"The outcomes of a grab.\"")
	require.ElementsMatch(t, grab, grabBlock, "the client's grab outcomes")
	var all []string
	for _, b := range blocks {
		all = append(all, b...)
	}
	for _, w := range reserve {
		require.True(t, slices.Contains(all, w), "the client package has no constant %q (a reserve's outcome)", w)
	}
}

// TestNoOutcomeLists: the places that refer to the outcome table instead
// of listing its words list none of them, so none can fall behind.
func TestNoOutcomeLists(t *testing.T) {
	t.Parallel()
	root := moduleRoot(t)
	for _, rel := range []string{"deploy/grafana/gen/rows.go", "README.md"} {
		b, err := os.ReadFile(filepath.Join(root, rel))
		require.NoError(t, err)
		for _, w := range []string{"already_granted", "sold_out", "not_open"} {
			require.NotContains(t, string(b), w, "%s lists outcomes (%s): refer to hongbao.OutcomeTable or the metric instead", rel, w)
		}
	}
}

// clientConsts reads the string constants of a Go file by the first line
// of their block's doc comment.
func clientConsts(t *testing.T, path string) map[string][]string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ParseComments)
	require.NoError(t, err)
	out := map[string][]string{}
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST || g.Doc == nil {
			continue
		}
		doc, _, _ := strings.Cut(g.Doc.Text(), "\n")
		for _, s := range g.Specs {
			for _, v := range s.(*ast.ValueSpec).Values {
				if lit, ok := v.(*ast.BasicLit); ok && lit.Kind == token.STRING {
					w, err := strconv.Unquote(lit.Value)
					require.NoError(t, err)
					out[doc] = append(out[doc], w)
				}
			}
		}
	}
	return out
}
