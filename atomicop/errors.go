package atomicop

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/rueidis"

	"github.com/hongbao/hongbao/internal/luascript"
)

var (
	// ErrVersionRange means a version outside [0, 2^53). Lua numbers are
	// doubles, which hold every integer below 2^53 exactly and no longer
	// tell neighbours apart above it.
	ErrVersionRange = errors.New("atomicop: version outside [0, 2^53)")

	// ErrReservedField means a record field named like the version field
	// (VersionField), which only the package writes.
	ErrReservedField = errors.New("atomicop: field name reserved for the version")

	// ErrInvalidKey means a record key, message id or prefix that cannot be
	// turned into single-slot Redis keys (empty, or braces in a wrong place).
	ErrInvalidKey = errors.New("atomicop: invalid key")

	// ErrCrossSlot means a batch whose records do not share one hash tag.
	ErrCrossSlot = errors.New("atomicop: batch records do not share one hash tag")

	// ErrBatchSize means an empty batch, or one above MaxBatch updates or
	// MaxFields fields in an update.
	ErrBatchSize = errors.New("atomicop: batch size out of range")

	// ErrDuration means a lease, keep time or fence time below one
	// millisecond, or a negative one.
	ErrDuration = errors.New("atomicop: duration out of range")

	// ErrInvalidToken means a fencing token that Claim cannot have handed
	// out (zero or negative).
	ErrInvalidToken = errors.New("atomicop: invalid fencing token")

	// ErrNotOwner means the caller's token no longer holds the message: its
	// lease ran out and another worker claimed it, or it was released,
	// delivered under another token, or never claimed with this token. The
	// error is a *NotOwnerError saying what holds the message now.
	ErrNotOwner = errors.New("atomicop: not the owner of the claim")

	// ErrCorrupt means a key holds a value the package never writes; some
	// other code wrote it.
	ErrCorrupt = errors.New("atomicop: unexpected value in a key")

	// ErrOutcomeUnknown means a script's reply was lost (a broken
	// connection, a timeout, a cancelled context): it may or may not have
	// run. Every call is safe to retry. When the first attempt had run, a
	// retried Update answers stale (its own version, or a newer one, is
	// stored); Done, Release and Extend with the same token succeed again
	// unless another worker claimed the message since; a retried Claim
	// answers Busy until the lease the first attempt won runs out.
	ErrOutcomeUnknown = errors.New("atomicop: outcome unknown")
)

// NotOwnerError is the error of Done, Release and Extend when the token does
// not hold the message. errors.Is(err, ErrNotOwner) is true for it.
type NotOwnerError struct {
	// ID is the message id.
	ID string
	// Token is the caller's token.
	Token int64
	// Now is what holds the message now: Free (nobody holds a claim),
	// Busy (a claim under another token) or Delivered (delivered under
	// another token, or, for Release and Extend, under this one).
	Now ClaimStatus
}

// Error implements error.
func (e *NotOwnerError) Error() string {
	return fmt.Sprintf("%v: message %q, token %d; the message is now %v", ErrNotOwner, e.ID, e.Token, e.Now)
}

// Unwrap returns ErrNotOwner.
func (e *NotOwnerError) Unwrap() error { return ErrNotOwner }

// scriptErrors maps the error codes the scripts raise to sentinels. An
// unregistered code (HBARGS: arguments that Go already checked) stays a
// plain Redis error.
var scriptErrors = luascript.Errors{
	Codes: map[string]error{
		"HBVERSION": ErrVersionRange,
		"HBCORRUPT": ErrCorrupt,
	},
	Unknown: ErrOutcomeUnknown,
}

// runScript runs script and returns its integer array reply, turning the
// scripts' error codes into sentinels and a lost reply into
// ErrOutcomeUnknown, wrapped with the operation's name.
func runScript(ctx context.Context, c rueidis.Client, op string, script *luascript.Script, keys, args []string) ([]int64, error) {
	out, err := script.Exec(ctx, c, keys, args).AsIntSlice()
	if err != nil {
		return nil, scriptErrors.Wrap("atomicop: "+op, err)
	}
	return out, nil
}
