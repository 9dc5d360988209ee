package hongbao

import (
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao/ledger"
)

// filledTerms is a record with every field set to a value that is not its
// zero, field i to something of i, walked by reflection so a new term is
// filled too.
func filledTerms(t *testing.T) ledger.Terms {
	t.Helper()
	var terms ledger.Terms
	v := reflect.ValueOf(&terms).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		switch f.Kind() {
		case reflect.String:
			f.SetString("v" + string(rune('a'+i)))
		case reflect.Int, reflect.Int64:
			f.SetInt(int64(1000 + i))
		case reflect.Uint64:
			f.SetUint(1<<63 + uint64(i))
		case reflect.Slice:
			f.Set(reflect.ValueOf([]int64{int64(i)}))
		default:
			t.Fatalf("term %s: fill a %s", v.Type().Field(i).Name, f.Kind())
		}
	}
	return terms
}

// TestTermsCodec: every field of the record crosses a Campaign (termsOf,
// setTerms) but the ledger's own, and every field an idempotent create
// compares makes two records differ (sameTerms).
func TestTermsCodec(t *testing.T) {
	t.Parallel()
	want := filledTerms(t)
	var c Campaign
	setTerms(&c, want)
	got := termsOf(&c, want.OpensAt, want.ClosesAt)
	v, gv := reflect.ValueOf(want), reflect.ValueOf(got)
	for i := range v.NumField() {
		name := v.Type().Field(i).Name
		if ledgerOnly[name] {
			require.True(t, gv.Field(i).IsZero(), "%s is the ledger's own", name)
			continue
		}
		require.Equal(t, v.Field(i).Interface(), gv.Field(i).Interface(), "term %s through a Campaign", name)
	}

	require.True(t, sameTerms(want, want))
	zero := ledger.Terms{}
	for i := range v.NumField() {
		name := v.Type().Field(i).Name
		other := want
		reflect.ValueOf(&other).Elem().Field(i).Set(reflect.ValueOf(zero).Field(i))
		require.Equal(t, notSpecified[name], sameTerms(want, other), "an idempotent create compares %s", name)
	}
}
