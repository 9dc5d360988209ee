package metrics_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/rueidis"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/internal/testenv"
	"github.com/hongbao/hongbao/ledger/open"
	"github.com/hongbao/hongbao/metrics"
	"github.com/hongbao/hongbao/scheduler"
	"github.com/hongbao/hongbao/settle"
)

// exampleClient connects to the tests' redis-server. In an application
// this is rueidis.NewClient with your own Redis address.
func exampleClient() rueidis.Client {
	srv, err := testenv.SharedServer()
	if err != nil {
		panic(err)
	}
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.Addr}, DisableCache: true})
	if err != nil {
		panic(err)
	}
	return c
}

// A service that embeds an engine and a scheduler registers their
// metrics on its own registry, and serves it at its own /metrics with
// promhttp.HandlerFor(reg, promhttp.HandlerOpts{}). The names are those
// hongbao's alerts and dashboard query.
func Example() {
	ctx := context.Background()
	client := exampleClient()
	defer client.Close()
	dir, _ := os.MkdirTemp("", "metrics-example")
	defer os.RemoveAll(dir)
	led, err := open.Open(ctx, "sqlite:"+filepath.Join(dir, "ledger.db"))
	if err != nil {
		panic(err)
	}
	defer led.Close()
	const ns = "metrics-example" // the embedder's deployment in its Redis

	eng, err := hongbao.New(hongbao.Config{Redis: client, Namespace: ns, Packets: led})
	if err != nil {
		panic(err)
	}
	sched, err := scheduler.New(scheduler.Config{Engine: eng, Settle: settle.Config{Redis: client, Namespace: ns, Ledger: led}})
	if err != nil {
		panic(err)
	}

	reg := prometheus.NewRegistry()
	engineMetrics := metrics.NewEngine(eng) // an observer of eng, beside any other
	defer engineMetrics.Close()
	reg.MustRegister(
		engineMetrics,
		metrics.NewScheduler(sched), // the lease, the parts, the settlement counters
		metrics.NewCampaigns(metrics.CampaignsConfig{ // pools and backlogs, read from Redis when scraped
			Campaigns: eng, Discounts: eng.Discounts(), Backlogs: settle.NewBacklogs(client, ns),
		}),
	)

	if err := sched.Start(ctx); err != nil {
		panic(err)
	}
	defer sched.Stop()
	c, err := eng.Create(ctx, hongbao.Spec{Total: 300, Count: 3})
	if err != nil {
		panic(err)
	}
	for _, user := range []string{"alice", "alice", "bob"} {
		if _, err := eng.Grab(ctx, c.ID, user); err != nil {
			panic(err)
		}
	}
	waitUntil(func() bool { return sched.IsLeader() && sched.Worker().Stats().Grants == 2 })

	show(reg, "hongbao_grabs_total", "hongbao_settlement_grants_total", "hongbao_scheduler_lease_held", "hongbao_scheduler_parts")
	// Output:
	// hongbao_grabs_total{outcome="already_granted"} 1
	// hongbao_grabs_total{outcome="granted"} 2
	// hongbao_scheduler_lease_held 1
	// hongbao_scheduler_parts 1
	// hongbao_settlement_grants_total 2
}

// waitUntil polls cond, for up to 10 seconds.
func waitUntil(cond func() bool) {
	for deadline := time.Now().Add(10 * time.Second); !cond() && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
}

// show prints the series of the named metrics whose value is not 0, in
// the text format's order.
func show(reg *prometheus.Registry, names ...string) {
	fams, err := reg.Gather()
	if err != nil {
		panic(err)
	}
	var lines []string
	for _, f := range fams {
		if !contains(names, f.GetName()) {
			continue
		}
		for _, m := range f.GetMetric() {
			v := m.GetCounter().GetValue() + m.GetGauge().GetValue() + m.GetUntyped().GetValue()
			if v == 0 {
				continue
			}
			var ls []string
			for _, l := range m.GetLabel() {
				ls = append(ls, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			name := f.GetName()
			if len(ls) > 0 {
				name += "{" + strings.Join(ls, ",") + "}"
			}
			lines = append(lines, fmt.Sprintf("%s %v", name, v))
		}
	}
	sort.Strings(lines)
	fmt.Println(strings.Join(lines, "\n"))
}

func contains(names []string, n string) bool {
	for _, x := range names {
		if x == n {
			return true
		}
	}
	return false
}
