package rebuild_test

import (
	"encoding/json"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/ledger"
	"github.com/hongbao/hongbao/rebuild"
)

// openedUnplaced counts the packets of the blocks the ledger records as
// opened that none of placed holds, and their cents: what a rebuild
// quarantines.
func openedUnplaced(t *testing.T, e *env, id string, placed map[string]hongbao.Grant) (n, cents int64) {
	t.Helper()
	var amounts []int64
	require.NoError(t, e.l.Packets(ctx, id, func(p ledger.Packet) error { amounts = append(amounts, p.Cents); return nil }))
	held := map[int64]bool{}
	for _, g := range placed {
		held[g.Seq] = true
	}
	seen := map[int64]bool{}
	require.NoError(t, e.l.Blocks(ctx, id, func(b ledger.Block) error {
		for _, s := range b.Seqs {
			if !held[s] && !seen[s] {
				seen[s] = true
				n++
				cents += amounts[s-1]
			}
		}
		return nil
	}))
	return n, cents
}

// TestRebuildQuarantinesAcknowledged: packets granted and acknowledged
// but not settled, then Redis loses everything (FLUSHALL). Nothing left
// in Redis or in the ledger says who holds them. A rebuild that put them
// back in the pool would hand them to a second user: the rebuild holds
// out (quarantines) every packet of the blocks the engine opened that no
// record places, and puts back only the blocks never opened. New users
// get those, never an acknowledged packet; the campaign then answers
// SOLD_OUT (a sharded one too: granted + held out = count), and
// settlement refunds the quarantined packets to the cent.
func TestRebuildQuarantinesAcknowledged(t *testing.T) {
	t.Parallel()
	for _, lk := range ledgers {
		for _, shards := range []int{1, 3} {
			t.Run(lk.name+"/shards="+strconv.Itoa(shards), func(t *testing.T) {
				t.Parallel()
				e := newEnv(t, lk.dsn(t))
				c := e.create(120, shards)
				acked := grabAll(t, e.eng, c.ID, "u", 25)
				quiet(t, e.eng)
				flushAll(t, e.r.Client)

				q, qc := openedUnplaced(t, e, c.ID, nil)
				require.GreaterOrEqual(t, q, int64(25), "every acknowledged packet is in an opened block")
				require.LessOrEqual(t, q, int64(25+shards*testBlock), "at most about a block per shard more")
				rep, err := e.rebuild(e.r.Client, c.ID, false)
				require.NoError(t, err)
				require.Zero(t, rep.RestoredClaims, "nothing names a holder")
				require.Equal(t, q, rep.Quarantined)
				require.Equal(t, qc, rep.QuarantinedCents)
				require.Zero(t, rep.Released)
				require.EqualValues(t, 120-q, rep.RestoredPool, "the blocks never opened go back")
				b, err := json.Marshal(rep)
				require.NoError(t, err)
				require.Contains(t, string(b), `"quarantined":`+strconv.FormatInt(q, 10))
				require.Contains(t, string(b), `"quarantined_cents":`+strconv.FormatInt(qc, 10))

				held := map[int64]string{}
				for u, g := range acked {
					require.Equal(t, hongbao.Granted, g.Outcome)
					held[g.Seq] = u
				}
				after := grabAll(t, e.eng, c.ID, "v", 130)
				granted := 0
				for u, g := range after {
					if g.Outcome != hongbao.Granted {
						require.Equal(t, hongbao.SoldOut, g.Outcome, u)
						continue
					}
					granted++
					require.Empty(t, held[g.Seq], "%s got packet %d, acknowledged to %s before the loss", u, g.Seq, held[g.Seq])
				}
				require.EqualValues(t, 120-q, granted)
				st, err := e.eng.Status(ctx, c.ID)
				require.NoError(t, err)
				require.Equal(t, hongbao.StateClosed, st.State)
				require.Equal(t, hongbao.CloseSoldOut, st.CloseReason)

				a := requireAudit(t, e.eng, c.ID)
				require.Equal(t, q, a.LostCount, "the audit counts the quarantined packets")
				e.requireSettledOK(e.r.Client, e.eng, c.ID)
				tot, err := e.l.Totals(ctx, c.ID)
				require.NoError(t, err)
				require.Equal(t, qc, tot.Refunded, "the quarantined packets are refunded")
				require.Equal(t, c.Total, tot.GrantCents+tot.Refunded)
			})
		}
	}
}

// TestRebuildReleaseQuarantine: the operator's flag puts the packets a
// rebuild would quarantine back in the pool (here after settlement caught
// up, the case it is for), a rebuild run again releases the ones an
// earlier one quarantined, and without the flag a rebuild run again keeps
// them quarantined.
func TestRebuildReleaseQuarantine(t *testing.T) {
	t.Parallel()
	e := newEnv(t, ledgers[0].dsn(t))
	c := e.create(100, 2)
	before := grabAll(t, e.eng, c.ID, "u", 33)
	e.settleAll(e.r.Client, c.ID)
	quiet(t, e.eng)
	flushAll(t, e.r.Client)

	rep, err := e.rebuild(e.r.Client, c.ID, false)
	require.NoError(t, err)
	q, qc := openedUnplaced(t, e, c.ID, before)
	require.Positive(t, q)
	require.Equal(t, q, rep.Quarantined)
	again, err := e.rebuild(e.r.Client, c.ID, true)
	require.NoError(t, err)
	require.Equal(t, q, again.Quarantined, "a rebuild run again keeps them out")
	require.EqualValues(t, 67-q, again.RestoredPool)

	rel, err := rebuild.Rebuild(ctx, rebuild.Config{Redis: e.r.Client, Ledger: e.l, Force: true, ReleaseQuarantineRiskingDoubleGrants: true}, c.ID)
	require.NoError(t, err)
	require.Zero(t, rel.Quarantined)
	require.Equal(t, q, rel.Released)
	require.Equal(t, qc, rel.ReleasedCents)
	require.EqualValues(t, 67, rel.RestoredPool)
	require.EqualValues(t, 33, rel.RestoredClaims)
	requireNewUsersGetThePool(t, e.eng, c.ID, before, 67)
	requireAudit(t, e.eng, c.ID)
	e.requireSettledOK(e.r.Client, e.eng, c.ID)
}
