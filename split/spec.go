package split

import (
	"errors"
	"fmt"
	"strings"
)

// Algorithm names a split algorithm. The names are stable strings because
// they are stored with campaigns and typed by operators.
type Algorithm string

const (
	// DoubleAverage is the default: amounts close to the average, each
	// draw's mean exactly the remaining average.
	DoubleAverage Algorithm = "double-average"
	// LineCut gives a uniformly random composition of the total: uneven,
	// exciting amounts.
	LineCut Algorithm = "line-cut"
	// Fixed gives equal amounts, differing by at most one cent.
	Fixed Algorithm = "fixed"
)

// algorithms lists the valid names in the order error messages show them.
var algorithms = []Algorithm{DoubleAverage, LineCut, Fixed}

// ParseAlgorithm accepts the exact names only, so a typo in a config or a
// flag fails loudly instead of silently falling back to another algorithm.
// The empty string means the default, DoubleAverage.
func ParseAlgorithm(s string) (Algorithm, error) {
	if s == "" {
		return DoubleAverage, nil
	}
	for _, a := range algorithms {
		if s == string(a) {
			return a, nil
		}
	}
	names := make([]string, len(algorithms))
	for i, a := range algorithms {
		names[i] = string(a)
	}
	return "", &SpecError{
		Field:  "algorithm",
		Reason: fmt.Sprintf("unknown %q; valid: %s", s, strings.Join(names, ", ")),
	}
}

// MaxTotal caps a campaign's total because amounts are handled by Redis Lua
// scripts, whose numbers are doubles: integers are exact only up to 2^53.
const MaxTotal int64 = 1<<53 - 1

// MaxCount bounds one split's memory (8 bytes a packet) and the length of
// the list the Lua scripts pop from.
const MaxCount = 10_000_000

// Spec describes one split. The zero values of Min, Max and Algorithm mean
// "default" so callers only set what they care about; [Spec.Normalize] makes
// the defaults explicit.
type Spec struct {
	// Total is the amount to hand out, in cents.
	Total int64
	// Count is the number of packets.
	Count int
	// Min is the smallest amount a packet may hold, in cents; 0 means 1
	// cent, since an empty red packet is not a red packet.
	Min int64
	// Max is the largest amount a packet may hold, in cents; 0 means no
	// limit.
	Max int64
	// Algorithm picks how amounts are drawn; "" means DoubleAverage.
	Algorithm Algorithm
}

// ErrInvalidSpec lets callers tell a bad request (report it to the user)
// from an internal failure, whatever the specific problem.
var ErrInvalidSpec = errors.New("split: invalid spec")

// SpecError says which field of a Spec is wrong and why, in words meant for
// the operator who wrote it. It matches ErrInvalidSpec with errors.Is.
type SpecError struct {
	Field  string // "total", "count", "min", "max" or "algorithm"
	Reason string
}

// Error reads like "split: count: must be at least 1, got 0".
func (e *SpecError) Error() string {
	return "split: " + e.Field + ": " + e.Reason
}

// Unwrap makes errors.Is(err, ErrInvalidSpec) true.
func (e *SpecError) Unwrap() error { return ErrInvalidSpec }

func specErr(field, format string, args ...any) error {
	return &SpecError{Field: field, Reason: fmt.Sprintf(format, args...)}
}

// checkBounds checks what every spec asks alike: 1 to MaxCount amounts, a
// sum of 1 cent to MaxTotal, and bounds that are not negative. countField
// and totalField are the spec's own names for the count and the sum.
func checkBounds(countField string, count int, totalField string, total, min, max int64) error {
	switch {
	case count < 1:
		return specErr(countField, "must be at least 1, got %d", count)
	case count > MaxCount:
		return specErr(countField, "must be at most %d, got %d", MaxCount, count)
	case total < 1:
		return specErr(totalField, "must be at least 1 cent, got %d", total)
	case total > MaxTotal:
		return specErr(totalField,
			"must be at most %d cents (2^53-1, the largest integer a Lua number holds exactly), got %d",
			MaxTotal, total)
	case min < 0:
		return specErr("min", "must not be negative, got %d", min)
	case max < 0:
		return specErr("max", "must not be negative, got %d", max)
	}
	return nil
}

// cents spells an amount for error messages, singular for one cent.
func cents(v int64) string {
	if v == 1 {
		return "1 cent"
	}
	return fmt.Sprintf("%d cents", v)
}

// Normalize returns the spec with its defaults filled in (Min 1,
// Algorithm DoubleAverage) after checking that a split exists at all. Its
// error is a *SpecError; on error the returned Spec is the zero value. All
// products count*min and count*max are checked by division, since they can
// overflow int64 for absurd but representable inputs.
func (s Spec) Normalize() (Spec, error) {
	alg, err := ParseAlgorithm(string(s.Algorithm))
	if err != nil {
		return Spec{}, err
	}
	s.Algorithm = alg
	if err := checkBounds("count", s.Count, "total", s.Total, s.Min, s.Max); err != nil {
		return Spec{}, err
	}
	if s.Min == 0 {
		s.Min = 1
	}
	if s.Max != 0 && s.Max < s.Min {
		return Spec{}, specErr("max", "%s is below min %s", cents(s.Max), cents(s.Min))
	}
	n := int64(s.Count)
	if s.Algorithm == Fixed {
		// Equal shares are q or q+1 cents. These conditions are implied by
		// the general ones below, but checking them here first gives the
		// operator a message about the shares they asked for.
		q, r := s.Total/n, s.Total%n
		hi := q
		if r > 0 {
			hi++
		}
		if q < s.Min {
			return Spec{}, specErr("min", "fixed shares of %s over %d packets go down to %s, below min %s",
				cents(s.Total), s.Count, cents(q), cents(s.Min))
		}
		if s.Max != 0 && hi > s.Max {
			return Spec{}, specErr("max", "fixed shares of %s over %d packets go up to %s, above max %s",
				cents(s.Total), s.Count, cents(hi), cents(s.Max))
		}
	}
	// count*min <= total  <=>  min <= floor(total/count), with no product.
	if s.Min > s.Total/n {
		return Spec{}, specErr("total", "%s cannot give %d packets of at least %s",
			cents(s.Total), s.Count, cents(s.Min))
	}
	// count*max >= total  <=>  max >= ceil(total/count); total+n-1 cannot
	// overflow because total <= MaxTotal and n <= MaxCount.
	if s.Max != 0 && s.Max < (s.Total+n-1)/n {
		return Spec{}, specErr("total", "%s cannot fit in %d packets of at most %s",
			cents(s.Total), s.Count, cents(s.Max))
	}
	return s, nil
}
