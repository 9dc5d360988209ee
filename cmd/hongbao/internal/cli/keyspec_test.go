package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestKeySpec: a key file's value "[kid=]PATH" is read whichever of its
// parts holds "=": a padded base64 kid, a path with "=" in a name, both;
// one that reads two ways, or names no file, or has an empty or
// unprintable kid, is refused with an error that says why.
func TestKeySpec(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	touch := func(name string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o700))
		require.NoError(t, os.WriteFile(p, []byte("x"), 0o600))
		return p
	}
	plain := touch("receipt.key")
	eqName := touch("v=2/receipt.key")

	for _, tc := range []struct {
		name, spec, kid, path string
	}{
		{"a path", plain, "", plain},
		{"kid and path", "k1=" + plain, "k1", plain},
		{"a padded base64 kid", "YWJjZA==" + "=" + plain, "YWJjZA==", plain},
		{"a path with = in a directory name", eqName, "", eqName},
		{"a kid with = and a path with =", "x==" + "=" + eqName, "x==", eqName},
		{"a kid of = signs before a path", "k=" + plain, "k", plain},
	} {
		kid, path, err := keySpec("receipt-key-file", tc.spec)
		require.NoError(t, err, tc.name)
		require.Equal(t, tc.kid, kid, tc.name)
		require.Equal(t, tc.path, path, tc.name)
	}

	for _, tc := range []struct {
		name, spec, msg string
	}{
		{"empty", "", "empty; want [kid=]PATH"},
		{"no such file", filepath.Join(dir, "none"), "no such file"},
		{"no such file either way", "k=" + filepath.Join(dir, "none"), "none of k=" + filepath.Join(dir, "none") + ", " + filepath.Join(dir, "none") + " exists"},
		{"an empty kid", "=" + plain, "an empty kid before"},
		{"a kid with a space", "my key=" + plain, "holds a space"},
		{"a kid too long", strings.Repeat("k", 129) + "=" + plain, "at most 128"},
	} {
		_, _, err := keySpec("receipt-key-file", tc.spec)
		require.Error(t, err, tc.name)
		require.Contains(t, err.Error(), tc.msg, tc.name)
		require.Contains(t, err.Error(), "--receipt-key-file", tc.name)
	}

	// Two readings that both name a file: the whole value, and the kid
	// "<dir>/k" of the file <dir>/f.
	f := touch("f")
	amb := dir + "/k=" + f
	require.NoError(t, os.MkdirAll(filepath.Dir(amb), 0o700))
	require.NoError(t, os.WriteFile(amb, []byte("x"), 0o600))
	_, _, err := keySpec("receipt-key-file", amb)
	require.ErrorContains(t, err, "ambiguous")
	require.ErrorContains(t, err, "the file "+amb+" without a kid, or kid \""+dir+"/k\" and the file "+f)
	require.ErrorContains(t, err, "rename the file")
}
