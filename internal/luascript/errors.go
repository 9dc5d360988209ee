package luascript

import (
	"errors"
	"fmt"
	"strings"

	"github.com/redis/rueidis"
)

// Errors is one package's table of script errors. The zero value maps no
// code. An Errors is read-only once built, and safe for concurrent use.
type Errors struct {
	// Codes maps each HB code the package's scripts raise ("HBSTALE") to
	// the package's sentinel that the *Error unwraps to.
	Codes map[string]error
	// Unknown, when not nil, is a sentinel of the package that every
	// *UnknownError from Wrap also matches with errors.Is: the way a public
	// package, whose callers cannot name this internal package's types,
	// reports an unknown outcome.
	Unknown error
}

// Wrap classifies err, the error of a script call for operation op, and
// prefixes it with op; nil stays nil. See the package doc for the four
// kinds.
func (t *Errors) Wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	if rerr, ok := rueidis.IsRedisErr(err); ok {
		code, msg, _ := strings.Cut(rerr.Error(), " ")
		if kind, ok := t.Codes[code]; ok {
			return fmt.Errorf("%s: %w", op, &Error{Code: code, Message: msg, kind: kind})
		}
		return fmt.Errorf("%s: redis: %w", op, err)
	}
	if errors.Is(err, ErrClientClosed) {
		return fmt.Errorf("%s: %w", op, err)
	}
	return fmt.Errorf("%s: %w", op, &UnknownError{Err: err, kind: t.Unknown})
}

// Error is a script's own error reply, "HB<CODE> message", with a code the
// calling package registered. It unwraps to the package's sentinel for
// the code.
type Error struct {
	Code    string // HB... code
	Message string // the rest of the reply
	kind    error
}

// Error implements error: the sentinel's text and the script's message.
func (e *Error) Error() string {
	if e.kind == nil {
		return e.Code + " " + e.Message
	}
	return e.kind.Error() + ": " + e.Message
}

// Unwrap returns the sentinel the calling package registered for Code.
func (e *Error) Unwrap() error { return e.kind }

// UnknownError is a failure after which a script may or may not have run
// and written: the connection broke, or the reply did not arrive in time.
// Only the caller can resolve it, by retrying a script that is safe to run
// twice, or by reading what is there.
type UnknownError struct {
	// Err is the cause: a network error, a timeout, the context's error.
	Err  error
	kind error
}

// Error implements error.
func (e *UnknownError) Error() string { return "outcome unknown: " + e.Err.Error() }

// Unwrap returns the cause.
func (e *UnknownError) Unwrap() error { return e.Err }

// Is reports whether target is the Unknown sentinel of the Errors that
// made e.
func (e *UnknownError) Is(target error) bool { return e.kind != nil && target == e.kind }
