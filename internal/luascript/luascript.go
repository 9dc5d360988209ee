// Package luascript holds the one way this module embeds, runs and reads
// the errors of its Redis Lua scripts. Packages with scripts
// (internal/redisstore, atomicop) keep their .lua files and their error
// sentinels; this package builds the scripts, runs them, and turns a
// failed call into one of four kinds of error.
//
// # Embedding
//
// Each script is one file, lua/<name>.lua in the package that runs it,
// embedded into a string with its own directive (//go:embed lua/grab.lua)
// so a missing file fails the build, and built once, at package
// initialisation, with New (or NewLegacy, see below), or with its
// package's Library when it includes library files (see below). A Script
// is safe for concurrent use.
//
// Scripts are built with rueidis.NewLuaScript: EVALSHA, then EVAL when the
// server answers NOSCRIPT. Never with the retryable variant: a write whose
// reply was lost has an unknown outcome, and only the caller, who knows
// whether the script is safe to run twice, may decide to retry it.
//
// # Library files
//
// Scripts share Lua code through library files, lua/lib/<name>.lua next to
// them, each a few local functions (or constants) of one subject. A script
// asks for one with an include line, "--@include <name>.lua" alone on its
// line, placed after the script's header and the locals that name its
// KEYS and ARGV; a library file may include others the same way. The
// package embeds its library (//go:embed lua/lib/*.lua), reads it once with
// MustLibrary, and builds its scripts with the Library's New and NewLegacy,
// which splice each include line's file in its place, text for text, its
// own includes first. Only what a script includes is spliced, so a hot
// script pays for nothing it does not call, and a call to a local
// function costs next to nothing.
//
// The rules, checked when the scripts are built at package initialisation
// (a violation panics: the files are embedded, so it is a fault of the
// build, and every test fails on it):
//
//   - an include names a file of the package's library;
//   - includes do not form a cycle; a file included twice into one script
//     (by two files that both need it) is spliced once;
//   - a name that a library file defines at top level ("local function f",
//     "local NAME =") is defined by no other file of the library, nor at
//     top level by a script that includes it;
//   - an include line starts its line: an indented one (inside a block,
//     where what it defines would be out of scope below it) is an error,
//     and so is any other line starting "--@";
//   - (held by a test of every built script, compiled by gopher-lua) a
//     script reads and writes no global but Redis's own: an include inside
//     a long comment, or a function spliced after its first use, shows as
//     a global read.
//
// A library function takes what it works on as parameters (keys, values,
// the meta it needs), never a script's locals; one that may fail before
// any write returns nil and the error reply, which the script returns. A
// script's error names a line of the script as built (SHA): with includes,
// not the line of its file.
//
// # Legacy servers
//
// Every script opens with a "#!lua" line, so that Redis 7 refuses a write
// script up front when it is out of memory instead of failing at its first
// write, and runs a "flags=no-writes" script on a replica. Servers that
// cannot parse that line (Redis before 7, the in-process emulator of the
// demo) get the scripts from NewLegacy, which replaces the line by a
// comment: the rest of the script keeps its line numbers, so an error
// names the same line on every server.
//
// # Errors
//
// A script reports a real error with redis.error_reply("HB<CODE> message"):
// the code is the first word, upper-case letters after "HB". Business
// outcomes are values in the reply, never errors. Errors.Wrap classifies
// the error of a call:
//
//   - a code the package registered becomes an *Error (code and message)
//     that unwraps to the package's sentinel for that code;
//   - any other Redis error reply (an unregistered code, NOSCRIPT,
//     a Lua runtime error, a refused command) stays a *rueidis.RedisError:
//     the script did not run, or failed before its first write, since
//     every script checks everything it can before writing;
//   - ErrClientClosed, a call that a Guard client refused before sending
//     it because the client was found closed before the call began,
//     stays as it is: nothing ran, and nothing will on that client;
//   - anything else (a broken connection, a timeout, a cancelled context,
//     a client closed while the call was in flight) becomes an
//     *UnknownError: the script may or may not have run.
//
// # Script header
//
// Every script opens with its contract, in this exact order:
//
//	#!lua                                      or: #!lua flags=no-writes
//	-- <name>.lua: <what the script does>      the file's own name
//	-- <more lines of the summary, if needed>
//	-- KEYS[1] meta  KEYS[2] pool              or: -- KEYS    none
//	-- ARGV[1] ...                             or: -- ARGV    none
//	-- Reply   ...
//	-- Errors  HB<CODE> when ...               every code it raises, or: none
//	-- Writes  ...                             what it writes, when; or: none
//	-- Complexity ...
//	-- <notes, free>
//
// Precisely:
//
//   - Line 1 is "#!lua", or "#!lua flags=" and flags separated by commas.
//   - Line 2 is "-- <name>.lua: " and the summary, <name>.lua being the
//     file's own name; further "-- " lines continue the summary.
//   - Then come the fields KEYS, ARGV, Reply, Errors, Writes and
//     Complexity, each at least once, in that order. A field's line starts
//     with "-- " and its name, followed by "[" or by spaces and text. A
//     field may take several lines: more lines starting with the same name
//     (-- KEYS[2] ...), or continuation lines starting with "--" and at
//     least two spaces. No other line may come between the summary and
//     Complexity; after Complexity's first line the comments are free.
//   - Errors names exactly the HB codes the script raises with
//     redis.error_reply, or starts with "none"; every error reply starts
//     with a code.
//   - Writes starts with "none" exactly when the flags include no-writes.
//
// Errors and Writes describe the script as built: the codes its library
// files raise count as its own, and a script with Writes none includes only
// library files that write nothing.
//
// A library file opens with its own contract:
//
//	-- <name>.lua: <what it is for>            the file's own name
//	-- <more lines of the summary, if needed>
//	-- Defines  f(a, b), g(x), NAME            every top-level name it defines, in order
//	-- Errors   HB<CODE> when ...              or: none
//	-- Writes   ...                            or: none
//	-- <notes, free>
//
// with the same rules for fields (Writes is the last; the comments after
// its first line are free), and one comment above each function saying
// what it takes and returns.
//
// The package's tests check every lua/*.lua file of the module against
// this format, every lua/lib/*.lua file against the library's, and that
// docs/scripts.md documents exactly the scripts and library files that
// exist (each by its file name in bold, **grab.lua**, **lib/meta.lua**).
// File names are unique across the module for that reason.
package luascript

import (
	"context"
	"strings"

	"github.com/redis/rueidis"
)

// Script is one Redis Lua script, built once: its text as sent and its
// SHA-1.
type Script struct {
	lua *rueidis.Lua
	src string // as sent
	sha string // of src
}

// SHA is the script's SHA-1, as EVALSHA and the slow log name it.
func (s *Script) SHA() string { return s.sha }

// New builds the script src as written, for Redis 7 and later. A script
// with include lines is built by its package's Library instead; New panics
// on one.
func New(src string) *Script { return noLibrary.New(src) }

// NewLegacy builds src for servers that cannot parse the "#!lua" line
// (Redis before 7, the in-process emulator): the line is replaced by a
// comment, so every other line keeps its number. Such a server may fail a
// script at its first write when it is out of memory, instead of refusing
// it up front. It panics on include lines, as New does.
func NewLegacy(src string) *Script { return noLibrary.NewLegacy(src) }

// built makes the Script of src, spliced and with its flags as sent.
func built(src string) *Script {
	return &Script{lua: rueidis.NewLuaScript(src), src: src, sha: sha(src)}
}

// legacyLine replaces the "#!lua" line in a legacy script.
const legacyLine = "-- (script flags removed for this server)"

// stripFlags replaces a first line that starts with "#!" by a comment.
func stripFlags(src string) string {
	if !strings.HasPrefix(src, "#!") {
		return src
	}
	_, rest, found := strings.Cut(src, "\n")
	if !found {
		return legacyLine
	}
	return legacyLine + "\n" + rest
}

// Exec runs the script on c. It never retries after a lost reply (the
// error then says the outcome is unknown, see Errors.Wrap); it sends the
// script again only after an error reply that says Redis did not run it
// (NotRun: TRYAGAIN during a slot migration, CLUSTERDOWN, LOADING).
func (s *Script) Exec(ctx context.Context, c rueidis.Client, keys, args []string) rueidis.RedisResult {
	r := s.lua.Exec(ctx, c, keys, args)
	for attempt := 0; r.Error() != nil && resend(ctx, r.Error(), attempt); attempt++ {
		r = s.lua.Exec(ctx, c, keys, args)
	}
	return r
}

// ExecMulti runs the script once per exec, pipelined in one round trip,
// and returns one result per exec, in order; an exec that Redis did not
// run (NotRun) is sent again on its own, as Exec does. It loads the script first
// (SCRIPT LOAD), so every call is an EVALSHA.
func (s *Script) ExecMulti(ctx context.Context, c rueidis.Client, execs ...rueidis.LuaExec) []rueidis.RedisResult {
	out := s.lua.ExecMulti(ctx, c, execs...)
	for i, r := range out {
		for attempt := 0; r.Error() != nil && resend(ctx, r.Error(), attempt); attempt++ {
			r = s.lua.Exec(ctx, c, execs[i].Keys, execs[i].Args)
		}
		out[i] = r
	}
	return out
}
