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
)

// fieldOrder is the order of the contract fields after a script's summary.
var fieldOrder = []string{"KEYS", "ARGV", "Reply", "Errors", "Writes", "Complexity"}

var (
	flagsLine    = regexp.MustCompile(`^#!lua(?: flags=([a-z-]+(?:,[a-z-]+)*))?$`)
	summaryLine  = regexp.MustCompile(`^-- ([A-Za-z0-9_]+\.lua): \S`)
	fieldLine    = regexp.MustCompile(`^-- (KEYS|ARGV|Reply|Errors|Writes|Complexity)(?:\[| +\S)`)
	continuation = regexp.MustCompile(`^-- {2,}\S`)
	hbCode       = regexp.MustCompile(`\bHB[A-Z]+\b`)
	raised       = regexp.MustCompile(`error_reply\(\s*(?:'(HB[A-Z]+)[ ']|"(HB[A-Z]+)[ "])?`)
	docScript    = regexp.MustCompile(`\*\*([A-Za-z0-9_]+\.lua)\*\*`)
)

// header is the contract a script opens with (see the package doc).
type header struct {
	flags  []string
	fields map[string]string // field -> its text, lines joined
}

// parseHeader reads and checks the header of the script file name.
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
	m = summaryLine.FindStringSubmatch(lines[1])
	if m == nil {
		return header{}, fmt.Errorf("line 2 is %q, want \"-- %s: what it does\"", lines[1], name)
	}
	if m[1] != name {
		return header{}, fmt.Errorf("line 2 names %s, want %s", m[1], name)
	}
	if err := h.parseFields(lines); err != nil {
		return header{}, err
	}
	return h, h.check(src)
}

// parseFields reads the summary's further lines and the fields, in order,
// up to the first line of Complexity.
func (h *header) parseFields(lines []string) error {
	next, cur := 0, ""
	for i := 2; i < len(lines); i++ {
		line := lines[i]
		if f := fieldLine.FindStringSubmatch(line); f != nil {
			switch {
			case f[1] == cur: // another line of the same field: KEYS[2]
			case next < len(fieldOrder) && f[1] == fieldOrder[next]:
				cur = f[1]
				next++
			default:
				return fmt.Errorf("line %d starts %s, want %s", i+1, f[1], fieldOrder[min(next, len(fieldOrder)-1)])
			}
			if cur == "Complexity" {
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
			return fmt.Errorf("line %d is %q, want %s", i+1, line, fieldOrder[min(next, len(fieldOrder)-1)])
		}
	}
	return fmt.Errorf("header without %s", fieldOrder[min(next, len(fieldOrder)-1)])
}

// check compares the Errors and Writes fields with the script.
func (h *header) check(src string) error {
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
	readOnly := strings.HasPrefix(strings.TrimSpace(h.fields["Writes"]), "none")
	if readOnly != slices.Contains(h.flags, "no-writes") {
		return fmt.Errorf("Writes %q and flags %v disagree: a read-only script says Writes none and has flags=no-writes",
			strings.TrimSpace(h.fields["Writes"]), h.flags)
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

// redisScripts returns the module's Redis scripts, every */lua/*.lua file
// (a .lua file elsewhere, such as a wrk client script, is not one), by
// file name, which must be unique: the docs name scripts by it.
func redisScripts(t *testing.T) map[string]string {
	t.Helper()
	root := moduleRoot(t)
	out := map[string]string{}
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
		if filepath.Ext(path) != ".lua" || filepath.Base(filepath.Dir(path)) != "lua" {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		if prev, ok := out[d.Name()]; ok {
			return fmt.Errorf("two scripts named %s: %s and %s", d.Name(), prev, rel)
		}
		out[d.Name()] = rel
		return nil
	})
	require.NoError(t, err)
	require.Contains(t, out, "grab.lua", "the walk found the campaign scripts")
	require.Contains(t, out, "update.lua", "the walk found atomicop's scripts")
	return out
}

// TestScriptHeaders: every Redis script of the module opens with its
// contract in the format of the package doc.
func TestScriptHeaders(t *testing.T) {
	t.Parallel()
	root := moduleRoot(t)
	for name, rel := range redisScripts(t) {
		src, err := os.ReadFile(filepath.Join(root, rel))
		require.NoError(t, err)
		_, err = parseHeader(name, string(src))
		require.NoError(t, err, rel)
	}
}

// TestScriptsDocumented: docs/scripts.md documents every script, by its
// file name in bold, and no script that does not exist.
func TestScriptsDocumented(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile(filepath.Join(moduleRoot(t), "docs", "scripts.md"))
	require.NoError(t, err)
	documented := map[string]bool{}
	for _, m := range docScript.FindAllStringSubmatch(string(doc), -1) {
		documented[m[1]] = true
	}
	scripts := redisScripts(t)
	for name, rel := range scripts {
		require.True(t, documented[name], "%s is not documented in docs/scripts.md (as **%s**)", rel, name)
	}
	for name := range documented {
		require.Contains(t, scripts, name, "docs/scripts.md documents %s, which no lua/ directory holds", name)
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

	tests := []struct {
		name, src, want string
	}{
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
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := parseHeader("x.lua", tt.src)
			require.ErrorContains(t, err, tt.want)
		})
	}
}
