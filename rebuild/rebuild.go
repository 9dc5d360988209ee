// Package rebuild restores a campaign into a Redis that lost it, or lost
// part of it, from the ledger and from whatever of it survives in Redis.
//
// The ledger holds every packet from create on (ledger.Ledger's
// WritePackets), the campaign's terms (WriteTerms: window, layout,
// funding) and every settled grant. Redis may still hold some of the
// campaign: claims, pools, grants streams not yet settled, counters. A
// rebuild gives each packet one place:
//
//   - a claim, when a record names its holder: the ledger's grants first
//     (money moved for them), then the surviving claims, then the
//     surviving stream entries. Grants the ledger does not hold yet go
//     into the new grants stream, so the settlement worker carries on;
//   - lost ("unrecoverable"), when it provably left a pool and no record
//     names who holds it: some user was told GRANTED and nothing says
//     who. It is kept out of the pool (conservation counts it; the
//     refund returns it to the funding account) and recorded in the
//     ledger's terms, so a later rebuild keeps it out too. See proofs.go
//     for what proves it;
//   - quarantined, when it may have been popped (it is in a block of a
//     pool the engine opened: the durable pop frontier, recorded in the
//     ledger before any packet of the block could be popped) and no
//     record places it: some user may have been told GRANTED, and handed
//     out again it would be granted twice. Held out as the lost ones,
//     refunded with the campaign, unless an operator releases them
//     (Config.ReleaseQuarantineRiskingDoubleGrants). At most about one
//     block per shard;
//   - the pool, otherwise: a packet of a block never opened was never
//     popped.
//
// What no record and no proof reaches cannot be known: a grant
// acknowledged after the last settled one on a shard whose state did not
// survive. Its user keeps no claim, and the report says so rather than
// guess; its packet is quarantined, never granted to a second user. With
// WAIT (hongbao.Config.WaitReplicas) a failover loses no acknowledged
// grant.
//
// A rebuild never runs beside live grabs on the keys it rewrites: it
// first freezes every shard (state loading: grabs answer NO_CAMPAIGN, the
// worker skips the campaign), then fences settlement off in the ledger
// (ledger.Ledger.Fence, funding the campaign from its terms first if
// nothing has), then reads, plans, writes the new state under keys of its
// own and swaps each shard in with one script, with the new fence in its
// meta, and activates the shards, the root last, and registers the
// campaign again. Run again after a crash, it freezes what it left and
// converges on the same result. It refuses a campaign whose keys look
// healthy, unless forced.
//
// An operator's brakes survive where Redis kept them: a campaign the root
// or any surviving shard says paused comes back paused on every shard
// (written in the call that activates each, Config.Paused forces it), and
// each shard's blocked users' hash, never rewritten, is kept as it was;
// the report says when a lost shard may have been paused and counts the
// shards whose blocked users were lost.
//
// The fence is what keeps a settlement worker that read a batch of grants
// from a stream before the loss from committing it after the rebuild read
// the ledger (its packets would then be both paid and, for the rebuild,
// nobody's): Fence returns once every write of the campaign in flight has
// committed, so the rebuild's read sees those, and the ledger refuses
// every later write prepared under the old fence (ledger.ErrFenced). The
// worker keeps such a batch pending and reads the campaign again, with
// the fence the rebuild wrote (redisstore.LedgerFence), and so settles
// only what the rebuilt Redis holds.
package rebuild

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"

	"github.com/redis/rueidis"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/internal/redisstore"
	"github.com/hongbao/hongbao/ledger"
)

// Errors. Compare with errors.Is.
var (
	// ErrHealthy: the campaign's keys look whole and agree with the
	// ledger; Config.Force rebuilds it anyway.
	ErrHealthy = errors.New("rebuild: the campaign's keys look healthy")
	// ErrSettled: the campaign is settled (refunded); nothing to rebuild.
	ErrSettled = errors.New("rebuild: the campaign is settled")
	// ErrCreating: a create is loading the campaign; finish or retry it.
	ErrCreating = errors.New("rebuild: the campaign is loading for a create")
	// ErrUnknowable: what survives says that packets were granted without
	// saying which, so no pool can be restored without a guess.
	ErrUnknowable = errors.New("rebuild: the surviving state cannot tell which packets were granted")
	// ErrNoTerms: the campaign's root shard is gone and the ledger holds
	// no terms (window, layout) for it.
	ErrNoTerms = errors.New("rebuild: the campaign's terms are neither in Redis nor in the ledger")
	// ErrDiscount: the id names a discount campaign; a rebuild restores
	// red packet campaigns only.
	ErrDiscount = errors.New("rebuild: a rebuild restores red packet campaigns, and this is a discount campaign")
	// ErrUnknown: neither the ledger nor Redis knows the campaign: a
	// mistyped id, or another namespace or ledger.
	ErrUnknown = errors.New("rebuild: neither the ledger nor Redis knows the campaign")
)

// Config configures a rebuild.
type Config struct {
	// Redis is the client of the campaign's Redis. Required.
	Redis rueidis.Client
	// Namespace is the namespace of the campaign's deployment in Redis
	// (hongbao.Config.Namespace). Default "hb".
	Namespace string
	// Ledger is the ledger the campaign settles into; it must hold the
	// campaign's packets. Required.
	Ledger ledger.Ledger
	// Force rebuilds a campaign whose keys look healthy. Default false.
	Force bool
	// ReleaseQuarantineRiskingDoubleGrants puts the packets a rebuild
	// would quarantine back in the pools. Each of them may have been
	// granted, and acknowledged, to a user whose grant left no record:
	// handed out again it is paid twice. Only for an operator who knows
	// no grant was acknowledged in the window the loss took (for example
	// every grab waited for replicas, or the service was stopped and
	// settled before the loss). Default false: quarantined, refunded with
	// the campaign.
	ReleaseQuarantineRiskingDoubleGrants bool
	// Paused brings the campaign back paused whatever survives, so that
	// an operator resumes it deliberately (Engine.Resume). Without it the
	// campaign comes back paused when the root or any surviving shard
	// was, and as before otherwise (Report.PauseUnknown says when a lost
	// shard may have been paused). Default false.
	Paused bool
	// Logger hears what the rebuild restored, quarantined and could not
	// know, as the Report says it. Default: slog.Default().
	Logger *slog.Logger
}

// Validate checks the configuration. A refusal is a *hongbao.ConfigError
// (errors.Is(err, hongbao.ErrInvalidConfig)) naming the field from this
// package: "rebuild.Config.Ledger".
func (c Config) Validate() error {
	switch {
	case c.Redis == nil:
		return &hongbao.ConfigError{Field: "rebuild.Config.Redis", Reason: "is required"}
	case c.Ledger == nil:
		return &hongbao.ConfigError{Field: "rebuild.Config.Ledger", Reason: "is required: a rebuild restores the campaign from the packets it recorded"}
	}
	if _, err := redisstore.ParseNamespace(c.Namespace); err != nil {
		return &hongbao.ConfigError{Field: "rebuild.Config.Namespace", Reason: err.Error(), Err: err}
	}
	return nil
}

// Report is what a rebuild did and what it could not know.
type Report struct {
	Campaign string `json:"campaign"`
	Shards   int    `json:"shards"`
	// State is the state the campaign was restored in.
	State string `json:"state"`
	// RestoredClaims counts the claims written: one per user a record
	// names. ToSettle of them are grants the ledger does not hold yet,
	// now in the grants streams.
	RestoredClaims int64 `json:"restored_claims"`
	ToSettle       int64 `json:"to_settle"`
	// RestoredPool counts the packets put back in the pools.
	RestoredPool int64 `json:"restored_pool"`
	// Unrecoverable counts the packets kept out of the pool: each left a
	// pool, and no record names its holder. UnrecoverablePackets lists
	// their seqs.
	Unrecoverable        int64   `json:"unrecoverable"`
	UnrecoverableCents   int64   `json:"unrecoverable_cents"`
	UnrecoverablePackets []int64 `json:"unrecoverable_packets"`
	// Quarantined counts the packets held out because they may have
	// been granted: each is in a block of the pool that the engine opened
	// (recorded in the ledger before any of its packets could be popped;
	// every packet when the campaign had no frontier), and no record
	// places it. They are kept out of the pool and refunded with the
	// campaign, as the unrecoverable ones. Released counts those the
	// operator put back in the pools instead
	// (ReleaseQuarantineRiskingDoubleGrants).
	Quarantined      int64 `json:"quarantined"`
	QuarantinedCents int64 `json:"quarantined_cents"`
	Released         int64 `json:"released"`
	ReleasedCents    int64 `json:"released_cents"`
	OpenedBlocks     int   `json:"opened_blocks"`
	// LedgerGrants counts the settled grants read from the ledger;
	// ShardsSurvived the shards whose state Redis still held.
	LedgerGrants   int64 `json:"ledger_grants"`
	ShardsSurvived int   `json:"shards_survived"`
	// Problems are why the campaign did not look healthy.
	Problems []string `json:"problems"`
	// Conflicts are records the rebuild did not follow (at most 100
	// listed; ConflictCount counts them all).
	Conflicts     []string `json:"conflicts"`
	ConflictCount int      `json:"conflict_count"`
	// Notes say what could not be known.
	Notes []string `json:"notes"`
	// LedgerFence is the campaign's fence in the ledger, raised by this
	// rebuild before it read the ledger and written into every shard it
	// rebuilt: a settlement batch read before carries an older one and is
	// refused.
	LedgerFence int64 `json:"ledger_fence"`
	// Funded is set when the ledger held no fund entry for the campaign
	// and the rebuild wrote it, from the campaign's terms.
	Funded bool `json:"funded"`
	// Paused is set when the campaign came back paused, every shard;
	// PauseSource says why: "root" or "shard N" (a surviving shard was
	// paused) or "config" (Config.Paused). PauseUnknown is set when it
	// came back unpaused and some shard's meta, with its pause flag, was
	// lost: nothing says whether the operator had paused the campaign.
	Paused       bool   `json:"paused"`
	PauseSource  string `json:"pause_source"`
	PauseUnknown bool   `json:"pause_unknown"`
	// BlocklistLostShards counts the shards whose blocked users' hash was
	// lost: they come back blocking nobody, and the operator blocks those
	// users again (hongbao campaign block). A surviving hash is kept as it was.
	BlocklistLostShards int `json:"blocklist_lost_shards"`
	// CommitmentRoot is the campaign's committed root (docs/fairness.md),
	// which the ledger's packets and salts were found to hash to before
	// anything was restored; "" for a campaign created before
	// commitments. The rebuild changes neither the packets nor the salts,
	// so the commitment, its proofs and its draw log stay as they were.
	CommitmentRoot string `json:"commitment_root"`
}

// run is one rebuild's state.
type run struct {
	cfg   Config
	id    string
	store *redisstore.Store
	rep   *Report

	cents    []int64      // the ledger's packets
	terms    ledger.Terms // the campaign's terms, from the root's meta or the ledger
	shards   []redisstore.Keys
	token    string
	prior    string            // the root's state before the rebuild ("" when it was gone)
	rootMeta map[string]string // the root's meta before the freeze (nil when gone)
	fenceN   int64             // the ledger fence this rebuild raised
	ev       *evidence
	plan     *plan
	now      int64 // Redis clock, ms

	// the state the campaign is restored in
	state, reason string
	closedAt      int64
	paused        bool
}

// Rebuild restores campaign id; see the package comment. The report is
// returned with ErrHealthy too, listing nothing wrong. A Config that
// Validate refuses is a *hongbao.ConfigError, and nothing is read.
func Rebuild(ctx context.Context, cfg Config, id string) (*Report, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := hongbao.ValidateCampaignID(id); err != nil {
		return nil, err
	}
	ns, _ := redisstore.ParseNamespace(cfg.Namespace) // checked by Validate
	r := &run{cfg: cfg, id: id, store: redisstore.New(cfg.Redis).WithNamespace(ns),
		rep: &Report{Campaign: id, Problems: []string{}, Conflicts: []string{}, Notes: []string{}, UnrecoverablePackets: []int64{}}}
	log := cmp.Or(cfg.Logger, slog.Default()).With("component", "rebuild", "campaign", id)
	for _, step := range []func(context.Context) error{r.readLedger, r.checkCommitment, r.check, r.freeze, r.fence, r.read, r.decide, r.write, r.activate} {
		if err := step(ctx); err != nil {
			if errors.Is(err, ErrHealthy) {
				log.Info("campaign looks healthy: nothing rebuilt")
				return r.rep, err
			}
			return nil, fmt.Errorf("rebuild %s: %w", id, err)
		}
	}
	r.rep.log(log)
	return r.rep, nil
}

// log tells what the rebuild did: what it restored, then, as warnings,
// what it held out and what it did not follow, and its notes.
func (rep *Report) log(log *slog.Logger) {
	log.Info("campaign rebuilt", "state", rep.State, "shards", rep.Shards, "shards_survived", rep.ShardsSurvived,
		"restored_claims", rep.RestoredClaims, "to_settle", rep.ToSettle, "restored_pool", rep.RestoredPool,
		"ledger_fence", rep.LedgerFence, "paused", rep.Paused)
	if rep.Quarantined > 0 || rep.Unrecoverable > 0 || rep.Released > 0 {
		log.Warn("packets held out of the pools (refunded with the campaign) or released", "quarantined", rep.Quarantined,
			"quarantined_cents", rep.QuarantinedCents, "unrecoverable", rep.Unrecoverable, "unrecoverable_cents", rep.UnrecoverableCents,
			"released", rep.Released, "released_cents", rep.ReleasedCents)
	}
	if len(rep.Conflicts) > 0 {
		log.Warn("records not followed", "conflicts", rep.ConflictCount, "first", rep.Conflicts[0])
	}
	for _, n := range rep.Notes {
		log.Info("rebuild note", "note", n)
	}
}

// newToken names one rebuild.
func newToken() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
