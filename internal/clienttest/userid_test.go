package clienttest

import (
	"strings"
	"testing"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/client"
)

// The client module checks user ids with a copy of the engine's rule
// (client/internal/userid), since it does not import the engine. These
// hold the copy to the rule: every byte alone and inside an id, the
// lengths around the limit, and what the fuzzer finds.

func sameRule(t *testing.T, id string) {
	t.Helper()
	engine, cl := hongbao.ValidateUserID(id), client.ValidateUserID(id)
	if (engine == nil) != (cl == nil) {
		t.Errorf("user id %q: the engine says %v, the client %v", id, engine, cl)
	}
}

func TestUserIDRuleAgrees(t *testing.T) {
	t.Parallel()
	for c := range 256 {
		sameRule(t, string([]byte{byte(c)}))
		sameRule(t, "a"+string([]byte{byte(c)})+"b")
	}
	for _, n := range []int{0, 1, 63, 64, 65, 200} {
		sameRule(t, strings.Repeat("u", n))
	}
	sameRule(t, "é")
	if client.ValidateUserID("user-1@platform.example:7_x") != nil || client.ValidateUserID(strings.Repeat("u", 65)) == nil {
		t.Error("the rule accepts nothing or everything")
	}
}

func FuzzUserIDRuleAgrees(f *testing.F) {
	for _, s := range []string{"", "u1", "a b", "a.b:c@d_e-f", strings.Repeat("x", 64), strings.Repeat("x", 65), "{c}", "é"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) { sameRule(t, id) })
}
