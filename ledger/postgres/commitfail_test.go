package postgres

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao/ledger"
	"github.com/hongbao/hongbao/ledger/internal/pgtest"
)

// TestCommitFailsAfterDebit: a batch's transaction fails at its commit,
// after the escrow debit ran (a deferred trigger raises there). With a
// serialization failure the ledger retries it and the batch lands once;
// with any other error nothing of it is written, and writing it again
// lands it once.
func TestCommitFailsAfterDebit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l, err := Open(ctx, pgtest.DSN(t))
	require.NoError(t, err)
	defer l.Close()
	_, err = l.pool.Exec(ctx, `
		-- A commit fails when it finds the sequence below its limit: a
		-- sequence, because its steps survive the rollback of the
		-- transaction that failed.
		CREATE TABLE fail_commits (code TEXT NOT NULL, upto BIGINT NOT NULL);
		CREATE SEQUENCE fail_commits_seq;
		CREATE FUNCTION fail_commit() RETURNS trigger LANGUAGE plpgsql AS $$
		DECLARE f fail_commits;
		BEGIN
			SELECT * INTO f FROM fail_commits;
			IF f.code IS NOT NULL AND nextval('fail_commits_seq') <= f.upto THEN
				RAISE EXCEPTION 'commit fails' USING ERRCODE = f.code;
			END IF;
			RETURN NULL;
		END $$;
		CREATE CONSTRAINT TRIGGER fail_commit AFTER UPDATE ON ledger_accounts
			DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION fail_commit();`)
	require.NoError(t, err)
	require.NoError(t, l.Fund(ctx, ledger.Campaign{ID: "c", Funding: "ops", Total: 100}))
	b1 := []ledger.Grant{{Seq: 1, User: "a", Cents: 30}, {Seq: 2, User: "b", Cents: 20}}
	b2 := []ledger.Grant{{Seq: 2, User: "b", Cents: 20}, {Seq: 3, User: "c", Cents: 50}} // one replay: the INSERT path

	// A failed commit whose error the ledger retries: the debit ran in
	// the failed attempt and again in the one that committed.
	_, err = l.pool.Exec(ctx, `INSERT INTO fail_commits VALUES ('40001', 1)`)
	require.NoError(t, err)
	res, err := l.ApplyGrants(ctx, "c", b1)
	require.NoError(t, err)
	require.Equal(t, ledger.ApplyResult{Inserted: 2, InsertedCents: 50}, res)
	tot, err := l.Totals(ctx, "c")
	require.NoError(t, err)
	require.Equal(t, ledger.Totals{Funded: 100, Funding: "ops", GrantCount: 2, GrantCents: 50, Escrow: 50}, tot)

	// A failed commit the ledger does not retry: nothing of it stays.
	_, err = l.pool.Exec(ctx, `UPDATE fail_commits SET code = 'P0001', upto = upto + 2`)
	require.NoError(t, err)
	_, err = l.ApplyGrants(ctx, "c", b2)
	require.Error(t, err)
	tot, err = l.Totals(ctx, "c")
	require.NoError(t, err)
	require.Equal(t, ledger.Totals{Funded: 100, Funding: "ops", GrantCount: 2, GrantCents: 50, Escrow: 50}, tot)
	b, err := l.Balance(ctx, ledger.UserAccount("c"))
	require.NoError(t, err)
	require.Zero(t, b)

	_, err = l.pool.Exec(ctx, `DELETE FROM fail_commits`)
	require.NoError(t, err)
	res, err = l.ApplyGrants(ctx, "c", b2)
	require.NoError(t, err)
	require.Equal(t, ledger.ApplyResult{Inserted: 1, Replayed: 1, InsertedCents: 50}, res)
	require.NoError(t, l.Refund(ctx, "c", 0))
	for user, want := range map[string]int64{"a": 30, "b": 20, "c": 50} {
		b, err := l.Balance(ctx, ledger.UserAccount(user))
		require.NoError(t, err)
		require.Equal(t, want, b, user)
	}
	tot, err = l.Totals(ctx, "c")
	require.NoError(t, err)
	require.Equal(t, ledger.Totals{Funded: 100, Funding: "ops", GrantCount: 3, GrantCents: 100, RefundDone: true}, tot)
}
