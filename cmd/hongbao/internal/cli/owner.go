package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/ledger"
)

const ownerUsage = `Usage: hongbao owner --redis URL [--namespace NS] [--discount] ID
       hongbao owner --redis URL [--namespace NS] [--discount] ID --set NEW --from OLD --reason TEXT [--ledger DSN]

Prints the owner a campaign records: the identity of the ledger ("ledger-"
and 32 hex digits, hongbao migrate prints it) or of the webhook wallet
(settle --webhook-name) it settles into. A scheduler settles, refunds and
reaps only the campaigns it owns; another's are counted in
hongbao_settlement_foreign_total and never paid (docs/operations.md, Sharing
a Redis).

With --set, changes it, as an operator's explicit action: from --from (the
owner it records now; "" for none), which must match, to --set, recording
--reason, the previous owner and the time in the campaign. The scheduler of
the new owner settles what is left to settle from its next pass; what the
old one settled stays in its ledger. Stop the old owner's settlement
first: the change is refused (exit 1) while entries are delivered to it and
not acknowledged, since any it wrote would be settled again by the new owner
(--despite-pending overrides, for entries its ledger refused). With
--ledger, the campaign's terms recorded there (what a rebuild restores) get
the new owner too.

Flags:`

// ownerCmd is "hongbao owner": read or change the owner a campaign records.
type ownerCmd struct {
	base
	redis            redisFlags
	id, dsn          string
	kind             ownerKind
	asJSON           bool
	to, from, reason string
	fromSet, despite bool
	logFormat        string
	conn             *redisConn
	led              ledger.Ledger
	eng              *hongbao.Engine
}

func newOwnerCmd(env *IO) command { return &ownerCmd{base: base{env: env}} }

func (c *ownerCmd) parseFlags(args []string) error {
	fs := newFlagSet("owner", c.env)
	c.redis.declare(fs, "required", false)
	c.redis.declareNamespace(fs)
	discount := fs.Bool("discount", false, "ID is a discount campaign")
	fs.StringVar(&c.to, "set", "", "the new owner: a ledger's identity or a webhook wallet's name")
	fs.StringVar(&c.from, "from", "", "with --set: the owner the campaign records now (\"\" for none); the change is refused if it records another")
	fs.StringVar(&c.reason, "reason", "", "with --set: why, recorded in the campaign (required)")
	fs.StringVar(&c.dsn, "ledger", "", "with --set: the ledger that holds the campaign's terms, to record the new owner there too (sqlite:PATH or postgres://...)")
	fs.BoolVar(&c.despite, "despite-pending", false, "with --set: change it even while entries are delivered to the current owner's settlement and unacknowledged; any of them its ledger did write is paid twice (check with reconcile first)")
	fs.BoolVar(&c.asJSON, "json", false, "print the campaign's owner as JSON")
	declareLogFormat(fs, &c.logFormat)
	setUsage(fs, c.env, ownerUsage)
	operands, err := parseOperands(fs, c.env, args)
	if err != nil {
		return err
	}
	if err := checkLogFormat(c.logFormat); err != nil {
		return err
	}
	if len(operands) != 1 {
		return usageErrorf("give one campaign id")
	}
	c.id = operands[0]
	c.kind = ownerKinds[0]
	if *discount {
		c.kind = ownerKinds[1]
	}
	set := given(fs)
	c.fromSet = set["from"]
	if err := hongbao.ValidateCampaignID(c.id); err != nil {
		return usageErrorf("%v", err)
	}
	if c.to == "" {
		if c.fromSet || c.reason != "" || set["ledger"] || c.despite {
			return usageErrorf("--from, --reason, --ledger and --despite-pending go with --set")
		}
		// A ledger the config file or the environment names: reading the
		// owner needs none.
		c.dsn = ""
	} else {
		if err := hongbao.ValidateOwner(c.to); err != nil {
			return usageErrorf("--set: %v", err)
		}
		if !c.fromSet {
			return usageErrorf("--set needs --from, the owner the campaign records now (\"\" for none)")
		}
		if c.reason == "" {
			return usageErrorf("--set needs --reason")
		}
	}
	if err := c.redis.checkNamespace(); err != nil {
		return err
	}
	return c.redis.require()
}

func (c *ownerCmd) open(ctx context.Context) (err error) {
	if c.dsn != "" {
		if c.led, err = openExistingLedger(ctx, c.dsn); err != nil {
			return err
		}
		c.deferClose(func() { _ = c.led.Close() })
	}
	if c.conn, err = c.redis.dial(ctx); err != nil {
		return err
	}
	c.deferClose(c.conn.Close)
	cfg := hongbao.Config{Redis: c.conn.Client, Namespace: c.redis.ns, Logger: newLogger(c.env, c.logFormat)}
	if c.led != nil {
		// The ledger is here for its terms, not to give new campaigns an
		// owner: this engine creates none.
		cfg.Packets = c.led
	} else {
		cfg.WithoutLedger = true // it creates no campaign: nothing to record
	}
	c.eng, err = hongbao.New(cfg)
	return err
}

// ownerReport is what owner prints as JSON.
type ownerReport struct {
	Campaign string `json:"campaign"`
	Kind     string `json:"kind"`
	Owner    string `json:"owner"`
	Changed  bool   `json:"changed"`
}

// ownerKind is a kind of campaign as owner reads and changes it.
type ownerKind struct {
	name   string // the report's kind
	read   func(ctx context.Context, e *hongbao.Engine, id string) (string, error)
	change func(ctx context.Context, e *hongbao.Engine, id string, ch hongbao.OwnerChange) (string, error)
}

// ownerKinds are the kinds owner takes: red packet campaigns, and with
// --discount discount campaigns.
var ownerKinds = []ownerKind{
	{name: "red_packet",
		read: func(ctx context.Context, e *hongbao.Engine, id string) (string, error) {
			st, err := e.Status(ctx, id)
			return ownerOf(st, err, func(st *hongbao.Status) string { return st.Owner })
		},
		change: func(ctx context.Context, e *hongbao.Engine, id string, ch hongbao.OwnerChange) (string, error) {
			st, err := e.SetOwner(ctx, id, ch)
			return ownerOf(st, err, func(st *hongbao.Status) string { return st.Owner })
		}},
	{name: "discount",
		read: func(ctx context.Context, e *hongbao.Engine, id string) (string, error) {
			st, err := e.Discounts().Status(ctx, id)
			return ownerOf(st, err, func(st *hongbao.DiscountStatus) string { return st.Owner })
		},
		change: func(ctx context.Context, e *hongbao.Engine, id string, ch hongbao.OwnerChange) (string, error) {
			st, err := e.Discounts().SetOwner(ctx, id, ch)
			return ownerOf(st, err, func(st *hongbao.DiscountStatus) string { return st.Owner })
		}},
}

// ownerOf is the owner a status answered, or its error.
func ownerOf[S any](st *S, err error, owner func(*S) string) (string, error) {
	if err != nil {
		return "", err
	}
	return owner(st), nil
}

func (c *ownerCmd) run(ctx context.Context) error {
	rep := ownerReport{Campaign: c.id, Kind: c.kind.name}
	var err error
	if c.to == "" {
		rep.Owner, err = c.kind.read(ctx, c.eng, c.id)
	} else {
		ch := hongbao.OwnerChange{From: c.from, To: c.to, Reason: c.reason, DespitePending: c.despite}
		rep.Owner, err = c.kind.change(ctx, c.eng, c.id, ch)
		rep.Changed = err == nil
	}
	if errors.Is(err, hongbao.ErrCampaignNotFound) || errors.Is(err, hongbao.ErrOwner) || errors.Is(err, hongbao.ErrOwnerSettling) {
		return &exitError{code: 1, err: err}
	}
	if err != nil {
		return err
	}
	if c.asJSON {
		return json.NewEncoder(c.env.Stdout).Encode(rep)
	}
	owner := rep.Owner
	if owner == "" {
		owner = "(none: the first scheduler to settle it claims it)"
	}
	verb := "is owned by"
	if rep.Changed {
		verb = "is now owned by"
	}
	fmt.Fprintf(c.env.Stdout, "%s %s %s\n", c.id, verb, owner)
	return nil
}
