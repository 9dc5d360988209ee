// Command drill runs an operator's drill on the compose deployment
// (deploy/compose): it brings the stack up, sends a red packet rain and a
// discount payment rush through both API containers while a nemesis works
// through the stack's own processes (an API SIGKILLed, a rolling restart,
// the Redis master stopped and frozen so that Sentinel fails over,
// PostgreSQL restarted, the scheduler killed), records every call and its
// answer, and judges the history with Redis and the ledger at the end
// (package internal/history). Meanwhile it checks the Redis safety
// settings on the promoted and the restarted servers, readiness from the
// first moment, the scheduler's fencing tokens, and asks the stack's own
// Prometheus which alerts fire. It prints a JSON report and exits 1 when
// anything failed.
//
//	make drill-images && make drill
//	go run . -h   # (in deploy/drill) the flags
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// config is the drill's flags.
type config struct {
	composeFile, envFile, project, secrets string
	apis                                   []string
	prometheus                             string
	users, packets, workers                int
	faults                                 []string
	alerts                                 bool
	hold, readyProbe                       time.Duration
	keep, fresh                            bool
	report                                 string
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("drill", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.composeFile, "compose", "deploy/compose/compose.yaml", "the compose file")
	fs.StringVar(&c.envFile, "env-file", "deploy/drill/images.env", "the images to run (make drill-images writes it); empty: the compose file's defaults, the upstream images")
	fs.StringVar(&c.project, "project", "hongbao-drill", "the compose project: its containers, network and volumes are the drill's")
	fs.StringVar(&c.secrets, "secrets", "", "the secret files the compose file mounts (default: secrets/ beside the compose file, made by its make-secrets.sh when missing)")
	apis := fs.String("apis", "http://127.0.0.1:8081,http://127.0.0.1:8082", "the API containers' published addresses, comma-separated")
	fs.StringVar(&c.prometheus, "prometheus", "http://127.0.0.1:9091", "the stack's Prometheus")
	fs.IntVar(&c.users, "users", 3000, "shoppers: each grabs a packet and places one or two orders")
	fs.IntVar(&c.packets, "packets", 2000, "packets of the rain (1.00 each)")
	fs.IntVar(&c.workers, "workers", 16, "concurrent clients")
	faults := fs.String("faults", strings.Join(allFaults, ","), "the nemesis' faults, in order, comma-separated: "+strings.Join(allFaults, ", "))
	fs.BoolVar(&c.alerts, "alerts", true, "hold the ledger outage, the failover and the missing scheduler until their alerts fire, and require it")
	fs.DurationVar(&c.hold, "hold", 10*time.Second, "how long those faults last without -alerts")
	fs.DurationVar(&c.readyProbe, "ready-probe", 10*time.Second, "how long /readyz and a create are probed every 100 ms once up --wait returns")
	fs.BoolVar(&c.keep, "keep", false, "leave the stack up at the end (default: docker compose down -v)")
	fs.BoolVar(&c.fresh, "fresh", true, "start from empty volumes (down -v first)")
	fs.StringVar(&c.report, "report", "", "also write the JSON report to this file")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	c.apis = strings.Split(*apis, ",")
	for _, f := range strings.Split(*faults, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		known := false
		for _, k := range allFaults {
			known = known || k == f
		}
		if !known {
			return c, fmt.Errorf("-faults: unknown fault %q (know %s)", f, strings.Join(allFaults, ", "))
		}
		c.faults = append(c.faults, f)
	}
	if c.users < 10 || c.packets < 1 || c.workers < 2 {
		return c, fmt.Errorf("-users at least 10, -packets at least 1, -workers at least 2")
	}
	if c.secrets == "" {
		c.secrets = filepath.Join(filepath.Dir(c.composeFile), "secrets")
	}
	return c, nil
}

func main() {
	c, err := parseFlags(os.Args[1:], os.Stderr)
	if err != nil {
		if err == flag.ErrHelp {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "drill:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	d := &drill{cfg: c, out: os.Stderr}
	rep := d.run(ctx)
	b, _ := json.MarshalIndent(rep, "", "  ")
	fmt.Println(string(b))
	if c.report != "" {
		if err := os.WriteFile(c.report, append(b, '\n'), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "drill:", err)
		}
	}
	if !rep.Passed {
		fmt.Fprintln(os.Stderr, "drill: FAILED:", strings.Join(rep.Failures, "; "))
		os.Exit(1)
	}
	fmt.Fprintln(os.Stderr, "drill: passed")
}
