package redisstore

import (
	"io/fs"
	"reflect"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestScriptTable holds the script table, the scripts' fields and the
// files of lua/ equal: a script added in one place and not the others
// fails here, and ScriptNames names every script.
func TestScriptTable(t *testing.T) {
	files, err := fs.Glob(srcFiles, "lua/*.lua")
	require.NoError(t, err)
	var want []string
	for _, f := range files {
		want = append(want, f[len("lua/"):])
	}
	s := newScripts(false)
	var got []string
	for _, f := range s.files() {
		got = append(got, f.name)
		require.NotNil(t, *f.sc, f.name)
	}
	slices.Sort(want)
	slices.Sort(got)
	require.Equal(t, want, got, "the script table lists every file of lua/ once")
	require.Equal(t, reflect.TypeFor[scripts]().NumField(), len(s.files()), "every field of scripts has its row")
	fields := map[any]bool{}
	for _, f := range s.files() {
		fields[f.sc] = true
	}
	require.Len(t, fields, len(s.files()), "no field has two rows")
	require.Len(t, ScriptNames(), len(files), "ScriptNames names every script")
}
