package money_test

import (
	"errors"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao/money"
)

func TestParseCents(t *testing.T) {
	t.Parallel()
	good := map[string]int64{
		"0": 0, "7": 700, "7.1": 710, "7.10": 710, "7.01": 701, "10000.00": 1000000,
		"92233720368547758.07": math.MaxInt64,
	}
	for in, want := range good {
		got, err := money.ParseCents(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	for _, in := range []string{"", ".5", "5.", "1.005", "-1", "+1", "1e3", "1,00", " 1", "0x10", "1.2.3", "92233720368547758.08", "99999999999999999999"} {
		_, err := money.ParseCents(in)
		var pe *money.ParseError
		require.True(t, errors.As(err, &pe), "%q: %v", in, err)
		require.Equal(t, in, pe.Input)
		require.NotEmpty(t, pe.Reason, in)
	}
	_, err := money.ParseCents("1.005")
	require.EqualError(t, err, `money: invalid amount "1.005": want at most two decimals, as in 12.34`)
}

func TestFormatCents(t *testing.T) {
	t.Parallel()
	for c, want := range map[int64]string{
		0: "0.00", 1: "0.01", 5: "0.05", 10: "0.10", 99: "0.99", 100: "1.00", 710: "7.10", 1285: "12.85",
		100000: "1000.00", -5: "-0.05", -710: "-7.10",
		math.MaxInt64: "92233720368547758.07", math.MinInt64: "-92233720368547758.08",
	} {
		require.Equal(t, want, money.FormatCents(c))
		require.Equal(t, "x"+want, string(money.AppendCents([]byte("x"), c)))
	}
}

func FuzzParseCents(f *testing.F) {
	for _, s := range []string{"0", "7.10", "1.005", "-1", "99999999999999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := money.ParseCents(s)
		if err != nil {
			return
		}
		require.GreaterOrEqual(t, c, int64(0))
		// What parses formats back to an amount that parses to the same cents.
		back, err := money.ParseCents(money.FormatCents(c))
		require.NoError(t, err)
		require.Equal(t, c, back)
	})
}
