// Package migrate reads numbered schema migrations from an embedded
// directory. Applying them is the backend's job, because each database
// serialises concurrent starts its own way (an advisory lock in
// PostgreSQL, a BEGIN IMMEDIATE transaction in SQLite).
package migrate

import (
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
)

// Migration is one schema step. Versions start at 1 and have no gaps, so a
// database at version n has applied exactly the first n files.
type Migration struct {
	Version int
	Name    string
	SQL     string
}

// Load reads dir/NNNN_name.sql from fsys in version order.
func Load(fsys fs.FS, dir string) ([]Migration, error) {
	ents, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("ledger: read migrations: %w", err)
	}
	var ms []Migration
	for _, e := range ents {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".sql") {
			continue
		}
		num, _, ok := strings.Cut(name, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("ledger: migration %q: name must be NNNN_name.sql", name)
		}
		body, err := fs.ReadFile(fsys, path.Join(dir, name))
		if err != nil {
			return nil, fmt.Errorf("ledger: read migration %q: %w", name, err)
		}
		ms = append(ms, Migration{Version: v, Name: name, SQL: string(body)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].Version < ms[j].Version })
	for i, m := range ms {
		if m.Version != i+1 {
			return nil, fmt.Errorf("ledger: migration %q: expected version %d", m.Name, i+1)
		}
	}
	return ms, nil
}
