package rebuild

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/rueidis"

	"github.com/hongbao/hongbao/internal/redisstore"
	"github.com/hongbao/hongbao/ledger"
)

// readLedger reads what the ledger knows of the campaign before anything
// is touched: that it is not settled, its packets, and its terms when
// recorded.
func (r *run) readLedger(ctx context.Context) error {
	l := r.cfg.Ledger
	t, err := l.Totals(ctx, r.id)
	if err != nil {
		return err
	}
	if t.RefundDone {
		return ErrSettled
	}
	err = l.Packets(ctx, r.id, func(p ledger.Packet) error {
		if p.Seq != int64(len(r.cents))+1 {
			return fmt.Errorf("%w: the ledger's packets skip from %d to %d", redisstore.ErrCorrupt, len(r.cents), p.Seq)
		}
		r.cents = append(r.cents, p.Cents)
		return nil
	})
	if errors.Is(err, ledger.ErrNoPackets) {
		return r.noPackets(ctx, t, err)
	}
	if err != nil {
		return err
	}
	r.terms, err = l.Terms(ctx, r.id)
	if errors.Is(err, ledger.ErrNoTerms) {
		return nil // the root's meta may hold them
	}
	return err
}

// noPackets says why the ledger holds no packets of the campaign
// (noneErr): the id is a discount campaign's (ErrDiscount), nothing knows
// it (ErrUnknown), or it was created without recording its packets.
func (r *run) noPackets(ctx context.Context, t ledger.Totals, noneErr error) error {
	dt, err := r.cfg.Ledger.Totals(ctx, ledger.DiscountCampaign(r.id))
	if err != nil {
		return err
	}
	ns := r.store.NS()
	rc := r.cfg.Redis
	disc, err := rc.Do(ctx, rc.B().Exists().Key(ns.DiscountShardKeys(r.id, 1, 0).Meta).Build()).AsInt64()
	if err != nil {
		return err
	}
	if dt.Funded > 0 || disc > 0 {
		return ErrDiscount
	}
	red, err := rc.Do(ctx, rc.B().Exists().Key(ns.CampaignKeys(r.id).Meta).Build()).AsInt64()
	if err != nil {
		return err
	}
	if t.Funded == 0 && red == 0 {
		return ErrUnknown
	}
	return fmt.Errorf("%w: without them nobody can say which packets exist (the campaign was created without recording its packets)", noneErr)
}

// check reads the root, settles the campaign's terms and layout, and
// looks for what is wrong; a campaign with nothing wrong is ErrHealthy
// unless forced. It writes nothing.
func (r *run) check(ctx context.Context) error {
	root, err := r.store.Status(ctx, r.store.NS().CampaignKeys(r.id))
	switch {
	case errors.Is(err, redisstore.ErrNoCampaign):
	case err != nil:
		return err
	default:
		r.rootMeta = root.Meta
	}
	switch m := r.rootMeta; {
	case m["state"] == "settled":
		return ErrSettled
	case m["state"] == "loading" && m["rebuild_token"] == "" && m["load_token"] != "":
		return ErrCreating
	}
	if err := r.resolveTerms(); err != nil {
		return err
	}
	r.shards = r.store.NS().Layout(r.id, r.terms.Shards)
	r.rep.Shards = r.terms.Shards
	problems, err := r.problems(ctx)
	if err != nil {
		return err
	}
	r.rep.Problems = problems
	if len(problems) == 0 && !r.cfg.Force {
		return ErrHealthy
	}
	return nil
}

// resolveTerms takes the campaign's terms from the root's meta when it
// holds them (the ledger's lost packets and an operator's close added),
// else from the ledger, and checks them against the packets.
func (r *run) resolveTerms() error {
	m := r.rootMeta
	if m["total"] != "" {
		// The ledger's own: what the meta does not hold (Lost) or holds
		// for every close, not an operator's alone (CloseReason, ClosedAt).
		t := redisstore.TermsOf(m)
		t.Lost, t.CloseReason, t.ClosedAt = r.terms.Lost, r.terms.CloseReason, r.terms.ClosedAt
		if t.Block <= 0 {
			t.Block = r.terms.Block
		}
		r.terms = t
	}
	if r.terms.Shards < 1 || r.terms.Shards > redisstore.MaxShards || r.terms.ClosesAt == 0 {
		return ErrNoTerms
	}
	var sum int64
	for _, c := range r.cents {
		sum += c
	}
	if r.terms.Count != int64(len(r.cents)) || r.terms.Total != sum {
		return fmt.Errorf("%w: the campaign has %d packets of %d cents, the ledger's packets are %d of %d cents",
			redisstore.ErrCorrupt, r.terms.Count, r.terms.Total, len(r.cents), sum)
	}
	return nil
}

// problems lists what is wrong with the campaign's keys, and where they
// disagree with the ledger.
func (r *run) problems(ctx context.Context) ([]string, error) {
	var out []string
	snaps := make([]redisstore.Snapshot, len(r.shards))
	var granted int64
	for k, keys := range r.shards {
		snap, err := r.store.Status(ctx, keys)
		if errors.Is(err, redisstore.ErrNoCampaign) {
			out = append(out, fmt.Sprintf("shard %d is gone", k))
			continue
		}
		if err != nil {
			return nil, err
		}
		snaps[k] = snap
		granted += snap.Int("granted_count")
		p, err := r.shardProblems(ctx, k, snap)
		if err != nil {
			return nil, err
		}
		out = append(out, p...)
	}
	if ok, err := r.store.Registered(ctx, redisstore.RedPacket, r.id); err != nil {
		return nil, err
	} else if !ok {
		out = append(out, "the campaign is not in the registry of live campaigns")
	}
	p, err := r.ledgerProblems(ctx, granted)
	return append(out, p...), err
}

// shardProblems checks one shard's counters against its contents.
func (r *run) shardProblems(ctx context.Context, k int, snap redisstore.Snapshot) ([]string, error) {
	keys := r.shards[k]
	if st := snap.Meta["state"]; st == "loading" {
		return []string{fmt.Sprintf("shard %d is frozen by a rebuild that did not finish", k)}, nil
	}
	var out []string
	claims, err := r.cfg.Redis.Do(ctx, r.cfg.Redis.B().Hlen().Key(keys.Claims).Build()).AsInt64()
	if err != nil {
		return nil, err
	}
	if g := snap.Int("granted_count"); claims != g {
		out = append(out, fmt.Sprintf("shard %d counts %d grants, its claims hold %d", k, g, claims))
	}
	want := snap.Int("base_count") + snap.Int("in_count") - snap.Int("out_count")
	if r.terms.Shards == 1 {
		want = snap.Int("count")
	}
	want -= snap.Int("granted_count") + snap.Int("lost_count")
	if snap.Meta["state"] != "settled" && snap.PoolLen != want {
		out = append(out, fmt.Sprintf("shard %d's pool holds %d packets, its counters say %d", k, snap.PoolLen, want))
	}
	if _, err := r.store.Group(ctx, keys); err != nil {
		out = append(out, fmt.Sprintf("shard %d's grants stream or its settle group is gone", k))
	}
	return out, nil
}

// ledgerProblems checks that Redis holds every grant the ledger holds,
// with the same packet, on the user's home shard.
func (r *run) ledgerProblems(ctx context.Context, granted int64) ([]string, error) {
	var out []string
	var missing, n int64
	rc := r.cfg.Redis
	var batch []ledger.Grant
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		cmds := make(rueidis.Commands, len(batch))
		for i, g := range batch {
			k := r.shards[redisstore.HomeShard(g.User, len(r.shards))]
			cmds[i] = rc.B().Hget().Key(k.Claims).Field(g.User).Build()
		}
		for i, res := range rc.DoMulti(ctx, cmds...) {
			v, err := res.ToString()
			if err != nil && !rueidis.IsRedisNil(err) {
				return err
			}
			if g := batch[i]; v != redisstore.FormatPacket(g.Seq, g.Cents) {
				missing++
				if missing <= 5 {
					out = append(out, fmt.Sprintf("the ledger gives %q packet %d; Redis's claim is %q", g.User, g.Seq, v))
				}
			}
		}
		batch = batch[:0]
		return nil
	}
	err := r.cfg.Ledger.Grants(ctx, r.id, func(g ledger.Grant) error {
		n++
		if batch = append(batch, g); len(batch) == 1000 {
			return flush()
		}
		return nil
	})
	if err == nil {
		err = flush()
	}
	if missing > 5 {
		out = append(out, fmt.Sprintf("%d more ledger grants Redis does not hold", missing-5))
	}
	if n > granted {
		out = append(out, fmt.Sprintf("the ledger holds %d grants, Redis counts %d", n, granted))
	}
	return out, err
}
