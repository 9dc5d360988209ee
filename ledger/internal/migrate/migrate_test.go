package migrate

import (
	"context"
	"regexp"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao/ledger"
)

func TestLoad(t *testing.T) {
	t.Parallel()
	file := func(s string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(s)} }
	ms, err := Load(fstest.MapFS{
		"m/0002_more.sql":  file("two"),
		"m/0001_init.sql":  file("one"),
		"m/README.md":      file("ignored"),
		"m/0010_later.sql": file("ten"),
	}, "m", nil)
	require.ErrorContains(t, err, "expected version 3", "a gap is an error")
	require.Nil(t, ms)

	ms, err = Load(fstest.MapFS{"m/0002_more.sql": file("two"), "m/0001_init.sql": file("one"), "m/README.md": file("x")}, "m", nil)
	require.NoError(t, err)
	require.Equal(t, []Migration{{1, "0001_init.sql", "one", nil}, {2, "0002_more.sql", "two", nil}}, ms)

	for _, bad := range []string{"m/init.sql", "m/0000_zero.sql", "m/x1_a.sql"} {
		_, err := Load(fstest.MapFS{bad: file("")}, "m", nil)
		require.Error(t, err, bad)
	}
}

// TestLoadSteps: a step goes to the migration of its version, and a step
// for a version that has no file is an error, not a step silently never
// run.
func TestLoadSteps(t *testing.T) {
	t.Parallel()
	fsys := fstest.MapFS{"m/0001_a.sql": {Data: []byte("a")}, "m/0002_b.sql": {Data: []byte("b")}}
	var ran []string
	step := func(ctx context.Context, exec Exec) error { return exec(ctx, "step", 7) }
	ms, err := Load(fsys, "m", map[int]Step{2: step})
	require.NoError(t, err)
	require.Nil(t, ms[0].Step)
	require.NotNil(t, ms[1].Step)
	require.NoError(t, ms[1].Step(context.Background(), func(_ context.Context, sql string, args ...any) error {
		ran = append(ran, sql)
		require.Equal(t, []any{7}, args)
		return nil
	}))
	require.Equal(t, []string{"step"}, ran)
	for _, v := range []int{0, 3} {
		_, err := Load(fsys, "m", map[int]Step{v: step})
		require.ErrorContains(t, err, "has no file", v)
	}
}

// TestInsertIdentity: the identity step inserts one well-formed id, a
// new one each time it runs (each ledger draws its own).
func TestInsertIdentity(t *testing.T) {
	t.Parallel()
	well := regexp.MustCompile(`^ledger-[0-9a-f]{32}$`)
	seen := map[string]bool{}
	for range 100 {
		var got []any
		require.NoError(t, InsertIdentity("INSERT ?")(context.Background(), func(_ context.Context, sql string, args ...any) error {
			require.Equal(t, "INSERT ?", sql)
			got = args
			return nil
		}))
		require.Len(t, got, 1)
		id := got[0].(string)
		require.Regexp(t, well, id)
		require.False(t, seen[id], "drawn twice: %s", id)
		seen[id] = true
	}
}

func TestCheck(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		have, want int
		existing   bool
		err        error
		text       string
	}{
		{9, 9, true, nil, ""},
		{9, 9, false, nil, ""},
		{8, 9, false, nil, ""}, // the caller migrates
		{0, 9, false, nil, ""},
		{8, 9, true, ledger.ErrNotMigrated, "schema version 8, this build needs 9"},
		{0, 9, true, ledger.ErrNotMigrated, "no ledger tables"},
		{10, 9, true, ledger.ErrSchemaAhead, "schema version 10, this build knows 9"},
		{10, 9, false, ledger.ErrSchemaAhead, "schema version 10, this build knows 9"},
	} {
		err := Check(tc.have, tc.want, tc.existing)
		if tc.err == nil {
			require.NoError(t, err, "%+v", tc)
			continue
		}
		require.ErrorIs(t, err, tc.err, "%+v", tc)
		require.ErrorContains(t, err, tc.text, "%+v", tc)
		if tc.err == ledger.ErrNotMigrated {
			require.ErrorContains(t, err, "hongbao migrate", "the error says what to do")
		}
	}
}
