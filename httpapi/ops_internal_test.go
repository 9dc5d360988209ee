package httpapi

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/internal/testenv"
	"github.com/hongbao/hongbao/settle"
)

// TestOperationsWithoutHTTP drives the gates and the operations as a
// second protocol would, with no http.Request and no ResponseWriter: its
// metadata in an inbound, the caller or the refusal from a gate, the
// answer from an operation, an error's neutral answer from answerFor.
func TestOperationsWithoutHTTP(t *testing.T) {
	t.Parallel()
	r := testenv.SharedRedis(t)
	eng, err := hongbao.New(hongbao.Config{Redis: r.Client})
	require.NoError(t, err)
	secret := Secret{KID: "k1", Key: []byte("user-secret-one-0123456789abcdefghij")}
	s, err := New(Config{Engine: eng, Settlement: settle.NewBacklogs(r.Client, ""),
		UserSecrets: []Secret{secret}, AdminKeys: [][]byte{[]byte("admin-key-0123456789abcdefghijklmnop")}, Logger: quietLog()})
	require.NoError(t, err)
	ctx := context.Background()
	c, err := eng.Create(ctx, hongbao.Spec{ID: testenv.UniqueID(t), Total: 300, Count: 3})
	require.NoError(t, err)

	in := func(bearer string) inbound {
		h := http.Header{}
		if bearer != "" {
			h.Set("Authorization", "Bearer "+bearer)
		}
		return inbound{ctx: ctx, route: "rpc Grab", campaign: c.ID, header: h, peer: "192.0.2.1:5000"}
	}
	// No credentials: refused, the answer a protocol encodes.
	_, no := s.userGate(in(""))
	require.True(t, no.refused())
	require.Equal(t, CodeUnauthorized, no.answer.code)
	require.Equal(t, http.StatusUnauthorized, no.answer.httpStatus())

	tok, err := MintToken(secret, "alice", time.Minute, time.Now())
	require.NoError(t, err)
	who, no := s.userGate(in(tok))
	require.False(t, no.refused())
	require.Equal(t, "alice", who)
	require.False(t, s.spendGate(in(tok)).refused())

	g, err := s.grabOp(ctx, c.ID, who)
	require.NoError(t, err)
	require.Equal(t, "granted", g.Outcome.String())
	g2, err := s.grabOp(ctx, c.ID, who)
	require.NoError(t, err)
	require.Equal(t, "already_granted", g2.Outcome.String())
	require.Equal(t, g.Seq, g2.Seq)
	held, err := s.heldOp(ctx, c.ID, who)
	require.NoError(t, err)
	require.Equal(t, g.Cents, held.Cents)
	// The live counts saw both answers.
	st := s.live.store.get(c.ID)
	require.NotNil(t, st)
	require.EqualValues(t, 1, st.outcomes[liveOutcomeOf(hongbao.Granted)].Load())
	require.EqualValues(t, 1, st.outcomes[liveOutcomeOf(hongbao.Already)].Load())

	_, err = s.grabOp(ctx, "no-such-"+c.ID, who)
	a := s.answerFor("rpc Grab", err)
	require.Equal(t, CodeNotFound, a.code)
	require.Equal(t, http.StatusNotFound, a.httpStatus())
}
