package codecheck

import (
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// generated are the directories buf.gen.yaml writes, from the module's
// root.
var generated = []string{"client/hongbaov1", "clients/ts/src/gen"}

// TestProtoGenerated regenerates the code of proto/ (buf.gen.yaml, as
// make proto does) into a temporary directory and fails on any difference
// from the checked-in code: a file changed, missing or left over. buf and
// protoc-gen-es come from npm, installed on demand (npm ci, pinned by
// proto/package-lock.json); without npm the test skips, and fails under
// CI=true.
func TestProtoGenerated(t *testing.T) {
	if testing.Short() {
		t.Skip("regenerating the protobuf code takes seconds")
	}
	root := moduleRoot(t)
	buf := filepath.Join(root, "proto", "node_modules", ".bin", "buf")
	if npmStale(t, filepath.Join(root, "proto")) {
		if _, err := exec.LookPath("npm"); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatal("npm is not installed; CI must have it to check the generated protobuf code")
			}
			t.Skip("npm is not installed: the generated protobuf code is not checked")
		}
		run(t, filepath.Join(root, "proto"), "npm", "ci", "--no-audit", "--no-fund")
	}
	run(t, root, buf, "lint")
	out := t.TempDir()
	run(t, root, buf, "generate", "--output", out)
	for _, dir := range generated {
		want := readTree(t, filepath.Join(out, dir))
		got := readTree(t, filepath.Join(root, dir))
		require.NotEmpty(t, want, "buf generated nothing into %s", dir)
		for name, b := range want {
			g, ok := got[name]
			require.True(t, ok, "%s/%s is generated but not checked in: run make proto", dir, name)
			require.True(t, bytes.Equal(b, g), "%s/%s differs from what proto/ generates: run make proto", dir, name)
		}
		for name := range got {
			_, ok := want[name]
			require.True(t, ok, "%s/%s is checked in but proto/ no longer generates it: run make proto", dir, name)
		}
	}
}

// npmStale says whether dir's npm packages need an npm ci: not installed,
// or installed before package-lock.json last changed.
func npmStale(t *testing.T, dir string) bool {
	t.Helper()
	lock, err := os.Stat(filepath.Join(dir, "package-lock.json"))
	require.NoError(t, err)
	installed, err := os.Stat(filepath.Join(dir, "node_modules", ".package-lock.json"))
	if err != nil {
		return true
	}
	_, err = os.Stat(filepath.Join(dir, "node_modules", ".bin", "buf"))
	return err != nil || installed.ModTime().Before(lock.ModTime())
}

// run runs a command in dir and fails the test with its output if it
// fails.
func run(t *testing.T, dir, name string, args ...string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	b, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s %v: %s", name, args, b)
}

// readTree reads every file under dir, by its path relative to dir.
func readTree(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		out[filepath.ToSlash(rel)] = b
		return err
	})
	require.NoError(t, err)
	return out
}
