package hongbao

import (
	"errors"
	"fmt"
	"time"

	"github.com/hongbao/hongbao/split"
)

// Validate checks spec without touching Redis: its ids, that it closes
// after it opens, and that its total splits into its packets within its
// minimum and maximum. A refused field is a *SpecError, a refused id an
// *IDError. Create runs the same checks; only the Redis clock can tell
// whether the window is already past, so Create can still refuse a spec
// that Validate accepts.
func (spec Spec) Validate() error {
	_, err := spec.check()
	return err
}

// check is Validate, returning the split spec with its defaults.
func (spec Spec) check() (split.Spec, error) {
	if spec.ID != "" {
		if err := ValidateCampaignID(spec.ID); err != nil {
			return split.Spec{}, err
		}
	}
	if spec.Funding != "" {
		if err := ValidateAccountID(spec.Funding); err != nil {
			return split.Spec{}, err
		}
	}
	// In milliseconds, as the scripts compare them.
	if !spec.OpensAt.IsZero() && !spec.ClosesAt.IsZero() && unixMs(spec.ClosesAt) <= unixMs(spec.OpensAt) {
		return split.Spec{}, &SpecError{Field: "closes_at", Reason: fmt.Sprintf("%s is not after opens_at %s",
			spec.ClosesAt.Format(time.RFC3339Nano), spec.OpensAt.Format(time.RFC3339Nano))}
	}
	sp, err := split.Spec{Total: spec.Total, Count: spec.Count, Min: spec.Min, Max: spec.Max, Algorithm: spec.Split}.Normalize()
	if err != nil {
		return split.Spec{}, fromSplit(err)
	}
	switch {
	case spec.Shards < 0 || spec.Shards > MaxShards:
		return split.Spec{}, &SpecError{Field: "shards", Reason: fmt.Sprintf("must be within 1..%d, got %d", MaxShards, spec.Shards)}
	case spec.Shards > sp.Count:
		return split.Spec{}, &SpecError{Field: "shards", Reason: fmt.Sprintf("%d shards need at least as many packets, got %d", spec.Shards, sp.Count)}
	}
	return sp, nil
}

// fromSplit turns an error of package split into a *SpecError naming the
// field as Spec and the HTTP API name it.
func fromSplit(err error) error {
	var se *split.SpecError
	if !errors.As(err, &se) {
		return &SpecError{Field: "split", Reason: "cannot split the total", Err: err}
	}
	field := se.Field
	if field == "algorithm" {
		field = "split"
	}
	return &SpecError{Field: field, Reason: se.Reason, Err: err}
}

// windowError explains the store's refusal of the open window. Validate
// has checked that the window closes after it opens, so what the Redis
// clock refused is a window that has already ended.
func windowError(spec Spec, window time.Duration, cause error) error {
	if spec.ClosesAt.IsZero() {
		return &SpecError{Field: "opens_at", Err: cause,
			Reason: fmt.Sprintf("the campaign would close %s after it, which is already past", window)}
	}
	return &SpecError{Field: "closes_at", Reason: "is already past", Err: cause}
}
