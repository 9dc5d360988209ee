package userid

import (
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		id string
		ok bool
	}{
		{"u1", true}, {"a.b:c@d_e-f", true}, {strings.Repeat("x", MaxLen), true},
		{"", false}, {strings.Repeat("x", MaxLen+1), false}, {"a b", false},
		{"a/b", false}, {"é", false}, {"a\x00", false}, {"{c}", false},
	} {
		if err := Check(tc.id); (err == nil) != tc.ok {
			t.Errorf("Check(%q) = %v, want ok=%v", tc.id, err, tc.ok)
		}
	}
}
