package cli

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/settle"
)

// campaignOperand takes the campaign id given as an operand ("hongbao
// reconcile ID"), as --campaign does.
func (c *reconcileCmd) campaignOperand(operands []string) error {
	switch {
	case len(operands) == 0:
		return nil
	case len(operands) > 1:
		return usageErrorf("unexpected argument %q", operands[1])
	case c.id != "" && c.id != operands[0]:
		return usageErrorf("give the campaign once, as --campaign or as an operand")
	}
	c.id = operands[0]
	return nil
}

// webhookFlags checks the flags of reconcile --webhook: a red packet
// campaign, Redis and the webhook's secret, no ledger.
func (c *reconcileCmd) webhookFlags() error {
	switch {
	case c.dsn != "":
		return usageErrorf("give --ledger or --webhook, not both")
	case c.discount != "":
		return usageErrorf("--webhook reconciles red packet campaigns: a webhook settles no discount campaign")
	case c.hookSecret == "":
		return usageErrorf("--webhook needs --webhook-secret-file")
	}
	if err := hongbao.ValidateCampaignID(c.id); err != nil {
		return usageErrorf("--campaign: %v", err)
	}
	return c.redis.require()
}

// openSink opens the webhook, then Redis.
func (c *reconcileCmd) openSink(ctx context.Context) (err error) {
	if c.sink, err = openWebhook(c.hook, c.hookSecret, c.hookName, newLogger(c.env, c.logFormat)); err != nil {
		return err
	}
	if c.conn, err = c.redis.dial(ctx); err != nil {
		return err
	}
	c.deferClose(c.conn.Close)
	return nil
}

// sinkReport is what reconcile --webhook prints as JSON: the report, its
// ledger fields holding the wallet's numbers, and the sink it asked.
type sinkReport struct {
	Sink string `json:"sink"`
	*settle.Report
}

// reconcileWebhook asks the host's wallet what it holds of the campaign
// and compares that with Redis's counters (settle.ReconcileSink).
func (c *reconcileCmd) reconcileWebhook(ctx context.Context) error {
	rep, err := settle.ReconcileSink(ctx, c.conn.Client, c.redis.ns, c.sink, c.id)
	if err != nil {
		return err
	}
	name, err := c.sink.Identity(ctx)
	if err != nil {
		return err
	}
	if c.asJSON {
		_ = json.NewEncoder(c.env.Stdout).Encode(sinkReport{Sink: name, Report: rep})
	} else {
		fc := hongbao.FormatCents
		p := func(f string, a ...any) { fmt.Fprintf(c.env.Stdout, f, a...) }
		p("Reconcile %s (%s) against %s, total %s\n", rep.Campaign, rep.State, name, fc(rep.TotalCents))
		p("  grants   Redis %d (%s)   wallet %d (%s)\n", rep.GrantedRedis, fc(rep.GrantedCentsRedis),
			rep.GrantedLedger, fc(rep.GrantedCentsLedger))
		p("  fund %s   refund %s (Redis %s)   escrow %s   dead %d   unsettled %d\n",
			fc(rep.FundCents), fc(rep.RefundCents), fc(rep.RefundRedisCents), fc(rep.EscrowCents), rep.Dead, rep.Unsettled)
		printVerdict(c.env.Stdout, rep.OK, "  OK: Redis and the wallet agree to the cent",
			fmt.Sprintf("  %d differences:", rep.DifferenceCount), rep.Differences)
	}
	if !rep.OK {
		return &exitError{code: 1, err: fmt.Errorf("%d differences", rep.DifferenceCount)}
	}
	return nil
}
