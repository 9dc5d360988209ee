// Package redisstore keeps campaigns in Redis: the key layout, the Lua
// scripts and the Go calls that run them. Every decision about money is one
// script; this package turns their replies into Go values.
package redisstore

import (
	_ "embed"
	"errors"
	"fmt"
	"strings"

	"github.com/redis/rueidis"
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
)

// scripts is one set of the campaign scripts.
//
// NewLuaScript sends EVALSHA and falls back to EVAL on NOSCRIPT; it never
// retries a write on a connection error, and neither must anything else
// here: a write whose reply was lost has an unknown outcome, which only the
// caller may resolve by retrying (grab is idempotent per user).
type scripts struct {
	begin, load, activate, grab, status, close, dead, settle, redrive *rueidis.Lua
}

func newScripts(legacy bool) *scripts {
	mk := func(src string) *rueidis.Lua {
		if legacy {
			// Drop the "#!lua" line (keeping line numbers): servers before
			// Redis 7 and the emulator cannot parse it.
			_, rest, _ := strings.Cut(src, "\n")
			src = "-- (script flags removed for this server)\n" + rest
		}
		return rueidis.NewLuaScript(src)
	}
	return &scripts{
		begin: mk(beginSrc), load: mk(loadSrc), activate: mk(activateSrc),
		grab: mk(grabSrc), status: mk(statusSrc), close: mk(closeSrc),
		dead: mk(deadSrc), settle: mk(settleSrc), redrive: mk(redriveSrc),
	}
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
)

var scriptErrors = map[string]error{
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
}

// ScriptError is an error reply of one of our scripts.
type ScriptError struct {
	Code    string // HB... code
	Message string // the rest of the reply
	kind    error
}

func (e *ScriptError) Error() string { return e.kind.Error() + ": " + e.Message }
func (e *ScriptError) Unwrap() error { return e.kind }

// UnknownError is a failure after which a write may or may not have
// happened: the connection broke, or the reply did not arrive in time.
type UnknownError struct{ Err error }

func (e *UnknownError) Error() string { return "outcome unknown: " + e.Err.Error() }
func (e *UnknownError) Unwrap() error { return e.Err }

// resultError classifies the error of a script call: our own error codes
// become *ScriptError, other Redis error replies (the script did not run, or
// failed before writing) stay as they are, and anything else (network,
// timeout, cancellation) is an *UnknownError.
func resultError(op string, err error) error {
	if err == nil {
		return nil
	}
	if rerr, ok := rueidis.IsRedisErr(err); ok {
		msg := rerr.Error()
		code, rest, _ := strings.Cut(msg, " ")
		if kind, ok := scriptErrors[code]; ok {
			return fmt.Errorf("%s: %w", op, &ScriptError{Code: code, Message: rest, kind: kind})
		}
		return fmt.Errorf("%s: redis: %w", op, err)
	}
	return fmt.Errorf("%s: %w", op, &UnknownError{Err: err})
}
