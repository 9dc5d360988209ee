package cli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/cmd/hongbao/internal/bench"
	"github.com/hongbao/hongbao/httpapi"
)

// benchHTTPRequested reports whether the bench command line asks for
// --mode http (on the command line or in HONGBAO_MODE).
func benchHTTPRequested(env *IO, args []string) bool { return benchMode(env, args) == "http" }

// benchMode is the --mode the bench command line asks for, on the command
// line or in HONGBAO_MODE ("" when neither says).
func benchMode(env *IO, args []string) string {
	for i, a := range args {
		switch {
		case (a == "--mode" || a == "-mode") && i+1 < len(args):
			return args[i+1]
		case strings.HasPrefix(a, "--mode="):
			return strings.TrimPrefix(a, "--mode=")
		case strings.HasPrefix(a, "-mode="):
			return strings.TrimPrefix(a, "-mode=")
		}
	}
	getenv := env.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	return getenv("HONGBAO_MODE")
}

// benchHTTPCmd is "hongbao bench --mode http": grabs against a running
// serve over HTTP, next to a trivial Go handler measured the same way. Two
// more modes serve wrk: --tokens-out only mints tokens, --trivial-listen
// only serves the trivial handler.
type benchHTTPCmd struct {
	base
	url, adminFile, campaign, total string
	trivialURL, tokensOut, listen   string
	secretFlag                      fileList
	users, packets, clicks, conc    int
	batch, rounds, servePID         int
	streams, window                 int
	gatewayFile, engineRedis        string
	trivial, asJSON, stream         bool
	o                               bench.HTTPOptions
}

const benchHTTPUsage = `Usage: hongbao bench --mode http --url URL --token-secret-file F [--admin-key-file F | --campaign ID] [flags]

Mints a token per user first, creates a campaign (or uses --campaign), lets
--concurrency clients grab for --users distinct users over HTTP, and reports
requests/s, latency percentiles and the outcome mix; then measures a trivial
Go handler the same way, in the same run, and reports the ratio. With
--batch and --engine-redis it measures the engine on the serve's Redis
beside the batch route instead; --rounds alternates the pair. With --batch
and --stream it measures the gateway's stream (GrabStream, gRPC over h2c)
beside the batch route, and the engine with --engine-redis, in every round.

Flags:`

func (b *benchHTTPCmd) declare(fs *flag.FlagSet) {
	fs.String("mode", "http", "http: measure a running serve over HTTP")
	fs.StringVar(&b.url, "url", "", "base URL of the serve to measure, e.g. http://127.0.0.1:8080 (required)")
	fs.Var(&b.secretFlag, "token-secret-file", "the serve's user token secret, as [kid=]PATH (required)")
	fs.StringVar(&b.adminFile, "admin-key-file", "", "an admin key of the serve, to create the campaign (or give --campaign)")
	fs.StringVar(&b.campaign, "campaign", "", "grab from this existing campaign instead of creating one")
	fs.IntVar(&b.users, "users", 20000, "distinct users (pre-minted tokens)")
	fs.IntVar(&b.packets, "packets", 10000, "packets of the campaign created")
	fs.StringVar(&b.total, "total", "", "total of the campaign created; default 1.00 per packet")
	fs.IntVar(&b.clicks, "clicks", 1, "grabs per user")
	fs.IntVar(&b.conc, "concurrency", 64, "requests in flight (one connection each)")
	fs.IntVar(&b.batch, "batch", 0, "send the grabs as a gateway does, this many users a request to POST /v1/campaigns/{id}/grabs (1..1000), under --gateway-key-file or the admin key; no tokens, no trivial handler; default 0: one grab a request")
	fs.StringVar(&b.gatewayFile, "gateway-key-file", "", "a gateway key of the serve, for --batch (the admin key opens the route too)")
	fs.IntVar(&b.rounds, "rounds", 1, "run the pair of measurements (serve and the trivial handler, or serve's batches and the engine) this many times, alternating which goes first, each round on a campaign of its own; the ratios are the rounds' median")
	fs.StringVar(&b.engineRedis, "engine-redis", "", "with --batch: also measure the engine in this process on this Redis (the serve's own) in every round, --batch x --concurrency goroutines grabbing once for each of --users, and report serve's users granted a second over the engine's grants/s")
	fs.BoolVar(&b.stream, "stream", false, "with --batch: also measure the gateway's GrabStream (gRPC over h2c) in every round, on a campaign of its own, beside the batch route (and the engine with --engine-redis), the three in turn; --batch grabs a message")
	fs.IntVar(&b.streams, "streams", 0, "with --stream: streams at once, a connection each (default --concurrency)")
	fs.IntVar(&b.window, "window", bench.DefaultStreamWindow, "with --stream: grabs a stream keeps in flight (at least --batch; serve holds 1000)")
	fs.IntVar(&b.servePID, "serve-pid", 0, "the serve's process id: read its CPU time (/proc/PID/stat) around each measurement and report its CPU per request")
	fs.BoolVar(&b.trivial, "trivial", true, "also measure a trivial Go handler, the same way (in this process, or at --trivial-url)")
	fs.StringVar(&b.trivialURL, "trivial-url", "", "measure the trivial handler at this URL, one started in a process of its own with --trivial-listen, like serve")
	fs.StringVar(&b.tokensOut, "tokens-out", "", "only mint --users tokens into this file, one a line (for wrk), and exit")
	fs.StringVar(&b.listen, "trivial-listen", "", "only serve the trivial handler on this address until interrupted (for wrk)")
	fs.BoolVar(&b.asJSON, "json", false, "print one JSON object instead of the report")
}

func (b *benchHTTPCmd) parseFlags(args []string) error {
	if _, err := b.parseCommand("bench", benchHTTPUsage, args, b.declare); err != nil {
		return err
	}
	if b.listen != "" {
		return nil
	}
	var secret httpapi.Secret
	switch {
	case len(b.secretFlag) > 0:
		secrets, err := tokenSecrets(b.secretFlag[:1])
		if err != nil {
			return err
		}
		secret = secrets[0]
	case b.batch == 0:
		return usageErrorf("--token-secret-file is required")
	}
	b.o = bench.HTTPOptions{
		URL: strings.TrimRight(b.url, "/"), Secret: secret, Campaign: b.campaign, Packets: b.packets,
		Users: b.users, Clicks: b.clicks, Concurrency: b.conc, Trivial: b.trivial,
		TrivialURL: b.trivialURL, Batch: b.batch, Rounds: b.rounds, EngineRedisURL: b.engineRedis,
		ServePID: b.servePID, Stream: b.stream, Streams: b.streams, Window: b.window,
	}
	if b.tokensOut != "" {
		if b.users < 1 {
			return usageErrorf("--users must be at least 1")
		}
		return nil
	}
	return b.checkRun()
}

// checkRun checks the options of a measurement.
func (b *benchHTTPCmd) checkRun() error {
	if b.campaign != "" {
		if err := hongbao.ValidateCampaignID(b.campaign); err != nil {
			return usageErrorf("--campaign: %v", err)
		}
	} else if b.adminFile != "" {
		k, err := readSecretFile("admin-key-file", b.adminFile)
		if err != nil {
			return err
		}
		b.o.AdminKey = string(k)
	}
	if b.gatewayFile != "" {
		k, err := readSecretFile("gateway-key-file", b.gatewayFile)
		if err != nil {
			return err
		}
		b.o.GatewayKey = string(k)
	}
	b.o.Total = int64(b.packets) * 100
	if b.total != "" {
		var err error
		if b.o.Total, err = centsFlag("total", b.total); err != nil {
			return err
		}
	}
	if err := b.o.Validate(); err != nil {
		return usageErrorf("%v", err)
	}
	if !b.asJSON {
		b.o.Progress = func(label string, n int64) bench.Progress { return startProgress(b.env, true, label, n) }
	}
	return nil
}

func (b *benchHTTPCmd) run(ctx context.Context) error {
	switch {
	case b.listen != "":
		return b.serveTrivial(ctx)
	case b.tokensOut != "":
		return b.mintTokens()
	}
	rep, err := bench.RunHTTP(ctx, b.o)
	if err != nil {
		return err
	}
	if b.asJSON {
		return json.NewEncoder(b.env.Stdout).Encode(rep)
	}
	p := func(format string, a ...any) { fmt.Fprintf(b.env.Stdout, format, a...) }
	for _, r := range []*bench.HTTPResult{rep.Serve, rep.Trivial} {
		if r == nil {
			continue
		}
		p("%-8s %d requests in %.2fs by %d clients: %.0f req/s   latency p50 %.2f ms  p90 %.2f ms  p99 %.2f ms  max %.2f ms\n",
			r.Target, r.Requests, r.Seconds, r.Concurrency, r.PerSec, r.P50ms, r.P90ms, r.P99ms, r.MaxMs)
		if r.Target == "serve" {
			p("         campaign %s, %d users; outcomes: %s; statuses: %s; transport errors %d\n",
				r.Campaign, r.Users, mix(r.Outcomes), mix(r.Statuses), r.Errors)
			if b.batch > 0 {
				p("         %d users a request: %.0f users granted a second\n", b.batch, r.GrantsSec)
			}
			if r.CPUSeconds > 0 {
				p("         serve CPU %.2fs: %.1f µs a request, %.1f µs a user\n", r.CPUSeconds, r.CPUUsPerRequest, r.CPUUsPerUser)
			}
		}
	}
	if r := rep.Stream; r != nil {
		p("stream   %d messages of %d grabs in %.2fs on %d streams: %.0f users granted a second   latency p50 %.2f ms  p99 %.2f ms\n",
			r.Requests, b.batch, r.Seconds, r.Concurrency, r.GrantsSec, r.P50ms, r.P99ms)
		p("         campaign %s, %d users; outcomes: %s; streams ended: %s\n", r.Campaign, r.Users, mix(r.Outcomes), mix(r.Statuses))
		if r.CPUSeconds > 0 {
			p("         serve CPU %.2fs: %.1f µs a user\n", r.CPUSeconds, r.CPUUsPerUser)
		}
	}
	if e := rep.Engine; e != nil {
		p("engine   %d grants in %.2fs by %d goroutines on the same Redis: %.0f grants/s   latency p50 %.2f ms  p99 %.2f ms; this process's CPU %.1f µs a grant\n",
			e.Granted, e.Seconds, e.Concurrency, e.GrantsPerSec, e.P50Ms, e.P99Ms, e.BenchUsPerGrant)
	}
	if len(rep.Rounds) > 1 {
		for i, r := range rep.Rounds {
			p("round %d (%s first): serve %.0f req/s", i+1, r.First, r.ServePerSec)
			switch {
			case r.Order != "":
				p(", %.0f users granted/s; stream %.0f users granted/s, stream / batch %.3f", r.ServeGrantsSec, r.StreamGrantsSec, r.StreamBatchRatio)
				if r.EngineGrantsSec > 0 {
					p("; engine %.0f grants/s, batch / engine %.3f, stream / engine %.3f", r.EngineGrantsSec, r.EngineRatio, r.StreamRatio)
				}
				p("\n")
			case r.TrivialPerSec > 0:
				p(", trivial %.0f req/s, ratio %.3f\n", r.TrivialPerSec, r.Ratio)
			case r.EngineGrantsSec > 0:
				p(", %.0f users granted/s; engine %.0f grants/s, ratio %.3f\n", r.ServeGrantsSec, r.EngineGrantsSec, r.EngineRatio)
			default:
				p("\n")
			}
		}
	}
	if rep.Ratio > 0 {
		p("serve / trivial handler: %.2f of the trivial handler's requests/s (median of %d rounds)\n", rep.Ratio, len(rep.Rounds))
	}
	if rep.StreamBatchRatio > 0 {
		p("serve stream / batches: %.2f of the batch route's users granted/s (median of %d rounds)\n", rep.StreamBatchRatio, len(rep.Rounds))
	}
	if rep.StreamRatio > 0 {
		p("serve stream / engine: %.2f of the engine's grants/s on the same Redis (median of %d rounds)\n", rep.StreamRatio, len(rep.Rounds))
	}
	if rep.EngineRatio > 0 {
		p("serve batches / engine: %.2f of the engine's grants/s on the same Redis (median of %d rounds)\n", rep.EngineRatio, len(rep.Rounds))
	}
	return nil
}

// serveTrivial serves the trivial handler on --trivial-listen until ctx
// ends.
func (b *benchHTTPCmd) serveTrivial(ctx context.Context) error {
	ln, err := net.Listen("tcp", b.listen)
	if err != nil {
		return fmt.Errorf("--trivial-listen: %w", err)
	}
	srv := &http.Server{Handler: bench.TrivialHandler(), ReadHeaderTimeout: 5 * time.Second}
	fmt.Fprintf(b.env.Stdout, "trivial handler listening on http://%s\n", ln.Addr())
	defer context.AfterFunc(ctx, func() { _ = srv.Close() })()
	if err := srv.Serve(ln); err != http.ErrServerClosed {
		return err
	}
	return nil
}

// mintTokens writes --users tokens to --tokens-out.
func (b *benchHTTPCmd) mintTokens() error {
	toks, err := bench.MintTokens(b.o.Secret, b.users, 2*time.Hour)
	if err != nil {
		return err
	}
	if err := os.WriteFile(b.tokensOut, []byte(strings.Join(toks, "\n")+"\n"), 0o600); err != nil {
		return err
	}
	fmt.Fprintf(b.env.Stdout, "%d tokens (valid 2h) in %s\n", len(toks), b.tokensOut)
	return nil
}

func mix(m map[string]int64) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}
