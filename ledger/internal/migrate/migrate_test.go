package migrate

import (
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"
)

func TestLoad(t *testing.T) {
	t.Parallel()
	file := func(s string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(s)} }
	ms, err := Load(fstest.MapFS{
		"m/0002_more.sql":  file("two"),
		"m/0001_init.sql":  file("one"),
		"m/README.md":      file("ignored"),
		"m/0010_later.sql": file("ten"),
	}, "m")
	require.ErrorContains(t, err, "expected version 3", "a gap is an error")
	require.Nil(t, ms)

	ms, err = Load(fstest.MapFS{"m/0002_more.sql": file("two"), "m/0001_init.sql": file("one"), "m/README.md": file("x")}, "m")
	require.NoError(t, err)
	require.Equal(t, []Migration{{1, "0001_init.sql", "one"}, {2, "0002_more.sql", "two"}}, ms)

	for _, bad := range []string{"m/init.sql", "m/0000_zero.sql", "m/x1_a.sql"} {
		_, err := Load(fstest.MapFS{bad: file("")}, "m")
		require.Error(t, err, bad)
	}
}
