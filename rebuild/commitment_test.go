package rebuild_test

import (
	"database/sql"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	_ "modernc.org/sqlite"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/fairness"
)

// TestRebuildKeepsCommitment: Redis lost a committed campaign; the
// rebuild checks the ledger's packets and salts against the committed root
// before restoring anything, and reports it; the commitment is unchanged
// and every holder's proof still leads to it. A salt changed in the
// ledger (the salts live there only) makes the rebuild refuse.
func TestRebuildKeepsCommitment(t *testing.T) {
	t.Parallel()
	for _, lk := range ledgers {
		t.Run(lk.name, func(t *testing.T) {
			t.Parallel()
			dsn := lk.dsn(t)
			e := newEnv(t, dsn)
			c := e.create(60, 2)
			before, err := e.eng.Commitment(ctx, c.ID)
			require.NoError(t, err)
			var pub fairness.Commitment
			require.NoError(t, json.Unmarshal(before, &pub))
			held := grabAll(t, e.eng, c.ID, "u", 20)
			e.settleAll(e.r.Client, c.ID)
			quiet(t, e.eng)
			flushAll(t, e.r.Client)

			rep, err := e.rebuild(e.r.Client, c.ID, false)
			require.NoError(t, err)
			require.Equal(t, pub.Root, rep.CommitmentRoot)
			after, err := e.eng.Commitment(ctx, c.ID)
			require.NoError(t, err)
			require.Equal(t, before, after)
			root, err := fairness.ParseHash(pub.Root)
			require.NoError(t, err)
			for u := range held {
				p, err := e.eng.Proof(ctx, c.ID, u)
				require.NoError(t, err)
				require.NoError(t, fairness.VerifyProof(p, root))
			}
			if lk.name != "sqlite" {
				return
			}
			db, err := sql.Open("sqlite", strings.TrimPrefix(dsn, "sqlite:"))
			require.NoError(t, err)
			defer db.Close()
			// Move one packet's salt: swap the first two salts.
			_, err = db.Exec(`UPDATE ledger_salts SET salts = CAST(substr(salts, 33, 32) || substr(salts, 1, 32) || substr(salts, 65) AS BLOB) WHERE campaign = ? AND chunk = 0`, c.ID)
			require.NoError(t, err)
			_, err = hongbao.CheckLedgerCommitment(ctx, e.l, c.ID)
			var ce *hongbao.CommitmentError
			require.ErrorAs(t, err, &ce)
			flushAll(t, e.r.Client)
			_, err = e.rebuild(e.r.Client, c.ID, false)
			require.ErrorAs(t, err, &ce, "no pool restored from packets the commitment does not cover")
		})
	}
}
