package luascript_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	lua "github.com/yuin/gopher-lua"
	"github.com/yuin/gopher-lua/parse"
)

// redisGlobals are the globals Redis's script sandbox offers (Lua 5.1 with
// the libraries Redis loads), the only ones a script may read; it may
// write none.
var redisGlobals = map[string]bool{
	"redis": true, "KEYS": true, "ARGV": true, "cjson": true, "cmsgpack": true, "bit": true, "struct": true,
	"string": true, "table": true, "math": true, "tonumber": true, "tostring": true, "type": true, "unpack": true,
	"pairs": true, "ipairs": true, "next": true, "select": true, "error": true, "pcall": true, "assert": true,
}

// globals compiles src as Lua 5.1 (gopher-lua) and returns the globals its
// code reads and writes, as "get name" and "set name", in order of the
// bytecode.
func globals(t *testing.T, name, src string) []string {
	t.Helper()
	if strings.HasPrefix(src, "#!") { // the flags line Redis 7 reads; not Lua
		src = src[strings.Index(src, "\n"):]
	}
	chunk, err := parse.Parse(strings.NewReader(src), name)
	require.NoError(t, err, name)
	proto, err := lua.Compile(chunk, name)
	require.NoError(t, err, name)
	var out []string
	var walk func(p *lua.FunctionProto)
	walk = func(p *lua.FunctionProto) {
		for _, inst := range p.Code {
			// gopher-lua's instruction layout: the opcode in the top 6
			// bits, Bx (a constant's index here) in the low 18.
			op, bx := int(inst>>26), int(inst&0x3ffff)
			switch op {
			case lua.OP_GETGLOBAL:
				out = append(out, "get "+p.Constants[bx].String())
			case lua.OP_SETGLOBAL:
				out = append(out, "set "+p.Constants[bx].String())
			}
		}
		for _, c := range p.FunctionPrototypes {
			walk(c)
		}
	}
	walk(proto)
	return out
}

// foreign keeps the global accesses Redis would refuse.
func foreign(accesses []string) []string {
	return slices.DeleteFunc(slices.Clone(accesses), func(a string) bool {
		return strings.HasPrefix(a, "get ") && redisGlobals[strings.TrimPrefix(a, "get ")]
	})
}

// TestBuiltScriptsUseNoGlobals: every script of the module, as built with
// its includes, reads only Redis's globals and writes none. Redis refuses
// any other at run time, possibly after the script's first write; a
// function spliced where the script cannot see it (inside a long comment,
// after its first use) shows here as a global read.
func TestBuiltScriptsUseNoGlobals(t *testing.T) {
	t.Parallel()
	files := findLua(t)
	for name, rel := range files.scripts {
		require.Empty(t, foreign(globals(t, name, files.build(t, rel))), "%s reads or writes globals Redis refuses", rel)
	}
	for name, rel := range files.libs {
		require.Empty(t, foreign(globals(t, name, files.build(t, rel))), "%s reads or writes globals Redis refuses", rel)
	}
}

// TestGlobalsCheckCatches: the check above finds a function a script
// cannot see, and a global written.
func TestGlobalsCheckCatches(t *testing.T) {
	t.Parallel()
	hidden := "local x = 1\n--[[\nlocal function f() return 1 end\n]]\nreturn f() + x\n"
	require.Equal(t, []string{"get f"}, foreign(globals(t, "hidden", hidden)))
	late := "local y = g()\nlocal function g() return 1 end\nreturn y\n"
	require.Equal(t, []string{"get g"}, foreign(globals(t, "late", late)))
	leak := "count = 1\nreturn redis.call('GET', KEYS[1])\n"
	require.Equal(t, []string{"set count"}, foreign(globals(t, "leak", leak)))
}
