package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/ledger"
	"github.com/hongbao/hongbao/rebuild"
)

// rebuildCmd is "hongbao rebuild": restore a campaign into a Redis that
// lost it, or lost part of it, from the ledger and what survives.
type rebuildCmd struct {
	base
	redis         redisFlags
	id, dsn       string
	asJSON, force bool
	release       bool // --release-quarantine-risking-double-grants
	paused        bool // --paused
	conn          *redisConn
	led           ledger.Ledger
}

func newRebuildCmd(env *IO) command { return &rebuildCmd{base: base{env: env}} }

const rebuildUsage = `Usage: hongbao rebuild --campaign ID --redis URL --ledger DSN [--json] [--force]
       [--paused] [--release-quarantine-risking-double-grants]

Restores a red packet campaign (not a discount campaign: the ledger holds no
packets of one to restore from) into a Redis that lost it, or lost part of it
(a FLUSHALL, an old snapshot, a failover to a replica that missed the last
writes): the claims from the ledger's grants and whatever claims and grants
streams survive, the pool from the packets nobody holds, the counters, state,
grants streams and settle groups, and the registry entry. The campaign is
frozen meanwhile (grabs answer not found). Packets that provably left a pool with no record of their
holder are kept out of the pool and reported as unrecoverable. Packets that may
have been granted (in a block of the pool the engine had opened, recorded in the
ledger) and that no record places are quarantined: kept out of the pool and
refunded with the campaign, never handed out again, unless
--release-quarantine-risking-double-grants puts them back (any of them granted
before the loss is then paid twice). See docs/durability.md for what it can and
cannot know. It refuses a campaign whose keys look healthy unless --force.
A campaign that the root or any surviving shard says paused comes back paused
on every shard; --paused brings it back paused whatever survives (resume it
with hongbao campaign resume). Blocked users survive where their shard's
blocked hash did; the report counts the shards that lost it.

Flags:`

func (c *rebuildCmd) parseFlags(args []string) error {
	fs := newFlagSet("rebuild", c.env)
	fs.StringVar(&c.id, "campaign", "", "campaign id (required)")
	c.redis.declare(fs, "required", false)
	c.redis.declareNamespace(fs)
	fs.StringVar(&c.dsn, "ledger", "", "ledger: sqlite:PATH or postgres://... (required)")
	fs.BoolVar(&c.asJSON, "json", false, "print the report as JSON")
	fs.BoolVar(&c.force, "force", false, "rebuild even when the campaign's keys look healthy")
	fs.BoolVar(&c.paused, "paused", false, "bring the campaign back paused whatever survives (resume it deliberately)")
	fs.BoolVar(&c.release, "release-quarantine-risking-double-grants", false,
		"put the quarantined packets back in the pool: any of them granted before the loss is granted and paid twice")
	setUsage(fs, c.env, rebuildUsage)
	if err := parseFlags(fs, c.env, args); err != nil {
		return err
	}
	if err := hongbao.ValidateCampaignID(c.id); err != nil {
		return usageErrorf("--campaign: %v", err)
	}
	if c.dsn == "" {
		return usageErrorf("--ledger is required (sqlite:PATH or postgres://...)")
	}
	if err := c.redis.checkNamespace(); err != nil {
		return err
	}
	return c.redis.require()
}

func (c *rebuildCmd) open(ctx context.Context) (err error) {
	c.led, c.conn, err = c.openLedgerRedis(ctx, c.dsn, &c.redis)
	return err
}

func (c *rebuildCmd) run(ctx context.Context) error {
	rep, err := rebuild.Rebuild(ctx, rebuild.Config{Redis: c.conn.Client, Namespace: c.redis.ns, Ledger: c.led, Force: c.force,
		ReleaseQuarantineRiskingDoubleGrants: c.release, Paused: c.paused,
		// The report below says what the rebuild's log lines would.
		Logger: slog.New(slog.DiscardHandler)}, c.id)
	if errors.Is(err, rebuild.ErrHealthy) {
		return fmt.Errorf("%w: nothing to do (--force rebuilds it anyway)", err)
	}
	if errors.Is(err, rebuild.ErrDiscount) {
		return fmt.Errorf("%s is a discount campaign: rebuild restores red packet campaigns only (reconcile --discount %s compares a discount campaign with the ledger)", c.id, c.id)
	}
	if errors.Is(err, rebuild.ErrUnknown) {
		return fmt.Errorf("no campaign %s: neither the ledger nor Redis knows it (check the id, --namespace and --ledger)", c.id)
	}
	if err != nil {
		return err
	}
	if c.asJSON {
		return json.NewEncoder(c.env.Stdout).Encode(rep)
	}
	p := func(f string, a ...any) { fmt.Fprintf(c.env.Stdout, f, a...) }
	p("Rebuilt %s (%d shards, %d kept their state), now %s\n", rep.Campaign, rep.Shards, rep.ShardsSurvived, rep.State)
	if len(rep.Problems) > 0 {
		p("  found:          %s\n", strings.Join(rep.Problems, "; "))
	}
	p("  claims         %8d  (%d from %d ledger grants; %d not settled yet, back in the grants streams)\n",
		rep.RestoredClaims, rep.RestoredClaims-rep.ToSettle, rep.LedgerGrants, rep.ToSettle)
	p("  pool           %8d  packets\n", rep.RestoredPool)
	p("  unrecoverable  %8d  packets, %s (kept out of the pool)\n", rep.Unrecoverable, hongbao.FormatCents(rep.UnrecoverableCents))
	p("  quarantined    %8d  packets, %s (may have been granted: kept out of the pool, refunded at settlement)\n",
		rep.Quarantined, hongbao.FormatCents(rep.QuarantinedCents))
	if rep.Released > 0 {
		p("  released       %8d  packets, %s (put back in the pool on --release-quarantine-risking-double-grants)\n",
			rep.Released, hongbao.FormatCents(rep.ReleasedCents))
	}
	p("  ledger fence   %8d  (settlement batches read before the rebuild are refused)\n", rep.LedgerFence)
	switch {
	case rep.Paused:
		p("  paused         every shard (%s)\n", rep.PauseSource)
	case rep.PauseUnknown:
		p("  paused         unknown: a lost shard may have been paused (see notes)\n")
	}
	if rep.BlocklistLostShards > 0 {
		p("  blocklist      lost on %d shards: block those users again\n", rep.BlocklistLostShards)
	}
	if rep.Funded {
		p("  funded         the ledger had no fund entry: written from the campaign's terms\n")
	}
	for _, n := range rep.Notes {
		p("  note: %s\n", n)
	}
	for _, x := range rep.Conflicts {
		p("  conflict: %s\n", x)
	}
	return nil
}
