package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/ledger"
	"github.com/hongbao/hongbao/ledger/open"
	"github.com/hongbao/hongbao/settle"
	"github.com/hongbao/hongbao/webhook"
)

func init() {
	register("settle", "settle granted packets from Redis into the ledger (a worker)", runSettle)
	register("reconcile", "compare a campaign in Redis with the ledger, grant by grant", runReconcile)
}

func openLedger(ctx context.Context, dsn string) (ledger.Ledger, error) {
	if dsn == "" {
		return nil, usageErrorf("--ledger is required (sqlite:PATH or postgres://...)")
	}
	l, err := open.Open(ctx, dsn)
	if err != nil {
		return nil, fmt.Errorf("open ledger: %w", err)
	}
	return l, nil
}

func runSettle(ctx context.Context, io *IO, args []string) error {
	fs := newFlagSet("settle", io)
	redisURL := fs.String("redis", "", "Redis URL (required)")
	dsn := fs.String("ledger", "", "ledger: sqlite:PATH or postgres://... (this or --webhook is required)")
	hook := fs.String("webhook", "", "instead of a ledger, POST signed batches to this URL (a host's own wallet)")
	hookSecret := fs.String("webhook-secret-file", "", "file holding the webhook's HMAC secret (at least 32 bytes; surrounding whitespace is trimmed)")
	drain := fs.Bool("drain", false, "exit once nothing is pending or undelivered (closed campaigns are refunded and settled on the way)")
	redrive := fs.String("redrive", "", "first put the dead grants of this campaign back into its stream (after fixing their cause)")
	consumer := fs.String("consumer", "", "consumer name in the settle group; must be stable across restarts (default: host name)")
	campaigns := fs.String("campaigns", "", "comma-separated campaign ids to settle (default: every registered campaign)")
	asJSON := fs.Bool("json", false, "print the final counters as JSON")
	retention := fs.Duration("retention", 7*24*time.Hour, "how long a settled campaign's keys stay in Redis before they expire")
	if err := parseFlags(fs, io, args); err != nil {
		return err
	}
	if *redisURL == "" {
		return usageErrorf("--redis is required")
	}
	if *retention <= 0 {
		return usageErrorf("--retention must be positive, not %s", *retention)
	}
	var only []string
	for _, id := range strings.Split(*campaigns, ",") {
		if id = strings.TrimSpace(id); id == "" {
			continue
		}
		if err := hongbao.ValidateCampaignID(id); err != nil {
			return usageErrorf("--campaigns: %v", err)
		}
		only = append(only, id)
	}
	if *redrive != "" {
		if err := hongbao.ValidateCampaignID(*redrive); err != nil {
			return usageErrorf("--redrive: %v", err)
		}
	}
	cfg := settle.Config{Consumer: *consumer, Logger: slog.New(slog.NewTextHandler(io.Stderr, nil)), Only: only, Retention: *retention}
	switch {
	case *hook != "" && *dsn != "":
		return usageErrorf("give --ledger or --webhook, not both")
	case *hook != "":
		sink, err := openWebhook(*hook, *hookSecret)
		if err != nil {
			return err
		}
		cfg.Sink = sink
	default:
		l, err := openLedger(ctx, *dsn)
		if err != nil {
			return err
		}
		defer l.Close()
		cfg.Ledger = l
	}
	conn, err := dialRedis(ctx, *redisURL)
	if err != nil {
		return err
	}
	defer conn.Close()
	cfg.Redis = conn.Client
	w, err := settle.New(cfg)
	if err != nil {
		return err
	}
	if *redrive != "" {
		n, err := w.Redrive(ctx, *redrive)
		if err != nil {
			return err
		}
		fmt.Fprintf(io.Stderr, "redrive: %d dead entries of %s are back in its grants stream\n", n, *redrive)
	}
	start := time.Now()
	if *drain {
		_, err = w.Drain(ctx)
	} else {
		if err = w.Start(ctx); err == nil {
			<-ctx.Done()
			w.Stop()
			err = nil
		}
	}
	st := w.Stats()
	if *asJSON {
		_ = json.NewEncoder(io.Stdout).Encode(map[string]any{
			"grants": st.Grants, "replayed": st.Replayed, "entries": st.Entries, "conflicts": st.Conflicts,
			"malformed": st.Malformed, "deleted": st.Deleted, "refunds": st.Refunds, "failures": st.Failures,
			"seconds": time.Since(start).Seconds(),
		})
	} else {
		fmt.Fprintf(io.Stdout, "settled %d grants (%d replayed), %d entries, %d campaigns refunded; incidents: %d conflicts, %d malformed, %d deleted\n",
			st.Grants, st.Replayed, st.Entries, st.Refunds, st.Conflicts, st.Malformed, st.Deleted)
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

func openWebhook(url, secretFile string) (*webhook.Sink, error) {
	if secretFile == "" {
		return nil, usageErrorf("--webhook needs --webhook-secret-file")
	}
	b, err := os.ReadFile(secretFile)
	if err != nil {
		return nil, usageErrorf("--webhook-secret-file: %v", err)
	}
	sink, err := webhook.New(webhook.Config{URL: url, Secret: bytes.TrimSpace(b)})
	if err != nil {
		return nil, usageErrorf("--webhook: %v", err)
	}
	return sink, nil
}

func runReconcile(ctx context.Context, io *IO, args []string) error {
	fs := newFlagSet("reconcile", io)
	id := fs.String("campaign", "", "campaign id (required)")
	redisURL := fs.String("redis", "", "Redis URL (required)")
	dsn := fs.String("ledger", "", "ledger: sqlite:PATH or postgres://... (required)")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	if err := parseFlags(fs, io, args); err != nil {
		return err
	}
	if err := hongbao.ValidateCampaignID(*id); err != nil {
		return usageErrorf("--campaign: %v", err)
	}
	if *redisURL == "" {
		return usageErrorf("--redis is required")
	}
	l, err := openLedger(ctx, *dsn)
	if err != nil {
		return err
	}
	defer l.Close()
	conn, err := dialRedis(ctx, *redisURL)
	if err != nil {
		return err
	}
	defer conn.Close()
	rep, err := settle.Reconcile(ctx, conn.Client, l, *id)
	if err != nil {
		return err
	}
	printReconcile(io, rep, *asJSON)
	if !rep.OK {
		return &exitError{code: 1, err: fmt.Errorf("%d differences", rep.DifferenceCount)}
	}
	return nil
}

func printReconcile(io *IO, rep *settle.Report, asJSON bool) {
	if asJSON {
		_ = json.NewEncoder(io.Stdout).Encode(rep)
		return
	}
	p := func(f string, a ...any) { fmt.Fprintf(io.Stdout, f, a...) }
	p("Reconcile %s (%s), total %s\n", rep.Campaign, rep.State, hongbao.FormatCents(rep.TotalCents))
	p("  grants   Redis %d (%s)   ledger %d (%s)\n", rep.GrantedRedis, hongbao.FormatCents(rep.GrantedCentsRedis),
		rep.GrantedLedger, hongbao.FormatCents(rep.GrantedCentsLedger))
	p("  fund %s   refund %s   escrow %s   pool %s   dead %d   unsettled %d\n",
		hongbao.FormatCents(rep.FundCents), hongbao.FormatCents(rep.RefundCents), hongbao.FormatCents(rep.EscrowCents),
		hongbao.FormatCents(rep.PoolCents), rep.Dead, rep.Unsettled)
	if rep.OK {
		p("  OK: Redis and the ledger agree to the cent\n")
		return
	}
	p("  %d differences:\n", rep.DifferenceCount)
	for _, d := range rep.Differences {
		p("    - %s\n", d)
	}
}
