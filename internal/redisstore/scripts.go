// Package redisstore keeps campaigns in Redis: the key layout, the Lua
// scripts and the Go calls that run them. Every decision about money is one
// script; this package turns their replies into Go values.
//
// Each script's Go call takes typed values (never raw ARGV strings) and
// encodes its KEYS and ARGV in the file that decodes its reply.
package redisstore

import (
	"embed"
	"errors"

	"github.com/hongbao/hongbao/internal/luascript"
)

var (
	// Every script's source, one file each (scriptFiles names them).
	//go:embed lua/*.lua
	srcFiles embed.FS

	// The Lua the scripts include (see luascript.Library).
	//go:embed lua/lib/*.lua
	libFiles embed.FS
	lib      = luascript.MustLibrary(libFiles, "lua/lib")
)

// scripts is one set of the campaign scripts, built by luascript (which
// never retries a write on a connection error: a write whose reply was lost
// has an unknown outcome, which only the caller may resolve by retrying;
// grab is idempotent per user). A new script is a file in lua/, a field
// here and its row in files; a test holds the rows and the files equal.
type scripts struct {
	begin, load, activate, grab, status, close, dead, settle, redrive                             *luascript.Script
	xferTake, xferApply                                                                           *luascript.Script
	rebuildFreeze, rebuildSwap, rebuildActivate                                                   *luascript.Script
	blockPeek, blockOpen                                                                          *luascript.Script
	pause, pauseGen, block, owner, renew                                                          *luascript.Script
	discountBegin, discountReserve, discountConfirm, discountCancel, discountReap, discountSettle *luascript.Script
}

// scriptFile is one row of the script table: a file of lua/ and the field
// of scripts that runs it.
type scriptFile struct {
	name string
	sc   **luascript.Script
}

// files is the script table: every script's file and field.
func (s *scripts) files() []scriptFile {
	return []scriptFile{
		{"begin.lua", &s.begin}, {"load.lua", &s.load}, {"activate.lua", &s.activate}, {"grab.lua", &s.grab},
		{"status.lua", &s.status}, {"close.lua", &s.close}, {"dead.lua", &s.dead}, {"settle.lua", &s.settle},
		{"redrive.lua", &s.redrive}, {"xfer_take.lua", &s.xferTake}, {"xfer_apply.lua", &s.xferApply},
		{"rebuild_freeze.lua", &s.rebuildFreeze}, {"rebuild_swap.lua", &s.rebuildSwap}, {"rebuild_activate.lua", &s.rebuildActivate},
		{"block_peek.lua", &s.blockPeek}, {"block_open.lua", &s.blockOpen},
		{"pause.lua", &s.pause}, {"pause_gen.lua", &s.pauseGen}, {"block.lua", &s.block}, {"owner.lua", &s.owner}, {"renew.lua", &s.renew},
		// The discount campaigns' own scripts (discount.go).
		{"disc_begin.lua", &s.discountBegin}, {"disc_reserve.lua", &s.discountReserve}, {"disc_confirm.lua", &s.discountConfirm},
		{"disc_cancel.lua", &s.discountCancel}, {"disc_reap.lua", &s.discountReap}, {"disc_settle.lua", &s.discountSettle},
	}
}

func newScripts(legacy bool) *scripts {
	mk := lib.New
	if legacy {
		mk = lib.NewLegacy
	}
	s := &scripts{}
	for _, f := range s.files() {
		src, err := srcFiles.ReadFile("lua/" + f.name)
		if err != nil {
			panic("redisstore: script " + f.name + ": " + err.Error())
		}
		*f.sc = mk(string(src))
	}
	return s
}

// ScriptNames maps the SHA-1 of every campaign script, as sent to Redis 7,
// to its file name (for benchmarks reading the slow log).
func ScriptNames() map[string]string {
	out := map[string]string{}
	for _, f := range modernScripts.files() {
		out[(*f.sc).SHA()] = f.name
	}
	return out
}

var (
	modernScripts = newScripts(false)
	legacyScripts = newScripts(true)
)

// Error codes the scripts raise with redis.error_reply, as the first word
// of the message.
var (
	ErrNoCampaign = errors.New("no such campaign")
	ErrStale      = errors.New("load superseded by another loader")
	ErrContents   = errors.New("staged pool differs from the spec")
	ErrWindow     = errors.New("bad open window")
	ErrCorrupt    = errors.New("corrupt campaign data")
	ErrArgs       = errors.New("bad script arguments")
	ErrState      = errors.New("campaign is not in the state this needs")
	ErrShards     = errors.New("campaign has another shard count")
	// ErrTransferConflict: a shard applied a transfer of this id before,
	// with other packets. An id is drawn at random for each transfer, so
	// this is a fault to look into, never a repeat to skip.
	ErrTransferConflict = errors.New("transfer id applied before with other packets")
	// ErrTransferStale: a transfer taken before a rebuild of the campaign
	// (another ledger fence than the destination's): the rebuild placed
	// its packets and deleted its record, so it is never applied.
	ErrTransferStale = errors.New("transfer taken before a rebuild")
)

var scriptErrors = luascript.Errors{Codes: map[string]error{
	"HBNOCAMPAIGN": ErrNoCampaign,
	"HBSTALE":      ErrStale,
	"HBOFFSET":     ErrStale,
	"HBCOUNT":      ErrContents,
	"HBSUM":        ErrContents,
	"HBAMOUNT":     ErrContents,
	"HBWINDOW":     ErrWindow,
	"HBCORRUPT":    ErrCorrupt,
	"HBBATCH":      ErrArgs,
	"HBARGS":       ErrArgs,
	"HBSTATE":      ErrState,
	"HBSHARDS":     ErrShards,
	"HBXCONFLICT":  ErrTransferConflict,
	"HBXSTALE":     ErrTransferStale,
}}

// ScriptError is an error reply of one of our scripts, with its HB code and
// message; it unwraps to one of the sentinels above.
type ScriptError = luascript.Error

// ErrClientClosed: the store's Redis client was found closed before the
// call began, and the call was never sent. It is permanent: a closed
// client stays closed.
var ErrClientClosed = luascript.ErrClientClosed

// UnknownError is a failure after which a write may or may not have
// happened: the connection broke, or the reply did not arrive in time.
type UnknownError = luascript.UnknownError

// NotRun reports whether err says that Redis did not run the command and
// that sending it again later may succeed: TRYAGAIN (a slot of the key is
// migrating between cluster nodes), CLUSTERDOWN, LOADING. The scripts are
// sent again on these already; an error that still says so came after
// every resend.
func NotRun(err error) bool { return luascript.NotRun(err) }

// resultError classifies the error of a script call: our own error codes
// become *ScriptError, other Redis error replies (the script did not run, or
// failed before writing) stay as they are, and anything else (network,
// timeout, cancellation) is an *UnknownError.
func resultError(op string, err error) error { return scriptErrors.Wrap(op, err) }
