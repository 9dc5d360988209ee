package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/client"
	"github.com/hongbao/hongbao/split"
)

// createFlags are the flags of "hongbao campaign create": a spec in
// flags, or --spec FILE, the API's create body.
type createFlags struct {
	total, budget, min, max, perUserAmount string
	count, quota, shards, perUserCount     int
	perUserUnlimited                       bool
	hold                                   time.Duration
	split, opens, closes, funding, seed    string
	specFile, key                          string

	names []string // the flags above, which only create takes

	// What check made of them: the kind, and the spec to send.
	kind     string
	campaign client.CampaignSpec
	discount client.DiscountSpec
	body     json.RawMessage // --spec's
}

func (f *createFlags) declare(fs *flag.FlagSet) {
	str := func(p *string, name, usage string) {
		fs.StringVar(p, name, "", usage)
		f.names = append(f.names, name)
	}
	num := func(p *int, name, usage string) {
		fs.IntVar(p, name, 0, usage)
		f.names = append(f.names, name)
	}
	str(&f.total, "total", "create, red packet: the amount to hand out, as 100.00")
	num(&f.count, "count", "create, red packet: the number of packets")
	str(&f.split, "split", "create, red packet: double-average (default), line-cut or fixed")
	str(&f.budget, "budget", "create, discount: the amount to spend, as 100.00")
	num(&f.quota, "quota", "create, discount: the number of discounts")
	num(&f.perUserCount, "per-user-count", "create, discount: the most discounts one user holds (default 1 unless another limit is given)")
	str(&f.perUserAmount, "per-user-amount", "create, discount: the most one user's discounts add up to")
	fs.BoolVar(&f.perUserUnlimited, "per-user-unlimited", false, "create, discount: no per-user limit")
	fs.DurationVar(&f.hold, "hold", 0, "create, discount: how long a reservation waits for its confirm (default 5m)")
	f.names = append(f.names, "per-user-unlimited", "hold")
	str(&f.min, "min", "create: the smallest packet (discount), as 0.50; default 0.01")
	str(&f.max, "max", "create: the largest packet (discount), as 5.00; default no limit (a discount campaign's: its budget)")
	num(&f.shards, "shards", "create: the groups of Redis keys the campaign spreads over (default 1)")
	str(&f.opens, "opens", "create: when it opens, RFC 3339 (default now)")
	str(&f.closes, "closes", "create: when it closes, RFC 3339 (default 24h after opening)")
	str(&f.funding, "funding", "create: the funding account (default platform)")
	str(&f.seed, "seed", "create: the seed of the amounts (default random; an operator secret)")
	str(&f.specFile, "spec", "create: a file holding the API's create body (JSON), sent as it is, instead of the flags")
	str(&f.key, "idempotency-key", "create: the create's Idempotency-Key (default: one drawn, and printed)")
}

// redPacketOnly and discountOnly are the spec flags of one kind.
var (
	redPacketOnly = []string{"total", "count", "split"}
	discountOnly  = []string{"budget", "quota", "per-user-count", "per-user-amount", "per-user-unlimited", "hold"}
)

// check refuses create's flags on another action, and for create makes
// the spec: every check that needs no call, so bad input exits 2 before
// any.
func (f *createFlags) check(action string, given map[string]bool, kind string) error {
	if action != "create" {
		for _, n := range f.names {
			if given[n] {
				return usageErrorf("--%s is a flag of create, not of %s", n, action)
			}
		}
		return nil
	}
	if f.key == "" {
		b := make([]byte, 16)
		_, _ = rand.Read(b)
		f.key = "cli-" + hex.EncodeToString(b)
	}
	if len(f.key) > 200 || strings.IndexFunc(f.key, func(r rune) bool { return r < 0x21 || r > 0x7e }) >= 0 {
		return usageErrorf("--idempotency-key: 1 to 200 printable ASCII characters without spaces")
	}
	if f.specFile != "" {
		return f.fromFile(kind)
	}
	set := f.setFlags()
	f.kind = kind
	if kind == kindAuto {
		rp, d := anySet(set, redPacketOnly), anySet(set, discountOnly)
		switch {
		case rp != "" && d != "":
			return usageErrorf("create: --%s is a red packet rain's, --%s a discount campaign's: give the flags of one (or --kind)", rp, d)
		case d != "":
			f.kind = kindDiscount
		case rp != "":
			f.kind = kindRedPacket
		default:
			return usageErrorf("create: give --total and --count (a red packet rain), --budget and --quota (a discount campaign), or --spec FILE")
		}
	}
	if f.kind == kindDiscount {
		if n := anySet(set, redPacketOnly); n != "" {
			return usageErrorf("create: --%s is not a discount campaign's", n)
		}
		return f.discountSpec()
	}
	if n := anySet(set, discountOnly); n != "" {
		return usageErrorf("create: --%s is not a red packet rain's", n)
	}
	return f.campaignSpec()
}

// setFlags names the spec flags that have a value, from the command line
// or the environment.
func (f *createFlags) setFlags() map[string]bool {
	return map[string]bool{
		"total": f.total != "", "count": f.count != 0, "split": f.split != "",
		"budget": f.budget != "", "quota": f.quota != 0, "per-user-count": f.perUserCount != 0,
		"per-user-amount": f.perUserAmount != "", "per-user-unlimited": f.perUserUnlimited, "hold": f.hold != 0,
		"min": f.min != "", "max": f.max != "", "shards": f.shards != 0, "opens": f.opens != "", "closes": f.closes != "",
		"funding": f.funding != "", "seed": f.seed != "",
	}
}

// anySet is the first of names set, or "".
func anySet(set map[string]bool, names []string) string {
	for _, n := range names {
		if set[n] {
			return n
		}
	}
	return ""
}

// fromFile reads --spec: a JSON object, sent as it is; its fields tell
// the kind when --kind does not.
func (f *createFlags) fromFile(kind string) error {
	for n, set := range f.setFlags() {
		if set {
			return usageErrorf("create: --spec FILE is the whole create body: not with --%s", n)
		}
	}
	b, err := os.ReadFile(f.specFile)
	if err != nil {
		return usageErrorf("--spec: %v", err)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(b, &fields); err != nil || fields == nil {
		return usageErrorf("--spec %s: not a JSON object (the API's create body)", f.specFile)
	}
	f.body, f.kind = b, kind
	if kind != kindAuto {
		return nil
	}
	has := func(names ...string) bool {
		for _, n := range names {
			if _, ok := fields[n]; ok {
				return true
			}
		}
		return false
	}
	rp, d := has("total", "total_cents", "count", "split"), has("budget", "budget_cents", "quota")
	switch {
	case rp == d:
		return usageErrorf("--spec %s: cannot tell a red packet rain (total, count) from a discount campaign (budget, quota): give --kind", f.specFile)
	case d:
		f.kind = kindDiscount
	default:
		f.kind = kindRedPacket
	}
	return nil
}

// cents reads an amount flag; "" is 0.
func cents(name, v string) (int64, error) {
	if v == "" {
		return 0, nil
	}
	c, err := hongbao.ParseCents(v)
	if err != nil {
		return 0, usageErrorf("--%s: %v", name, err)
	}
	return c, nil
}

// window reads --opens and --closes, RFC 3339 times. Not a duration
// from now: the same create run again (its replay) would ask for another
// time, and the API would take it for another campaign.
func (f *createFlags) window() (opens, closes time.Time, err error) {
	at := func(name, v string) (time.Time, error) {
		if v == "" {
			return time.Time{}, nil
		}
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			return time.Time{}, usageErrorf("--%s: want an RFC 3339 time, as 2026-01-02T15:04:05Z, not %q", name, v)
		}
		return t, nil
	}
	if opens, err = at("opens", f.opens); err == nil {
		closes, err = at("closes", f.closes)
	}
	return opens, closes, err
}

// common reads the flags both kinds take.
func (f *createFlags) common() (min, max int64, opens, closes time.Time, seed *uint64, err error) {
	if min, err = cents("min", f.min); err == nil {
		max, err = cents("max", f.max)
	}
	if err == nil {
		opens, closes, err = f.window()
	}
	if err == nil && f.seed != "" {
		s, perr := strconv.ParseUint(f.seed, 10, 64)
		if perr != nil {
			err = usageErrorf("--seed: want an unsigned integer, not %q", f.seed)
		}
		seed = &s
	}
	return min, max, opens, closes, seed, err
}

// campaignSpec makes the red packet spec and checks it as the engine
// would.
func (f *createFlags) campaignSpec() error {
	if f.total == "" || f.count == 0 {
		return usageErrorf("create: a red packet rain needs --total and --count")
	}
	total, err := cents("total", f.total)
	if err != nil {
		return err
	}
	min, max, opens, closes, seed, err := f.common()
	if err != nil {
		return err
	}
	spec := hongbao.Spec{Total: total, Count: f.count, Split: split.Algorithm(f.split), Min: min, Max: max,
		OpensAt: opens, ClosesAt: closes, Funding: f.funding, Seed: seed, Shards: f.shards}
	if err := spec.Validate(); err != nil {
		return usageErrorf("create: %v", err)
	}
	f.campaign = client.CampaignSpec{TotalCents: total, Count: f.count, Split: f.split, MinCents: min, MaxCents: max,
		OpensAt: opens, ClosesAt: closes, FundingAccount: f.funding, Seed: seed, Shards: f.shards, IdempotencyKey: f.key}
	return nil
}

// discountSpec makes the discount spec and checks it as the engine
// would.
func (f *createFlags) discountSpec() error {
	if f.budget == "" || f.quota == 0 {
		return usageErrorf("create: a discount campaign needs --budget and --quota")
	}
	if f.perUserUnlimited && (f.perUserCount != 0 || f.perUserAmount != "") {
		return usageErrorf("create: --per-user-unlimited, or --per-user-count and --per-user-amount, not both")
	}
	budget, err := cents("budget", f.budget)
	if err == nil && f.perUserCount < 0 {
		err = usageErrorf("--per-user-count must not be negative")
	}
	if err != nil {
		return err
	}
	perUser, err := cents("per-user-amount", f.perUserAmount)
	if err != nil {
		return err
	}
	min, max, opens, closes, seed, err := f.common()
	if err != nil {
		return err
	}
	spec := hongbao.DiscountSpec{Budget: budget, Quota: f.quota, Min: min, Max: max, PerUserCount: f.perUserCount,
		PerUserAmount: perUser, Shards: f.shards, Hold: f.hold, OpensAt: opens, ClosesAt: closes, Funding: f.funding, Seed: seed}
	if err := spec.Validate(); err != nil {
		return usageErrorf("create: %v", err)
	}
	f.discount = client.DiscountSpec{BudgetCents: budget, Quota: f.quota, MinCents: min, MaxCents: max,
		PerUserCount: f.perUserCount, PerUserAmountCents: perUser, PerUserUnlimited: f.perUserUnlimited,
		Shards: f.shards, Hold: client.Duration(f.hold), OpensAt: opens, ClosesAt: closes, FundingAccount: f.funding,
		Seed: seed, IdempotencyKey: f.key}
	return nil
}

// runCreate sends the create and prints the campaign.
func (c *campaignCmd) runCreate(ctx context.Context) error {
	f := &c.create
	var out any
	var err error
	name := "red packet"
	switch {
	case f.kind == kindDiscount && f.body != nil:
		name = "discount"
		out, err = c.api.CreateDiscountJSON(ctx, f.body, f.key)
	case f.kind == kindDiscount:
		name = "discount"
		out, err = c.api.CreateDiscount(ctx, f.discount)
	case f.body != nil:
		out, err = c.api.CreateCampaignJSON(ctx, f.body, f.key)
	default:
		out, err = c.api.CreateCampaign(ctx, f.campaign)
	}
	if err != nil {
		return createError(name, f.key, err)
	}
	if c.asJSON {
		return json.NewEncoder(c.env.Stdout).Encode(out)
	}
	printCreated(c.env.Stdout, out, f.key)
	return nil
}

// createError says what the API answered; when it may not have decided
// (no answer, an unknown outcome), how to find out without a second
// campaign.
func createError(name, key string, err error) error {
	var e *client.Error
	decided := errors.As(err, &e) && e.Status >= 400 && e.Status < 500 && !errors.Is(err, client.ErrInProgress)
	if decided {
		return fmt.Errorf("create %s campaign: %w", name, err)
	}
	return fmt.Errorf("create %s campaign: %w (run the same create again with --idempotency-key %s: "+
		"it answers the campaign if this one was created, and creates it once if not)", name, err, key)
}

// printCreated writes a created campaign for people.
func printCreated(w io.Writer, out any, key string) {
	switch v := out.(type) {
	case *client.Campaign:
		fmt.Fprintf(w, "red packet campaign %s: %s, %s in %d packets (%s), %s\n", v.ID, v.State,
			hongbao.FormatCents(v.TotalCents), v.Count, v.Split, plural(v.Shards, "shard"))
		printWindow(w, v.OpensAt, v.ClosesAt)
	case *client.Discount:
		fmt.Fprintf(w, "discount campaign %s: %s, %s over %d discounts of %s to %s, %s, hold %s, %s\n", v.ID, v.State,
			hongbao.FormatCents(v.BudgetCents), v.Quota, hongbao.FormatCents(v.MinCents), hongbao.FormatCents(v.MaxCents),
			perUserText(v), time.Duration(v.Hold), plural(v.Shards, "shard"))
		printWindow(w, v.OpensAt, v.ClosesAt)
	}
	fmt.Fprintf(w, "  idempotency key %s: the same create with --idempotency-key %s answers this campaign again\n", key, key)
}

// perUserText says what one user may hold of a discount campaign.
func perUserText(d *client.Discount) string {
	var limits []string
	if d.PerUserCount > 0 {
		limits = append(limits, fmt.Sprintf("%d", d.PerUserCount))
	}
	if d.PerUserAmountCents > 0 {
		limits = append(limits, hongbao.FormatCents(d.PerUserAmountCents))
	}
	if len(limits) == 0 {
		return "no per-user limit"
	}
	return "at most " + strings.Join(limits, " and ") + " per user"
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}
