package luascript_test

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao/internal/luascript"
)

// form is the shape of a header: its fields in order, and where they start.
type form struct {
	order []string       // the fields, in order; the header ends at the last one's first line
	line  *regexp.Regexp // a field's first line; the field's name is the first group
	start int            // the index of the line after the summary's first
}

var (
	// scriptForm is a script's header.
	scriptForm = form{
		order: []string{"KEYS", "ARGV", "Reply", "Errors", "Writes", "Complexity"},
		line:  regexp.MustCompile(`^-- (KEYS|ARGV|Reply|Errors|Writes|Complexity)(?:\[| +\S)`),
		start: 2,
	}
	// libForm is a library file's header.
	libForm = form{
		order: []string{"Defines", "Errors", "Writes"},
		line:  regexp.MustCompile(`^-- (Defines|Errors|Writes) +\S`),
		start: 1,
	}
)

var (
	flagsLine    = regexp.MustCompile(`^#!lua(?: flags=([a-z-]+(?:,[a-z-]+)*))?$`)
	summaryLine  = regexp.MustCompile(`^-- ([A-Za-z0-9_]+\.lua): \S`)
	continuation = regexp.MustCompile(`^-- {2,}\S`)
	hbCode       = regexp.MustCompile(`\bHB[A-Z]+\b`)
	raised       = regexp.MustCompile(`error_reply\(\s*(?:'(HB[A-Z]+)[ ']|"(HB[A-Z]+)[ "])?`)
	docScript    = regexp.MustCompile(`\*\*([A-Za-z0-9_]+\.lua)\*\*`)
	docLib       = regexp.MustCompile(`\*\*lib/([A-Za-z0-9_]+\.lua)\*\*`)
	includes     = regexp.MustCompile(`(?m)^--@include ([A-Za-z0-9_]+\.lua)$`)
	defined      = regexp.MustCompile(`[A-Za-z_]\w*`)
)

// header is the contract a script opens with (see the package doc).
type header struct {
	flags  []string
	fields map[string]string // field -> its text, lines joined
}

// parseHeader reads and checks the header of the script file name; src is
// the script as built, its include lines spliced.
func parseHeader(name, src string) (header, error) {
	lines := strings.Split(src, "\n")
	if len(lines) < 2 {
		return header{}, errors.New("no header")
	}
	m := flagsLine.FindStringSubmatch(lines[0])
	if m == nil {
		return header{}, fmt.Errorf("line 1 is %q, want #!lua, optionally with flags=", lines[0])
	}
	h := header{fields: map[string]string{}}
	if m[1] != "" {
		h.flags = strings.Split(m[1], ",")
	}
	if err := h.parseFields(name, lines, scriptForm); err != nil {
		return header{}, err
	}
	if err := h.checkErrors(src); err != nil {
		return header{}, err
	}
	if h.readOnly() != slices.Contains(h.flags, "no-writes") {
		return header{}, fmt.Errorf("Writes %q and flags %v disagree: a read-only script says Writes none and has flags=no-writes",
			strings.TrimSpace(h.fields["Writes"]), h.flags)
	}
	return h, nil
}

// parseLibHeader reads and checks the header of the library file name:
// src is the file, built is the file as built alone, its includes spliced.
func parseLibHeader(name, src, built string) (header, error) {
	h := header{fields: map[string]string{}}
	if err := h.parseFields(name, strings.Split(src, "\n"), libForm); err != nil {
		return header{}, err
	}
	if err := h.checkErrors(built); err != nil {
		return header{}, err
	}
	// The names Defines gives, without the parameters.
	names := defined.FindAllString(regexp.MustCompile(`\([^)]*\)`).ReplaceAllString(h.fields["Defines"], ""), -1)
	if want := luascript.TopLevel(src); !slices.Equal(names, want) {
		return header{}, fmt.Errorf("Defines names %v, the file defines %v", names, want)
	}
	return h, nil
}

// parseFields reads the summary, which names the file name, and the
// fields of the header of form f, in order, up to the first line of the
// last field.
func (h *header) parseFields(name string, lines []string, f form) error {
	first := f.start - 1
	m := summaryLine.FindStringSubmatch(lines[first])
	if m == nil {
		return fmt.Errorf("line %d is %q, want \"-- %s: what it does\"", first+1, lines[first], name)
	}
	if m[1] != name {
		return fmt.Errorf("line %d names %s, want %s", first+1, m[1], name)
	}
	next, cur := 0, ""
	want := func() string { return f.order[min(next, len(f.order)-1)] }
	for i := f.start; i < len(lines); i++ {
		line := lines[i]
		if fl := f.line.FindStringSubmatch(line); fl != nil {
			switch {
			case fl[1] == cur: // another line of the same field: KEYS[2]
			case next < len(f.order) && fl[1] == f.order[next]:
				cur = fl[1]
				next++
			default:
				return fmt.Errorf("line %d starts %s, want %s", i+1, fl[1], want())
			}
			if next == len(f.order) {
				h.fields[cur] = strings.TrimPrefix(line, "-- "+cur)
				return nil
			}
			h.fields[cur] += strings.TrimPrefix(line, "-- "+cur) + " "
			continue
		}
		switch {
		case cur == "" && strings.HasPrefix(line, "-- "): // more of the summary
		case cur != "" && continuation.MatchString(line):
			h.fields[cur] += strings.TrimPrefix(line, "--") + " "
		default:
			return fmt.Errorf("line %d is %q, want %s", i+1, line, want())
		}
	}
	return fmt.Errorf("header without %s", want())
}

// readOnly reports whether the Writes field says none.
func (h header) readOnly() bool {
	return strings.HasPrefix(strings.TrimSpace(h.fields["Writes"]), "none")
}

// checkErrors compares the Errors field with the codes src raises.
func (h *header) checkErrors(src string) error {
	var documented, found []string
	errText := strings.TrimSpace(h.fields["Errors"])
	if !strings.HasPrefix(errText, "none") {
		documented = hbCode.FindAllString(errText, -1)
		if len(documented) == 0 {
			return fmt.Errorf("Errors %q names no HB code; say none if it raises none", errText)
		}
	}
	for _, m := range raised.FindAllStringSubmatch(src, -1) {
		code := m[1] + m[2]
		if code == "" {
			return errors.New("an error_reply without an HB code as its first word")
		}
		found = append(found, code)
	}
	slices.Sort(documented)
	slices.Sort(found)
	if d, f := slices.Compact(documented), slices.Compact(found); !slices.Equal(d, f) {
		return fmt.Errorf("Errors names %v, the script raises %v", d, f)
	}
	return nil
}

// moduleRoot is the directory of go.mod above the test's directory.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	require.NoError(t, err)
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		require.NotEqual(t, dir, parent, "no go.mod above the test")
		dir = parent
	}
}

// luaFiles are the module's Redis scripts, every */lua/*.lua file (a .lua
// file elsewhere, such as a wrk client script, is not one), and its library
// files, every */lua/lib/*.lua file, each by file name, which must be
// unique among both: the docs name them by it.
type luaFiles struct {
	root          string
	scripts, libs map[string]string // file name -> path from root
}

// findLua walks the module for its Lua files.
func findLua(t *testing.T) luaFiles {
	t.Helper()
	root := moduleRoot(t)
	out := luaFiles{root: root, scripts: map[string]string{}, libs: map[string]string{}}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		dir := filepath.Dir(path)
		set := out.scripts
		switch {
		case filepath.Ext(path) != ".lua":
			return nil
		case filepath.Base(dir) == "lib" && filepath.Base(filepath.Dir(dir)) == "lua":
			set = out.libs
		case filepath.Base(dir) != "lua":
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		prev, ok := out.scripts[d.Name()]
		if !ok {
			prev, ok = out.libs[d.Name()]
		}
		if ok {
			return fmt.Errorf("two Lua files named %s: %s and %s", d.Name(), prev, rel)
		}
		set[d.Name()] = rel
		return nil
	})
	require.NoError(t, err)
	require.Contains(t, out.scripts, "grab.lua", "the walk found the campaign scripts")
	require.Contains(t, out.scripts, "update.lua", "the walk found atomicop's scripts")
	require.Contains(t, out.libs, "meta.lua", "the walk found the campaign scripts' library")
	return out
}

// read returns the file at rel.
func (f luaFiles) read(t *testing.T, rel string) string {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(f.root, rel))
	require.NoError(t, err)
	return string(src)
}

// build returns the Lua file at rel (a script, or a library file) as
// built by the library of its package, lua/lib next to the scripts.
func (f luaFiles) build(t *testing.T, rel string) string {
	t.Helper()
	dir := filepath.Dir(rel)
	if filepath.Base(dir) == "lib" {
		dir = filepath.Dir(dir)
	}
	lib, err := luascript.NewLibrary(os.DirFS(filepath.Join(f.root, dir)), "lib")
	require.NoError(t, err, dir)
	out, err := lib.Build(f.read(t, rel))
	require.NoError(t, err, rel)
	return out
}

// TestScriptHeaders: every Redis script of the module opens with its
// contract in the format of the package doc, which covers what the library
// files it includes raise; a read-only script includes only read-only
// library files.
func TestScriptHeaders(t *testing.T) {
	t.Parallel()
	files := findLua(t)
	libs := libHeaders(t, files)
	for name, rel := range files.scripts {
		h, err := parseHeader(name, files.build(t, rel))
		require.NoError(t, err, rel)
		if h.readOnly() {
			for _, inc := range includes.FindAllStringSubmatch(files.read(t, rel), -1) {
				require.True(t, libs[inc[1]].readOnly(), "%s says Writes none and includes %s, which writes", rel, inc[1])
			}
		}
	}
}

// TestLibraryHeaders: every library file opens with its contract, in the
// format of the package doc; one that writes nothing includes only files
// that write nothing.
func TestLibraryHeaders(t *testing.T) {
	t.Parallel()
	files := findLua(t)
	libs := libHeaders(t, files)
	for name, rel := range files.libs {
		if libs[name].readOnly() {
			for _, inc := range includes.FindAllStringSubmatch(files.read(t, rel), -1) {
				require.True(t, libs[inc[1]].readOnly(), "%s says Writes none and includes %s, which writes", rel, inc[1])
			}
		}
	}
}

// libHeaders reads and checks the headers of the library files.
func libHeaders(t *testing.T, files luaFiles) map[string]header {
	t.Helper()
	out := map[string]header{}
	for name, rel := range files.libs {
		h, err := parseLibHeader(name, files.read(t, rel), files.build(t, rel))
		require.NoError(t, err, rel)
		out[name] = h
	}
	return out
}

// TestScriptsDocumented: docs/scripts.md documents every script, by its
// file name in bold, and every library file, as **lib/<name>.lua**, and
// nothing that does not exist.
func TestScriptsDocumented(t *testing.T) {
	t.Parallel()
	files := findLua(t)
	doc, err := os.ReadFile(filepath.Join(files.root, "docs", "scripts.md"))
	require.NoError(t, err)
	for _, kind := range []struct {
		re    *regexp.Regexp
		files map[string]string
		as    string
	}{{docScript, files.scripts, "**%s**"}, {docLib, files.libs, "**lib/%s**"}} {
		documented := map[string]bool{}
		for _, m := range kind.re.FindAllStringSubmatch(string(doc), -1) {
			documented[m[1]] = true
		}
		for name, rel := range kind.files {
			require.True(t, documented[name], "%s is not documented in docs/scripts.md (as "+kind.as+")", rel, name)
		}
		for name := range documented {
			require.Contains(t, kind.files, name, "docs/scripts.md documents "+kind.as+", which no lua/ directory holds", name)
		}
	}
}

// TestParseHeaderRejects: the checks above can fail.
func TestParseHeaderRejects(t *testing.T) {
	t.Parallel()
	const good = "#!lua\n-- x.lua: do a thing.\n-- KEYS[1] k\n-- ARGV    none\n-- Reply   1\n" +
		"-- Errors  HBX bad\n-- Writes  SET of k\n-- Complexity O(1)\n" +
		"redis.call('SET', KEYS[1], 1)\nif false then return redis.error_reply('HBX bad') end\nreturn 1\n"
	_, err := parseHeader("x.lua", good)
	require.NoError(t, err, "the good header")

	rejects(t, []reject{
		{"no flags line", strings.TrimPrefix(good, "#!lua\n"), "line 1"},
		{"bad flags", strings.Replace(good, "#!lua", "#!lua flags=", 1), "line 1"},
		{"other name", strings.Replace(good, "-- x.lua:", "-- y.lua:", 1), "names y.lua"},
		{"no summary", strings.Replace(good, "-- x.lua: do a thing.", "-- KEYS[0] k", 1), "line 2"},
		{"no KEYS", strings.Replace(good, "-- KEYS[1] k\n", "", 1), "want KEYS"},
		{"no Errors", strings.Replace(good, "-- Errors  HBX bad\n", "", 1), "want Errors"},
		{"no Writes", strings.Replace(good, "-- Writes  SET of k\n", "", 1), "want Writes"},
		{"no Complexity", strings.Replace(good, "-- Complexity O(1)\n", "", 1), "want Complexity"},
		{"out of order", strings.Replace(good, "-- ARGV    none\n-- Reply   1\n", "-- Reply   1\n-- ARGV    none\n", 1), "want ARGV"},
		{"stray line", strings.Replace(good, "-- Reply   1\n", "-- Reply   1\n-- a note\n", 1), "want Errors"},
		{"code not documented", strings.Replace(good, "-- Errors  HBX bad", "-- Errors  none", 1), "raises [HBX]"},
		{"code not raised", strings.Replace(good, "-- Errors  HBX bad", "-- Errors  HBX bad; HBY worse", 1), "names [HBX HBY]"},
		{"no code named", strings.Replace(good, "-- Errors  HBX bad", "-- Errors  bad things", 1), "names no HB code"},
		{"error without code", strings.Replace(good, "error_reply('HBX bad')", "error_reply('bad')", 1), "without an HB code"},
		{"writes none, no flag", strings.Replace(good, "-- Writes  SET of k", "-- Writes  none", 1), "disagree"},
		{"no-writes flag, writes", strings.Replace(good, "#!lua", "#!lua flags=no-writes", 1), "disagree"},
	}, func(src string) error {
		_, err := parseHeader("x.lua", src)
		return err
	})
}

// reject is a header that a check refuses, with what the error says.
type reject struct{ name, src, want string }

// rejects runs each case of tests, in parallel, through parse.
func rejects(t *testing.T, tests []reject, parse func(src string) error) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.ErrorContains(t, parse(tt.src), tt.want)
		})
	}
}

// TestParseLibHeaderRejects: the checks of a library file's header can fail.
func TestParseLibHeaderRejects(t *testing.T) {
	t.Parallel()
	const good = "-- x.lua: help a thing.\n-- Defines  N, f(a, b)\n-- Errors   HBX bad\n-- Writes   none\n" +
		"local N = 1\nlocal function f(a, b)\n  return redis.error_reply('HBX bad')\nend\n"
	_, err := parseLibHeader("x.lua", good, good)
	require.NoError(t, err, "the good header")

	rejects(t, []reject{
		{"other name", strings.Replace(good, "-- x.lua:", "-- y.lua:", 1), "names y.lua"},
		{"no Defines", strings.Replace(good, "-- Defines  N, f(a, b)\n", "", 1), "want Defines"},
		{"no Writes", strings.Replace(good, "-- Writes   none\n", "", 1), "want Writes"},
		{"a name missing", strings.Replace(good, "N, f(a, b)", "f(a, b)", 1), "Defines names [f], the file defines [N f]"},
		{"a name too many", strings.Replace(good, "N, f(a, b)", "N, f(a, b), g()", 1), "the file defines [N f]"},
		{"out of order", strings.Replace(good, "N, f(a, b)", "f(a, b), N", 1), "the file defines [N f]"},
		{"code not documented", strings.Replace(good, "-- Errors   HBX bad", "-- Errors   none", 1), "raises [HBX]"},
	}, func(src string) error {
		_, err := parseLibHeader("x.lua", src, src)
		return err
	})
}
