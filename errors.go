package hongbao

import (
	"errors"
	"fmt"
)

// Sentinel errors. Compare with errors.Is; the typed errors below unwrap to
// them.
var (
	// ErrCampaignNotFound: no such campaign, or it is still loading.
	ErrCampaignNotFound = errors.New("hongbao: campaign not found")
	// ErrCampaignExists: a campaign with this id was created already.
	ErrCampaignExists = errors.New("hongbao: campaign exists")
	// ErrInvalidSpec: the campaign spec cannot be split or scheduled.
	ErrInvalidSpec = errors.New("hongbao: invalid campaign spec")
	// ErrInvalidID: a campaign, user or account id has a bad length or
	// characters.
	ErrInvalidID = errors.New("hongbao: invalid id")
	// ErrInvalidAmount: a decimal amount could not be read as cents.
	ErrInvalidAmount = errors.New("hongbao: invalid amount")
	// ErrNoGrant: the user holds no packet of the campaign (Held).
	ErrNoGrant = errors.New("hongbao: no packet held")
	// ErrOutcomeUnknown: the request reached Redis or may have, but its
	// answer was lost (timeout, broken connection). A grab may have been
	// granted; retrying the grab is safe and returns the same packet.
	ErrOutcomeUnknown = errors.New("hongbao: outcome unknown, retry")
	// ErrBusy: too many grabs of this campaign are waiting; nothing was
	// attempted. Retry after a short pause.
	ErrBusy = errors.New("hongbao: busy, retry later")
	// ErrLoadInterrupted: another create of the same campaign took over
	// while this one was loading the pool.
	ErrLoadInterrupted = errors.New("hongbao: campaign load interrupted")
)

// ExistsError says which campaign exists and in which state.
type ExistsError struct {
	ID    string
	State State
}

func (e *ExistsError) Error() string {
	return fmt.Sprintf("hongbao: campaign %q exists (state %s)", e.ID, e.State)
}

// Unwrap makes errors.Is(err, ErrCampaignExists) true.
func (e *ExistsError) Unwrap() error { return ErrCampaignExists }

// IDError names the id that was refused and why.
type IDError struct {
	Kind   string // "campaign", "user" or "account"
	ID     string
	Reason string
}

func (e *IDError) Error() string {
	return fmt.Sprintf("hongbao: invalid %s id %q: %s", e.Kind, e.ID, e.Reason)
}

// Unwrap makes errors.Is(err, ErrInvalidID) true.
func (e *IDError) Unwrap() error { return ErrInvalidID }
