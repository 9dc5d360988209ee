package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/client"
	"github.com/hongbao/hongbao/httpapi"
)

// campaignCmd is "hongbao campaign ACTION [ID] [USER...]": an operator's
// day with the campaigns of a running serve, through package client, for
// red packet and discount campaigns alike: create, list and close them,
// the brakes on one (pause, resume, block, unblock) and what they read
// (status, blocked).
type campaignCmd struct {
	base
	apiURL, dataDir, kind string
	keyFiles              fileList
	asJSON                bool
	timeout               time.Duration
	action, id            string
	users                 []string
	create                createFlags
	api                   *client.Client
}

func newCampaignCmd(env *IO) command { return &campaignCmd{base: base{env: env}} }

const campaignUsage = `Usage: hongbao campaign ACTION [ID] [USER...] [flags]

Acts on the campaigns of a running serve, with an admin key:

  create                 creates a campaign from the flags below or --spec FILE; prints it
  list                   every campaign not yet settled (live, and closed until refunded)
  status ID              its state, where its money is, paused or not, users blocked
  close ID               closes it now (before it opens: cancels it); answers the status
  pause ID               grabs (new orders) answer "paused" until resumed; answers the status
  resume ID              grabs (new orders) are decided again; answers the status
  block ID USER...       the users' grabs (new orders) answer "blocked"
  unblock ID USER...     the users may grab (order) again
  blocked ID             the users blocked, since when

ID is a red packet or a discount campaign (--kind, default: ask the API);
list shows both kinds unless --kind names one. create makes a red packet
rain from --total and --count, a discount campaign from --budget and
--quota (--kind, default: the flags given tell), or sends --spec FILE, the
API's create body as JSON, as it is. A create carries an Idempotency-Key
(--idempotency-key, else one drawn and printed): the same create run again
with it answers the same campaign instead of creating a second one.
The admin key comes from --admin-key-file, else the environment variable
HONGBAO_ADMIN_KEY, else serve's default <data-dir>/admin.key; never from
the command line. Exit status 2: bad input, found before any call; 1: the
API refused or could not be reached (an unknown campaign, a wrong key).

Flags:`

// campaignOperands says what an action takes after its name.
type campaignOperands int

const (
	noOperand    campaignOperands = iota // list, create
	idOperand                            // status ID, ...
	usersOperand                         // block ID USER...
)

// campaignActions are the actions and their operands.
var campaignActions = map[string]campaignOperands{
	"create": noOperand, "list": noOperand,
	"status": idOperand, "close": idOperand, "pause": idOperand, "resume": idOperand, "blocked": idOperand,
	"block": usersOperand, "unblock": usersOperand,
}

// actionNames lists the actions for messages.
const actionNames = "create, list, status, close, pause, resume, block, unblock or blocked"

// The kinds --kind takes.
const (
	kindAuto      = "auto"
	kindRedPacket = "red-packet"
	kindDiscount  = "discount"
)

// adminKeyEnv holds the admin key itself, for a caller that keeps it in
// the environment rather than in a file.
const adminKeyEnv = "HONGBAO_ADMIN_KEY"

func (c *campaignCmd) declare(fs *flag.FlagSet) {
	fs.StringVar(&c.apiURL, "api", "http://127.0.0.1:8080", "base URL of the serve")
	fs.Var(&c.keyFiles, "admin-key-file", "file holding an admin key of the serve; repeatable as serve's (one config file names them for both), the first is used; default: $"+adminKeyEnv+", else <data-dir>/admin.key")
	fs.StringVar(&c.dataDir, "data-dir", defaultDataDir, "serve's data directory, for the default admin key")
	fs.StringVar(&c.kind, "kind", kindAuto, "the campaign's kind: red-packet, discount, or auto (an action on ID asks the API which it is; list lists both; create goes by its flags)")
	fs.BoolVar(&c.asJSON, "json", false, "print the API's answer as JSON")
	fs.DurationVar(&c.timeout, "timeout", 30*time.Second, "give up after this long, retries included")
	c.create.declare(fs)
}

func (c *campaignCmd) parseFlags(args []string) error {
	fs := newFlagSet("campaign", c.env)
	c.declare(fs)
	setUsage(fs, c.env, campaignUsage)
	operands, err := parseOperands(fs, c.env, args)
	if err != nil {
		return err
	}
	if len(operands) == 0 {
		fs.Usage()
	}
	if err := c.operands(operands); err != nil {
		return err
	}
	if c.kind != kindAuto && c.kind != kindRedPacket && c.kind != kindDiscount {
		return usageErrorf("--kind must be %s, %s or %s, not %q", kindRedPacket, kindDiscount, kindAuto, c.kind)
	}
	if c.timeout <= 0 {
		return usageErrorf("--timeout must be positive, not %s", c.timeout)
	}
	if err := c.create.check(c.action, given(fs), c.kind); err != nil {
		return err
	}
	if !setByUser(fs, c.env)["admin-key-file"] && strings.TrimSpace(c.env.Getenv(adminKeyEnv)) != "" {
		// The environment beats the config file: its key over the file's
		// admin-key-file.
		c.keyFiles = nil
	}
	key, err := c.adminKey()
	if err != nil {
		return err
	}
	c.api, err = client.New(c.apiURL, client.Options{Token: key, HTTPClient: c.env.HTTPClient, UserAgent: "hongbao-cli"})
	if err != nil {
		return usageErrorf("--api: %v", err)
	}
	return nil
}

// operands reads ACTION [ID] [USER...].
func (c *campaignCmd) operands(ops []string) error {
	if len(ops) == 0 {
		return usageErrorf("want an action: %s", actionNames)
	}
	c.action = ops[0]
	takes, ok := campaignActions[c.action]
	if !ok {
		return usageErrorf("unknown action %q: want %s", c.action, actionNames)
	}
	if takes == noOperand {
		if len(ops) > 1 {
			return usageErrorf("%s takes no operand, not %q", c.action, ops[1])
		}
		return nil
	}
	if len(ops) < 2 {
		return usageErrorf("%s: want a campaign id", c.action)
	}
	c.id, c.users = ops[1], ops[2:]
	if err := hongbao.ValidateCampaignID(c.id); err != nil {
		return usageErrorf("%s: %v", c.action, err)
	}
	switch {
	case takes == idOperand && len(c.users) > 0:
		return usageErrorf("%s takes only a campaign id, not %q", c.action, c.users[0])
	case takes == usersOperand && (len(c.users) == 0 || len(c.users) > hongbao.MaxBlockUsers):
		return usageErrorf("%s: give 1 to %d user ids after the campaign id", c.action, hongbao.MaxBlockUsers)
	}
	for _, u := range c.users {
		if err := hongbao.ValidateUserID(u); err != nil {
			return usageErrorf("%s: %v", c.action, err)
		}
	}
	return nil
}

// adminKey reads the admin key: --admin-key-file (the command line's or
// HONGBAO_ADMIN_KEY_FILE's over $HONGBAO_ADMIN_KEY over the config
// file's), else $HONGBAO_ADMIN_KEY, else serve's default file. Neither the variable's value nor a file's
// content is ever part of an error.
func (c *campaignCmd) adminKey() (string, error) {
	if len(c.keyFiles) > 0 {
		k, err := readSecretFile("admin-key-file", c.keyFiles[0])
		return string(k), err
	}
	if k := strings.TrimSpace(c.env.Getenv(adminKeyEnv)); k != "" {
		if len(k) < httpapi.MinSecretLen {
			return "", usageErrorf("%s: the key is %d bytes; an admin key has at least %d", adminKeyEnv, len(k), httpapi.MinSecretLen)
		}
		return k, nil
	}
	path := filepath.Join(c.dataDir, defaultAdminKeyFile)
	k, err := readSecretFile("admin-key-file", path)
	if err != nil {
		return "", usageErrorf("no admin key: give --admin-key-file FILE or set %s (the default, %s: %v)", adminKeyEnv, path, errors.Unwrap(err))
	}
	return string(k), nil
}

func (c *campaignCmd) run(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	switch c.action {
	case "create":
		return c.runCreate(ctx)
	case "list":
		return c.runList(ctx)
	}
	k, status, err := c.resolve(ctx)
	if err != nil {
		return err
	}
	var out any
	switch c.action {
	case "status":
		out = status
	case "close":
		out, err = k.close(ctx, c.id)
	case "pause":
		out, err = k.pause(ctx, c.id)
	case "resume":
		out, err = k.resume(ctx, c.id)
	case "block":
		out, err = k.block(ctx, c.id, c.users...)
	case "unblock":
		out, err = k.unblock(ctx, c.id, c.users...)
	case "blocked":
		out, err = k.blocked(ctx, c.id)
	}
	if err != nil {
		return c.apiError(k, err)
	}
	if c.asJSON {
		return json.NewEncoder(c.env.Stdout).Encode(out)
	}
	c.print(k.name, out)
	return nil
}

// resolve finds the campaign's kind: the one --kind names, or the kind
// whose status route knows the id. It answers the status when it read it
// (auto, or the status action).
func (c *campaignCmd) resolve(ctx context.Context) (kindCalls, any, error) {
	kinds := []kindCalls{redPacketCalls(c.api), discountCalls(c.api)}
	switch c.kind {
	case kindRedPacket:
		kinds = kinds[:1]
	case kindDiscount:
		kinds = kinds[1:]
	}
	if c.kind != kindAuto && c.action != "status" {
		return kinds[0], nil, nil
	}
	for _, k := range kinds {
		st, err := k.status(ctx, c.id)
		if err == nil {
			return k, st, nil
		}
		if !errors.Is(err, client.ErrNotFound) {
			return k, nil, c.apiError(k, err)
		}
	}
	if c.kind == kindAuto {
		return kindCalls{}, nil, fmt.Errorf("%s %s: no such campaign, neither a red packet nor a discount campaign", c.action, c.id)
	}
	return kindCalls{}, nil, c.apiError(kinds[0], client.ErrNotFound)
}

// apiError says which call the API refused; exit status 1.
func (c *campaignCmd) apiError(k kindCalls, err error) error {
	if errors.Is(err, client.ErrNotFound) {
		return fmt.Errorf("%s %s: no such %s campaign", c.action, c.id, k.name)
	}
	if errors.Is(err, client.ErrUnauthorized) || errors.Is(err, client.ErrForbidden) {
		return fmt.Errorf("%s %s: %w (is the key one of the serve's --admin-key-file keys?)", c.action, c.id, err)
	}
	return fmt.Errorf("%s %s: %w", c.action, c.id, err)
}

// kindCalls are the calls of one kind of campaign.
type kindCalls struct {
	name                         string // "red packet", "discount"
	status, close, pause, resume func(context.Context, string) (any, error)
	block, unblock               func(context.Context, string, ...string) (*client.BlockChange, error)
	blocked                      func(context.Context, string) (*client.BlockedList, error)
}

func redPacketCalls(api *client.Client) kindCalls {
	return kindCalls{name: "red packet", status: anyOf(api.Campaign), close: anyOf(api.CloseCampaign),
		pause: anyOf(api.PauseCampaign), resume: anyOf(api.ResumeCampaign),
		block: api.BlockUsers, unblock: api.UnblockUsers, blocked: api.BlockedUsers}
}

func discountCalls(api *client.Client) kindCalls {
	return kindCalls{name: "discount", status: anyOf(api.Discount), close: anyOf(api.CloseDiscount),
		pause: anyOf(api.PauseDiscount), resume: anyOf(api.ResumeDiscount),
		block: api.BlockDiscountUsers, unblock: api.UnblockDiscountUsers, blocked: api.DiscountBlockedUsers}
}

// anyOf makes a call answering a *T one answering any.
func anyOf[T any](f func(context.Context, string) (*T, error)) func(context.Context, string) (any, error) {
	return func(ctx context.Context, id string) (any, error) {
		v, err := f(ctx, id)
		if err != nil {
			return nil, err
		}
		return v, nil
	}
}

// print writes an answer for people.
func (c *campaignCmd) print(kind string, out any) {
	w := c.env.Stdout
	head := fmt.Sprintf("%s campaign %s", kind, c.id)
	switch v := out.(type) {
	case *client.CampaignStatus:
		fmt.Fprintf(w, "%s: %s, %s, %d users blocked\n", head, stateText(v.State, v.CloseReason), pauseText(v.Paused, v.PausedShards, v.Shards), v.BlockedUsers)
		c.printOvertaken(v.Overtaken, v.Paused)
		fmt.Fprintf(w, "  granted %d of %d packets (%s of %s), remaining %d (%s), refunded %s\n",
			v.GrantedCount, v.Count, hongbao.FormatCents(v.GrantedCents), hongbao.FormatCents(v.TotalCents),
			v.RemainingCount, hongbao.FormatCents(v.RemainingCents), hongbao.FormatCents(v.RefundedCents))
		printWindow(w, v.OpensAt, v.ClosesAt)
	case *client.DiscountStatus:
		fmt.Fprintf(w, "%s: %s, %s, %d users blocked\n", head, stateText(v.State, v.CloseReason), pauseText(v.Paused, v.PausedShards, v.Shards), v.BlockedUsers)
		c.printOvertaken(v.Overtaken, v.Paused)
		fmt.Fprintf(w, "  confirmed %d (%s), reserved %d (%s), remaining %d of %d (%s of %s), refunded %s\n",
			v.ConfirmedCount, hongbao.FormatCents(v.ConfirmedCents), v.ReservedCount, hongbao.FormatCents(v.ReservedCents),
			v.RemainingCount, v.Quota, hongbao.FormatCents(v.RemainingCents), hongbao.FormatCents(v.BudgetCents), hongbao.FormatCents(v.RefundedCents))
		printWindow(w, v.OpensAt, v.ClosesAt)
	case *client.BlockChange:
		if c.action == "block" {
			fmt.Fprintf(w, "%s: blocked %d users, %d of them not blocked before\n", head, len(c.users), v.Added)
		} else {
			fmt.Fprintf(w, "%s: unblocked %d users, %d of them blocked before\n", head, len(c.users), v.Removed)
		}
	case *client.BlockedList:
		fmt.Fprintf(w, "%s: %d users blocked\n", head, len(v.Users))
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		for _, u := range v.Users {
			fmt.Fprintf(tw, "  %s\tsince %s\n", u.User, u.Since.UTC().Format(time.RFC3339))
		}
		_ = tw.Flush()
	}
}

// printOvertaken says, under the answer of a pause or resume that one
// started later overtook, that the campaign is as that one wants, not as
// this one asked.
func (c *campaignCmd) printOvertaken(overtaken, paused bool) {
	if !overtaken {
		return
	}
	what := "not paused"
	if paused {
		what = "paused"
	}
	fmt.Fprintf(c.env.Stdout, "  overtaken: a pause or resume that started after this %s wrote first; the campaign is %s, as that one wants\n", c.action, what)
}

// stateText is a state, with why it closed.
func stateText(state, closeReason string) string {
	if closeReason == "" {
		return state
	}
	return fmt.Sprintf("%s (%s)", state, strings.ReplaceAll(closeReason, "_", " "))
}

// pauseText says whether a campaign is paused, and when a pause or resume
// stopped half way (the root's flag and the shards disagree).
func pauseText(paused bool, pausedShards, shards int) string {
	switch {
	case paused && pausedShards == shards:
		return "paused"
	case !paused && pausedShards == 0:
		return "not paused"
	}
	what := "not paused"
	if paused {
		what = "paused"
	}
	return fmt.Sprintf("%s but %d of %d shards paused (a pause or resume stopped half way: run it again)", what, pausedShards, shards)
}

func printWindow(w io.Writer, opens, closes time.Time) {
	fmt.Fprintf(w, "  opens %s, closes %s\n", opens.UTC().Format(time.RFC3339), closes.UTC().Format(time.RFC3339))
}
