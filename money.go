package hongbao

import (
	"errors"

	"github.com/hongbao/hongbao/money"
)

// ParseCents reads a decimal amount such as "7.10", "7.1" or "7" as integer
// cents, as money.ParseCents does. Its error is an *AmountError, so
// errors.Is(err, ErrInvalidAmount) holds.
func ParseCents(s string) (int64, error) {
	c, err := money.ParseCents(s)
	var pe *money.ParseError
	if errors.As(err, &pe) {
		return 0, &AmountError{Input: pe.Input, Reason: pe.Reason}
	}
	return c, err
}

// FormatCents writes cents as a decimal amount with two decimals: 710 ->
// "7.10". It is money.FormatCents.
func FormatCents(c int64) string { return money.FormatCents(c) }

// AppendCents appends cents as FormatCents writes them, without
// allocating. It is money.AppendCents.
func AppendCents(b []byte, c int64) []byte { return money.AppendCents(b, c) }
