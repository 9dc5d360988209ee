package batch

import (
	"fmt"

	"github.com/hongbao/hongbao/ledger"
)

// CheckLease refuses what RaiseLease can never record: an empty lease, one
// that is not text, a token below 1.
func CheckLease(lease string, token int64) error {
	switch {
	case lease == "" || !IsText(lease):
		return fmt.Errorf("%w: lease %q must be non-empty UTF-8 without NUL", ledger.ErrInvalid, lease)
	case token < 1:
		return fmt.Errorf("%w: lease %q: token %d, want at least 1", ledger.ErrInvalid, lease, token)
	}
	return nil
}

// RaiseLease is RaiseLease on either backend: raise runs the conditional
// upsert and reports whether it wrote (its RETURNING gave a row); when it
// did not, recorded reads the token that stopped it, in a statement of its
// own (tokens only grow, so whatever it reads is at least token).
func RaiseLease(lease string, token int64, raise func() (bool, error), recorded func() (int64, error)) error {
	if err := CheckLease(lease, token); err != nil {
		return err
	}
	ok, err := raise()
	if err != nil || ok {
		return err
	}
	rec, err := recorded()
	if err != nil {
		return err
	}
	return &ledger.StaleLeaseError{Lease: lease, Token: token, Recorded: rec}
}
