// Package money reads and writes amounts of money. An amount is an int64
// count of cents everywhere in hongbao; this package is where a decimal
// string such as "7.10" becomes cents and back, and it imports nothing of
// the module, so any package (the engine, a ledger's sink, a client) can
// format an amount without depending on the engine.
package money

import (
	"math"
	"strconv"
	"strings"
)

// ParseError says why a decimal amount was refused.
type ParseError struct {
	Input  string
	Reason string // e.g. "want at most two decimals, as in 12.34"
}

func (e *ParseError) Error() string {
	return "money: invalid amount " + strconv.Quote(e.Input) + ": " + e.Reason
}

// ParseCents reads a decimal amount such as "7.10", "7.1" or "7" as integer
// cents. It refuses signs, exponents, more than two decimals and amounts
// that do not fit an int64, so a float never stands in for money. Its
// error is a *ParseError.
func ParseCents(s string) (int64, error) {
	bad := func(why string) (int64, error) {
		return 0, &ParseError{Input: s, Reason: why}
	}
	if s == "" {
		return bad("empty")
	}
	if s[0] == '-' {
		return bad("must not be negative")
	}
	whole, frac, hasDot := strings.Cut(s, ".")
	if whole == "" {
		return bad("no digits before the decimal point")
	}
	if hasDot && (len(frac) == 0 || len(frac) > 2) {
		return bad("want at most two decimals, as in 12.34")
	}
	for _, part := range []string{whole, frac} {
		for _, c := range part {
			if c < '0' || c > '9' {
				return bad("want digits and one decimal point only")
			}
		}
	}
	w, err := strconv.ParseInt(whole, 10, 64)
	if err != nil || w > math.MaxInt64/100 {
		return bad("too large")
	}
	var f int64
	if frac != "" {
		f, _ = strconv.ParseInt(frac, 10, 64)
		if len(frac) == 1 {
			f *= 10
		}
	}
	c := w*100 + f
	if c < 0 {
		return bad("too large")
	}
	return c, nil
}

// FormatCents writes cents as a decimal amount with two decimals: 710 ->
// "7.10", -5 -> "-0.05".
func FormatCents(c int64) string { return string(AppendCents(nil, c)) }

// AppendCents appends cents as FormatCents writes them, without
// allocating: for answers encoded by hand on a hot path.
func AppendCents(b []byte, c int64) []byte {
	u := uint64(c)
	if c < 0 {
		b = append(b, '-')
		u = uint64(-(c + 1)) + 1
	}
	b = strconv.AppendUint(b, u/100, 10)
	b = append(b, '.')
	if u%100 < 10 {
		b = append(b, '0')
	}
	return strconv.AppendUint(b, u%100, 10)
}
