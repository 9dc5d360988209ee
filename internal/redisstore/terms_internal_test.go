package redisstore

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestTermsMeta: begin writes every scalar field of the record but those
// a later step writes, and TermsOf reads every one back from its meta
// name, whichever step wrote it; a field of a kind meta cannot hold
// panics at init.
func TestTermsMeta(t *testing.T) {
	t.Parallel()
	var in Terms
	v := reflect.ValueOf(&in).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		switch f.Kind() {
		case reflect.String:
			f.SetString("s" + strings.Repeat("x", i+1))
		case reflect.Int, reflect.Int64:
			f.SetInt(int64(7 + i))
		case reflect.Uint64:
			f.SetUint(1<<63 + uint64(i))
		}
	}
	a := appendTerms(&in, nil)
	meta := map[string]string{}
	for i := 0; i < len(a); i += 2 {
		meta[a[i]] = a[i+1]
	}
	for _, f := range termFields {
		_, written := meta[f.name]
		require.Equal(t, !laterTerms[f.name], written, "begin writes %s", f.name)
		if !written {
			meta[f.name] = fmt.Sprint(v.Field(f.index).Interface()) // as the later step writes it
		}
	}
	in.Lost = nil // the ledger's alone
	require.Equal(t, in, TermsOf(meta))
}
