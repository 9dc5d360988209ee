package cli

import (
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDocsFlagTables: the table of serve's flags (docs/service.md) and
// the table of settle's (docs/operations.md) name every flag the command
// has and none it lacks; serve's table opens with --wait-replicas, the flag
// a deployment with replicas must not miss (without it a failover loses
// acknowledged grants).
func TestDocsFlagTables(t *testing.T) {
	t.Parallel()
	all := collectCommandFlags()
	for _, c := range []struct{ cmd, doc, first string }{
		{"serve", "service.md", "wait-replicas"},
		{"settle", "operations.md", ""},
	} {
		b, err := os.ReadFile(filepath.Join("..", "..", "..", "..", "docs", c.doc))
		require.NoError(t, err)
		rows := flagTable(string(b), c.cmd)
		require.NotEmpty(t, rows, "docs/%s has no table headed | `%s` flag |", c.doc, c.cmd)
		missing, stale := tableDiff(all[c.cmd][0], rows)
		require.Empty(t, missing, "flags of %s missing from the table in docs/%s", c.cmd, c.doc)
		require.Empty(t, stale, "docs/%s lists flags %s does not have", c.doc, c.cmd)
		if c.first != "" {
			require.Equal(t, c.first, rows[0], "the first row of %s's table in docs/%s", c.cmd, c.doc)
		}
	}
}

// TestDocsFlagTablesCatch: a table without a flag's row, or with a row of
// a flag that does not exist, is caught.
func TestDocsFlagTablesCatch(t *testing.T) {
	t.Parallel()
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.String("redis", "", "")
	fs.Bool("drain", false, "")
	doc := "| `x` flag | default | |\n|---|---|---|\n| `--redis URL`, `--lease N` | none | x |\n\nafter\n| `--drain` | | not in the table |\n"
	rows := flagTable(doc, "x")
	require.Equal(t, []string{"redis", "lease"}, rows)
	missing, stale := tableDiff(fs, rows)
	require.Equal(t, []string{"drain"}, missing)
	require.Equal(t, []string{"lease"}, stale)
}

// flagTable returns the flags the first cell of each row names, in order,
// in the table of text headed "| `cmd` flag |".
func flagTable(text, cmd string) []string {
	var rows []string
	in := false
	for _, line := range strings.Split(text, "\n") {
		switch {
		case strings.HasPrefix(line, "| `"+cmd+"` flag |"):
			in = true
		case in && strings.HasPrefix(line, "|---"):
		case in && strings.HasPrefix(line, "|"):
			cell := strings.SplitN(line, "|", 3)[1]
			for _, m := range regexp.MustCompile("`--([a-z0-9-]+)").FindAllStringSubmatch(cell, -1) {
				rows = append(rows, m[1])
			}
		default:
			in = false
		}
	}
	return rows
}

// tableDiff returns the flags of fs the table rows lack, and the rows
// that name no flag of fs.
func tableDiff(fs *flag.FlagSet, rows []string) (missing, stale []string) {
	listed := map[string]bool{}
	for _, r := range rows {
		listed[r] = true
		if fs.Lookup(r) == nil {
			stale = append(stale, r)
		}
	}
	fs.VisitAll(func(f *flag.Flag) {
		if !listed[f.Name] {
			missing = append(missing, f.Name)
		}
	})
	return missing, stale
}
