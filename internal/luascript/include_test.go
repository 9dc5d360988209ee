package luascript_test

import (
	"context"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao/internal/luascript"
	"github.com/hongbao/hongbao/internal/testenv"
)

// libFS is a library of three files: twice.lua includes add.lua, and so
// does half.lua.
func libFS(extra map[string]string) fstest.MapFS {
	fsys := fstest.MapFS{
		"lib/add.lua":   {Data: []byte("-- add.lua: sums.\nlocal function add(a, b)\n  return a + b\nend\n")},
		"lib/twice.lua": {Data: []byte("-- twice.lua: doubles.\n--@include add.lua\nlocal function twice(a)\n  return add(a, a)\nend\n")},
		"lib/half.lua":  {Data: []byte("-- half.lua: halves.\n--@include add.lua\nlocal HALF = 0.5\nlocal function half(a)\n  return add(a * HALF, 0)\nend\n")},
	}
	for name, src := range extra {
		fsys["lib/"+name] = &fstest.MapFile{Data: []byte(src)}
	}
	return fsys
}

// script is a script that includes what it is given.
func script(includes ...string) string {
	src := "#!lua\n-- s.lua: test.\nlocal x = tonumber(ARGV[1])\n"
	for _, inc := range includes {
		src += "--@include " + inc + "\n"
	}
	return src + "return x\n"
}

// TestLibraryBuild: an include line is replaced by the file it names, whose
// own includes are spliced before it; a file spliced once is not spliced
// again; a script without includes is left as it is.
func TestLibraryBuild(t *testing.T) {
	t.Parallel()
	lib, err := luascript.NewLibrary(libFS(nil), "lib")
	require.NoError(t, err)
	got, err := lib.Build(script("twice.lua", "half.lua"))
	require.NoError(t, err)
	require.Equal(t, "#!lua\n-- s.lua: test.\nlocal x = tonumber(ARGV[1])\n"+
		"-- twice.lua: doubles.\n"+
		"-- add.lua: sums.\nlocal function add(a, b)\n  return a + b\nend\n"+
		"local function twice(a)\n  return add(a, a)\nend\n"+
		"-- half.lua: halves.\nlocal HALF = 0.5\nlocal function half(a)\n  return add(a * HALF, 0)\nend\n"+
		"return x\n", got)

	plain := script()
	got, err = lib.Build(plain)
	require.NoError(t, err)
	require.Equal(t, plain, got)
	require.Equal(t, luascript.New(plain).SHA(), lib.New(plain).SHA(), "no includes, the same script")
}

// TestLibraryRejects: an unknown file, a cycle, a name defined twice and a
// misspelt include line are errors, when the library is read or when a
// script is built; a script with includes built without its library
// panics.
func TestLibraryRejects(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name  string
		extra map[string]string
		want  string
	}{
		{"unknown", map[string]string{"a.lua": "--@include nope.lua\n"}, "includes nope.lua, which the library does not hold"},
		{"self", map[string]string{"a.lua": "--@include a.lua\n"}, "include cycle: a.lua -> a.lua"},
		{"cycle", map[string]string{"a.lua": "--@include b.lua\n", "b.lua": "--@include a.lua\n"}, "include cycle: a.lua -> b.lua -> a.lua"},
		{"defined twice", map[string]string{"a.lua": "local function add(a)\nend\n"}, "both define add"},
		{"name list", map[string]string{"a.lua": "local y, HALF = 1, 2\n"}, "both define HALF"},
		{"misspelt", map[string]string{"a.lua": "--@inlcude add.lua\n"}, "is not an include line"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := luascript.NewLibrary(libFS(tt.extra), "lib")
			require.ErrorContains(t, err, tt.want)
			require.PanicsWithError(t, err.Error(), func() { luascript.MustLibrary(libFS(tt.extra), "lib") })
		})
	}

	lib := luascript.MustLibrary(libFS(nil), "lib")
	for _, tt := range []struct{ name, src, want string }{
		{"unknown", script("nope.lua"), "s.lua: s.lua line 4: includes nope.lua, which the library does not hold"},
		{"redefines", strings.Replace(script("twice.lua"), "return x", "local function add()\nend\nreturn x", 1),
			"s.lua: defines add, which it includes from add.lua"},
		{"misspelt", strings.Replace(script(), "return x", "--@include: add.lua\nreturn x", 1), "is not an include line"},
		{"indented", strings.Replace(script(), "return x", "if x then\n  --@include add.lua\nend\nreturn x", 1),
			"s.lua line 5: an include line starts the line, at the top level"},
	} {
		_, err := lib.Build(tt.src)
		require.ErrorContains(t, err, tt.want, tt.name)
		require.Panics(t, func() { lib.New(tt.src) }, tt.name)
		require.Panics(t, func() { lib.NewLegacy(tt.src) }, tt.name)
	}
	require.PanicsWithError(t, "luascript: s.lua: s.lua line 4: includes add.lua, which the library does not hold",
		func() { luascript.New(script("add.lua")) })
	require.Panics(t, func() { luascript.NewLegacy(script("add.lua")) })
}

// TestLibraryRun: a built script runs on Redis with the functions it
// includes, as written and for legacy servers.
func TestLibraryRun(t *testing.T) {
	t.Parallel()
	r := testenv.SharedRedis(t)
	lib := luascript.MustLibrary(libFS(nil), "lib")
	src := strings.Replace(script("twice.lua", "half.lua"), "return x", "return twice(x) + half(x)", 1)
	for _, s := range []*luascript.Script{lib.New(src), lib.NewLegacy(src)} {
		n, err := s.Exec(context.Background(), r.Client, nil, []string{"4"}).AsInt64()
		require.NoError(t, err)
		require.EqualValues(t, 10, n)
	}
}
