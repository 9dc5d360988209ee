package cli

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/ledger"
)

const reconcileUsage = `Usage: hongbao reconcile --campaign ID --redis URL --ledger DSN [--json]
       hongbao reconcile --discount ID --redis URL --ledger DSN [--json]
       hongbao reconcile --webhook URL --webhook-secret-file FILE --redis URL [--json] ID
       hongbao reconcile --balances --ledger DSN [--json]

With --campaign (or --discount), compares one campaign in Redis (claims,
counters, pool, stream, dead stream) with the ledger, grant by grant, and
checks conservation. Run it on a closed campaign. The campaign may be given
as an operand instead of --campaign.

With --webhook, asks the host's wallet that campaign ID settles into what it
holds of it (a signed "totals" event: fund, grant count and cents, refund)
and compares that with Redis's counters and streams. Totals cannot say which
grant differs: look for it in the wallet and the campaign's dead stream. A
campaign that records another owner than the webhook's name is a difference.

With --balances, reads only the ledger: every account's stored balance
(ledger_accounts) against what its journal entries derive, the credits of
campaigns not rolled up yet left out, and the double-entry sums (the journal's
balances sum to 0; the stored ones plus the credits not rolled up sum to 0).
It reads in one snapshot (a read-only REPEATABLE READ transaction on
PostgreSQL, a read transaction on SQLite) and takes no lock a writer waits for,
so it can run while settlement writes. It reads every entry of the ledger once:
on PostgreSQL it holds its snapshot (and VACUUM's horizon) for the whole read,
on SQLite the WAL grows until it ends.

Either exits 1 when it finds a difference.

Reconcile creates and migrates nothing: a ledger that does not exist (a
SQLite file that is not there, a PostgreSQL schema without the ledger's
tables) or whose schema is behind this build's is an error (exit 1). Create
or migrate it with 'hongbao migrate --ledger DSN'; serve and settle do too
when they start.

Flags:`

// balancesListed bounds the differences a --balances report lists; all
// are counted.
const balancesListed = 100

// balancesFlags checks the flags of reconcile --balances: no campaign,
// a ledger; --redis is not used.
func (c *reconcileCmd) balancesFlags() error {
	if c.id != "" || c.discount != "" {
		return usageErrorf("give --balances or a campaign (--campaign, --discount), not both")
	}
	if c.dsn == "" {
		return usageErrorf("--ledger is required (sqlite:PATH or postgres://...)")
	}
	return nil
}

// openLedger opens the ledger, only if it exists at this build's schema
// version: reconcile reads it and must not create it.
func (c *reconcileCmd) openLedger(ctx context.Context) error {
	l, err := openExistingLedger(ctx, c.dsn)
	if err != nil {
		return err
	}
	c.deferClose(func() { _ = l.Close() })
	c.led = l
	return nil
}

// balancesReport is what reconcile --balances prints.
type balancesReport struct {
	ledger.BalanceCheck
	// Differences lists the first balancesListed accounts that differ,
	// in account order.
	Differences []ledger.BalanceDifference `json:"differences"`
	OK          bool                       `json:"ok"`
}

func (c *reconcileCmd) checkBalances(ctx context.Context) error {
	rep := balancesReport{Differences: []ledger.BalanceDifference{}}
	check, err := c.led.CheckBalances(ctx, func(d ledger.BalanceDifference) error {
		if len(rep.Differences) < balancesListed {
			rep.Differences = append(rep.Differences, d)
		}
		return nil
	})
	if err != nil {
		return err
	}
	rep.BalanceCheck, rep.OK = check, check.OK()
	problems, n := balanceProblems(rep)
	if c.asJSON {
		_ = json.NewEncoder(c.env.Stdout).Encode(rep)
	} else {
		printBalances(c.env, rep, problems, n)
	}
	if !rep.OK {
		return &exitError{code: 1, err: fmt.Errorf("%d differences", n)}
	}
	return nil
}

// balanceProblems is one line per difference listed, one for those
// counted and not listed, and one per double-entry sum that is not 0; n
// counts the differences and the sums that are not 0.
func balanceProblems(rep balancesReport) (ps []string, n int64) {
	fc := hongbao.FormatCents
	n = rep.BalanceCheck.Differences
	for _, d := range rep.Differences {
		ps = append(ps, fmt.Sprintf("%s: stored %s, the journal derives %s (with %s not rolled up yet: balance %s)",
			d.Account, fc(d.Stored), fc(d.Derived), fc(d.Pending), fc(d.Derived+d.Pending)))
	}
	if more := rep.BalanceCheck.Differences - int64(len(rep.Differences)); more > 0 {
		ps = append(ps, fmt.Sprintf("%d more accounts differ (not listed)", more))
	}
	if rep.JournalSum != 0 {
		ps = append(ps, fmt.Sprintf("the journal's balances sum to %s, not 0", fc(rep.JournalSum)))
		n++
	}
	if s := rep.StoredSum + rep.PendingSum; s != 0 {
		ps = append(ps, fmt.Sprintf("the stored balances and the credits not rolled up sum to %s, not 0", fc(s)))
		n++
	}
	return ps, n
}

func printBalances(env *IO, rep balancesReport, problems []string, n int64) {
	fmt.Fprintf(env.Stdout, "Balances of the ledger: %d accounts, read in one snapshot\n", rep.Accounts)
	fmt.Fprintf(env.Stdout, "  journal sum %s   stored sum %s   not rolled up yet %s\n",
		hongbao.FormatCents(rep.JournalSum), hongbao.FormatCents(rep.StoredSum), hongbao.FormatCents(rep.PendingSum))
	printVerdict(env.Stdout, rep.OK, "  OK: every stored balance is what the journal derives, and the sums are 0",
		fmt.Sprintf("  %d differences:", n), problems)
}
