package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/internal/bench"
)

// benchHTTPRequested reports whether the bench command line asks for
// --mode http (on the command line or in HONGBAO_MODE).
func benchHTTPRequested(io *IO, args []string) bool {
	for i, a := range args {
		switch {
		case a == "--mode=http" || a == "-mode=http":
			return true
		case (a == "--mode" || a == "-mode") && i+1 < len(args):
			return args[i+1] == "http"
		case strings.HasPrefix(a, "--mode=") || strings.HasPrefix(a, "-mode="):
			return false
		}
	}
	getenv := io.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	return getenv("HONGBAO_MODE") == "http"
}

// runBenchHTTP is 'hongbao bench --mode http': grabs against a running
// serve over HTTP, next to a trivial Go handler measured the same way.
func runBenchHTTP(ctx context.Context, io *IO, args []string) error {
	fs := newFlagSet("bench", io)
	fs.String("mode", "http", "http: measure a running serve over HTTP")
	url := fs.String("url", "", "base URL of the serve to measure, e.g. http://127.0.0.1:8080 (required)")
	var secretFlag fileList
	fs.Var(&secretFlag, "token-secret-file", "the serve's user token secret, as [kid=]PATH (required)")
	adminFile := fs.String("admin-key-file", "", "an admin key of the serve, to create the campaign (or give --campaign)")
	campaign := fs.String("campaign", "", "grab from this existing campaign instead of creating one")
	users := fs.Int("users", 20000, "distinct users (pre-minted tokens)")
	packets := fs.Int("packets", 10000, "packets of the campaign created")
	total := fs.String("total", "", "total of the campaign created; default 1.00 per packet")
	clicks := fs.Int("clicks", 1, "grabs per user")
	concurrency := fs.Int("concurrency", 64, "requests in flight (one connection each)")
	trivial := fs.Bool("trivial", true, "also measure a trivial Go handler, the same way (in this process, or at --trivial-url)")
	trivialURL := fs.String("trivial-url", "", "measure the trivial handler at this URL, one started in a process of its own with --trivial-listen, like serve")
	tokensOut := fs.String("tokens-out", "", "only mint --users tokens into this file, one a line (for wrk), and exit")
	trivialListen := fs.String("trivial-listen", "", "only serve the trivial handler on this address until interrupted (for wrk)")
	asJSON := fs.Bool("json", false, "print one JSON object instead of the report")
	fs.Usage = func() {
		fmt.Fprintln(io.Stderr, `Usage: hongbao bench --mode http --url URL --token-secret-file F [--admin-key-file F | --campaign ID] [flags]

Mints a token per user first, creates a campaign (or uses --campaign), lets
--concurrency clients grab for --users distinct users over HTTP, and reports
requests/s, latency percentiles and the outcome mix; then measures a trivial
Go handler the same way, in the same run.

Flags:`)
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, io, args); err != nil {
		return err
	}
	if *trivialListen != "" {
		ln, err := net.Listen("tcp", *trivialListen)
		if err != nil {
			return fmt.Errorf("--trivial-listen: %w", err)
		}
		srv := &http.Server{Handler: bench.TrivialHandler(), ReadHeaderTimeout: 5 * time.Second}
		fmt.Fprintf(io.Stdout, "trivial handler listening on http://%s\n", ln.Addr())
		go func() { <-ctx.Done(); _ = srv.Close() }()
		if err := srv.Serve(ln); err != http.ErrServerClosed {
			return err
		}
		return nil
	}
	if len(secretFlag) == 0 {
		return usageErrorf("--token-secret-file is required")
	}
	secrets, err := tokenSecrets(secretFlag[:1])
	if err != nil {
		return err
	}
	if *tokensOut != "" {
		if *users < 1 {
			return usageErrorf("--users must be at least 1")
		}
		toks, err := bench.MintTokens(secrets[0], *users, 2*time.Hour)
		if err != nil {
			return err
		}
		if err := os.WriteFile(*tokensOut, []byte(strings.Join(toks, "\n")+"\n"), 0o600); err != nil {
			return err
		}
		fmt.Fprintf(io.Stdout, "%d tokens (valid 2h) in %s\n", len(toks), *tokensOut)
		return nil
	}
	o := bench.HTTPOptions{
		URL: strings.TrimRight(*url, "/"), Secret: secrets[0], Campaign: *campaign, Packets: *packets,
		Users: *users, Clicks: *clicks, Concurrency: *concurrency, Trivial: *trivial,
		TrivialURL: *trivialURL,
	}
	if *campaign != "" {
		if err := hongbao.ValidateCampaignID(*campaign); err != nil {
			return usageErrorf("--campaign: %v", err)
		}
	} else if *adminFile != "" {
		k, err := readSecretFile("admin-key-file", *adminFile)
		if err != nil {
			return err
		}
		o.AdminKey = string(k)
	}
	o.Total = int64(*packets) * 100
	if *total != "" {
		if o.Total, err = hongbao.ParseCents(*total); err != nil {
			return usageErrorf("--total: %v", err)
		}
	}
	if err := o.Validate(); err != nil {
		return usageErrorf("%v", err)
	}
	if !*asJSON {
		o.Progress = func(label string, n int64) bench.Progress { return startProgress(io, true, label, n) }
	}
	rep, err := bench.RunHTTP(ctx, o)
	if err != nil {
		return err
	}
	if *asJSON {
		return json.NewEncoder(io.Stdout).Encode(rep)
	}
	p := func(format string, a ...any) { fmt.Fprintf(io.Stdout, format, a...) }
	for _, r := range []*bench.HTTPResult{rep.Serve, rep.Trivial} {
		if r == nil {
			continue
		}
		p("%-8s %d requests in %.2fs by %d clients: %.0f req/s   latency p50 %.2f ms  p90 %.2f ms  p99 %.2f ms  max %.2f ms\n",
			r.Target, r.Requests, r.Seconds, r.Concurrency, r.PerSec, r.P50ms, r.P90ms, r.P99ms, r.MaxMs)
		if r.Target == "serve" {
			p("         campaign %s, %d users; outcomes: %s; statuses: %s; transport errors %d\n",
				r.Campaign, r.Users, mix(r.Outcomes), mix(r.Statuses), r.Errors)
		}
	}
	if rep.Ratio > 0 {
		p("serve / trivial handler: %.2f of the trivial handler's requests/s\n", rep.Ratio)
	}
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
