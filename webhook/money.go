package webhook

import "strconv"

// FormatCents writes cents as a decimal amount with exactly two decimals:
// 710 -> "7.10", 5 -> "0.05", -5 -> "-0.05". It works on integers only, for
// every int64, so no float ever stands in for money.
func FormatCents(cents int64) string {
	var buf [24]byte
	b := buf[:0]
	u := uint64(cents)
	if cents < 0 {
		b = append(b, '-')
		u = -u // two's complement: right for math.MinInt64 too
	}
	b = strconv.AppendUint(b, u/100, 10)
	frac := u % 100
	return string(append(b, '.', byte('0'+frac/10), byte('0'+frac%10)))
}
