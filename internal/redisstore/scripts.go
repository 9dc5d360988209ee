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
	//go:embed lua/begin.lua
	beginSrc string
	//go:embed lua/load.lua
	loadSrc string
	//go:embed lua/activate.lua
	activateSrc string
	//go:embed lua/grab.lua
	grabSrc string
	//go:embed lua/status.lua
	statusSrc string
	//go:embed lua/close.lua
	closeSrc string
	//go:embed lua/dead.lua
	deadSrc string
	//go:embed lua/settle.lua
	settleSrc string
	//go:embed lua/redrive.lua
	redriveSrc string
	//go:embed lua/xfer_take.lua
	xferTakeSrc string
	//go:embed lua/xfer_apply.lua
	xferApplySrc string
	//go:embed lua/rebuild_freeze.lua
	rebuildFreezeSrc string
	//go:embed lua/rebuild_swap.lua
	rebuildSwapSrc string
	//go:embed lua/rebuild_activate.lua
	rebuildActivateSrc string
	//go:embed lua/block_peek.lua
	blockPeekSrc string
	//go:embed lua/block_open.lua
	blockOpenSrc string
	//go:embed lua/pause.lua
	pauseSrc string
	//go:embed lua/pause_gen.lua
	pauseGenSrc string
	//go:embed lua/block.lua
	blockSrc string
	//go:embed lua/owner.lua
	ownerSrc string
	//go:embed lua/renew.lua
	renewSrc string

	// The discount campaigns' own scripts (discount.go).
	//go:embed lua/disc_begin.lua
	discountBeginSrc string
	//go:embed lua/disc_reserve.lua
	discountReserveSrc string
	//go:embed lua/disc_confirm.lua
	discountConfirmSrc string
	//go:embed lua/disc_cancel.lua
	discountCancelSrc string
	//go:embed lua/disc_reap.lua
	discountReapSrc string
	//go:embed lua/disc_settle.lua
	discountSettleSrc string

	// The Lua the scripts include (see luascript.Library).
	//go:embed lua/lib/*.lua
	libFiles embed.FS
	lib      = luascript.MustLibrary(libFiles, "lua/lib")
)

// scripts is one set of the campaign scripts, built by luascript (which
// never retries a write on a connection error: a write whose reply was lost
// has an unknown outcome, which only the caller may resolve by retrying;
// grab is idempotent per user).
type scripts struct {
	begin, load, activate, grab, status, close, dead, settle, redrive                             *luascript.Script
	xferTake, xferApply                                                                           *luascript.Script
	rebuildFreeze, rebuildSwap, rebuildActivate                                                   *luascript.Script
	blockPeek, blockOpen                                                                          *luascript.Script
	pause, pauseGen, block, owner, renew                                                          *luascript.Script
	discountBegin, discountReserve, discountConfirm, discountCancel, discountReap, discountSettle *luascript.Script
}

func newScripts(legacy bool) *scripts {
	mk := lib.New
	if legacy {
		mk = lib.NewLegacy
	}
	return &scripts{
		begin: mk(beginSrc), load: mk(loadSrc), activate: mk(activateSrc),
		grab: mk(grabSrc), status: mk(statusSrc), close: mk(closeSrc),
		dead: mk(deadSrc), settle: mk(settleSrc), redrive: mk(redriveSrc),
		xferTake: mk(xferTakeSrc), xferApply: mk(xferApplySrc),
		rebuildFreeze: mk(rebuildFreezeSrc), rebuildSwap: mk(rebuildSwapSrc), rebuildActivate: mk(rebuildActivateSrc),
		blockPeek: mk(blockPeekSrc), blockOpen: mk(blockOpenSrc),
		pause: mk(pauseSrc), pauseGen: mk(pauseGenSrc), block: mk(blockSrc), owner: mk(ownerSrc), renew: mk(renewSrc),
		discountBegin: mk(discountBeginSrc), discountReserve: mk(discountReserveSrc), discountConfirm: mk(discountConfirmSrc),
		discountCancel: mk(discountCancelSrc), discountReap: mk(discountReapSrc), discountSettle: mk(discountSettleSrc),
	}
}

// ScriptNames maps the SHA-1 of every campaign script, as sent to Redis 7,
// to its file name (for benchmarks reading the slow log).
func ScriptNames() map[string]string {
	s := modernScripts
	out := map[string]string{}
	for name, sc := range map[string]*luascript.Script{
		"begin.lua": s.begin, "load.lua": s.load, "activate.lua": s.activate, "grab.lua": s.grab,
		"status.lua": s.status, "close.lua": s.close, "dead.lua": s.dead, "settle.lua": s.settle,
		"redrive.lua": s.redrive, "xfer_take.lua": s.xferTake, "xfer_apply.lua": s.xferApply,
	} {
		out[sc.SHA()] = name
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
