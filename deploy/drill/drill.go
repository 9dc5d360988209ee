package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hongbao/hongbao/client/token"
	"github.com/hongbao/hongbao/internal/history"
	"github.com/hongbao/hongbao/internal/redisstore"
	"github.com/hongbao/hongbao/ledger"
	"github.com/hongbao/hongbao/ledger/open"
)

// The campaigns the drill creates: 1.00 per packet; the discount
// campaign's limits, as the checker needs them.
const (
	shards        = 2
	discountMax   = 500
	perUserCount  = 2
	perUserAmount = 600
	holdFor       = "30s"
)

// report is the drill's JSON report.
type report struct {
	Passed   bool              `json:"passed"`
	Failures []string          `json:"failures"`
	Started  string            `json:"started"`
	Seconds  float64           `json:"seconds"`
	Project  string            `json:"project"`
	Images   map[string]string `json:"images"`

	UpWaitSeconds float64     `json:"up_wait_seconds"`
	ReadyProbe    readyReport `json:"ready_probe"`

	Operations history.Report `json:"-"`
	Ops        opsReport      `json:"operations"`
	Faults     []faultReport  `json:"faults"`
	Violations []string       `json:"redis_safety_violations"`
	Fencing    fencingReport  `json:"fencing"`
	Reconcile  []string       `json:"reconcile"`

	TargetsSteady map[string]string `json:"targets_steady"`
	TargetsEnd    map[string]string `json:"targets_end"`
	AlertsAtEnd   map[string]string `json:"alerts_at_end"`
}

type opsReport struct {
	Total, OK, Refused, Unknown, Resolved int
	Anomalies                             int      `json:"anomalies"`
	AnomalyList                           []string `json:"anomaly_list,omitempty"`
	Users                                 int      `json:"users"`
	Packets                               int      `json:"packets"`
	Granted                               int      `json:"packets_granted"`
	GrantedCents                          int64    `json:"granted_cents"`
	RefundedCents                         int64    `json:"refunded_cents"`
	DiscountsConfirmed                    int      `json:"discounts_confirmed"`
	DiscountCents                         int64    `json:"discount_cents"`
	BadRefusals                           []string `json:"unexpected_refusals,omitempty"`
}

type readyReport struct {
	Probes         int `json:"probes"`
	Ready          int `json:"ready"`
	CreatesOK      int `json:"creates_ok"`
	CreatesRefused int `json:"creates_refused"`
	// CreatesUnanswered had no answer within 5 s (a loaded machine).
	CreatesUnanswered int      `json:"creates_unanswered"`
	ReadyRefusing     []string `json:"ready_and_refusing"`
}

type fencingReport struct {
	Elections  []string `json:"elections"`
	MaxBefore  int64    `json:"max_token_before_failover"`
	FirstAfter int64    `json:"first_token_after_failover"`
}

// drill is one run.
type drill struct {
	cfg config
	out io.Writer
	s   *stack
	rep report

	adminKey, payKey string
	secret           token.Secret
	g                *gateway
	p                *prom
}

func (d *drill) logf(format string, a ...any) {
	fmt.Fprintf(d.out, "%s %s\n", time.Now().UTC().Format("15:04:05"), fmt.Sprintf(format, a...))
}

func (d *drill) fail(format string, a ...any) {
	msg := fmt.Sprintf(format, a...)
	d.logf("FAIL: %s", msg)
	d.rep.Failures = append(d.rep.Failures, msg)
}

// run runs the drill; every failure is in the report.
func (d *drill) run(ctx context.Context) *report {
	start := time.Now()
	d.rep = report{Started: start.UTC().Format(time.RFC3339), Project: d.cfg.project, Failures: []string{},
		Violations: []string{}, ReadyProbe: readyReport{ReadyRefusing: []string{}}}
	defer func() {
		d.rep.Seconds = time.Since(start).Seconds()
		d.rep.Passed = len(d.rep.Failures) == 0
	}()
	d.s = &stack{file: d.cfg.composeFile, envFile: d.cfg.envFile, project: d.cfg.project,
		masterSet: "hongbao", sentinels: []string{"sentinel-1", "sentinel-2", "sentinel-3"}}
	if err := d.prepare(ctx); err != nil {
		d.fail("%v", err)
		return &d.rep
	}
	if !d.cfg.keep {
		defer func() {
			d.logf("docker compose down -v")
			if _, err := d.s.compose(context.Background(), "down", "-v", "--remove-orphans", "--timeout", "5"); err != nil {
				d.logf("down: %v", err)
			}
		}()
	}
	if err := d.up(ctx); err != nil {
		d.fail("%v", err)
		return &d.rep
	}
	d.probeReady(ctx)
	d.traffic(ctx)
	return &d.rep
}

// prepare checks the tools and the secrets, and reads the credentials
// the clients need.
func (d *drill) prepare(ctx context.Context) error {
	if _, err := run(ctx, "docker", "compose", "version"); err != nil {
		return fmt.Errorf("docker compose does not answer (make drill-images installs the plugin): %w", err)
	}
	if d.cfg.envFile != "" {
		if _, err := os.Stat(d.cfg.envFile); err != nil {
			return fmt.Errorf("%s: %w (make drill-images writes it; -env-file '' uses the upstream images)", d.cfg.envFile, err)
		}
	}
	// make-secrets.sh keeps the files that exist and makes the missing
	// ones (a secret a newer compose file names).
	if script := filepath.Join(filepath.Dir(d.cfg.composeFile), "make-secrets.sh"); d.cfg.secrets == filepath.Join(filepath.Dir(d.cfg.composeFile), "secrets") {
		d.logf("the secret files: %s", script)
		if _, err := run(ctx, "sh", script); err != nil {
			return err
		}
	}
	read := func(name string) (string, error) {
		b, err := os.ReadFile(filepath.Join(d.cfg.secrets, name))
		if err != nil {
			return "", fmt.Errorf("secret %s: %w (the drill reads the secrets as root)", name, err)
		}
		return strings.TrimSpace(string(b)), nil
	}
	var err error
	if d.adminKey, err = read("admin_key"); err != nil {
		return err
	}
	if d.payKey, err = read("payment_key"); err != nil {
		return err
	}
	sec, err := read("token_secret")
	if err != nil {
		return err
	}
	d.secret = token.Secret{Key: []byte(sec)}
	d.g = newGateway(d.cfg.apis)
	d.p = &prom{url: strings.TrimRight(d.cfg.prometheus, "/"), client: &http.Client{Timeout: 5 * time.Second}}
	d.rep.Images = map[string]string{}
	if d.cfg.envFile != "" {
		b, _ := os.ReadFile(d.cfg.envFile)
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(line, "#") {
				d.rep.Images[k] = v
			}
		}
	}
	return nil
}

// up starts every service but Grafana (prometheus depends on all the
// others) and waits for their health checks.
func (d *drill) up(ctx context.Context) error {
	if d.cfg.fresh {
		d.logf("docker compose down -v (a fresh stack)")
		if _, err := d.s.compose(ctx, "down", "-v", "--remove-orphans", "--timeout", "5"); err != nil {
			return err
		}
	}
	d.logf("docker compose up -d --wait prometheus (every service but Grafana)")
	t := time.Now()
	if _, err := d.s.compose(ctx, "up", "-d", "--wait", "--wait-timeout", "300", "prometheus"); err != nil {
		return err
	}
	d.rep.UpWaitSeconds = time.Since(t).Seconds()
	d.logf("up --wait returned after %.1f s", d.rep.UpWaitSeconds)
	return nil
}

// probeReady probes, from the moment up --wait returned, each API's
// /readyz and a create every 100 ms: an API that says ready must take a
// create.
func (d *drill) probeReady(ctx context.Context) {
	r := &d.rep.ReadyProbe
	var mu sync.Mutex
	var wg sync.WaitGroup
	probe := func(a *api, at time.Duration) {
		defer wg.Done()
		code, body := d.g.readyz(a)
		ccode, m, err := d.g.call(d.g.client, "POST", a.url+"/v1/campaigns", d.adminKey, `{"total":"0.01","count":1}`)
		mu.Lock()
		defer mu.Unlock()
		r.Probes++
		if code == http.StatusOK {
			r.Ready++
		}
		switch {
		case err == nil && ccode == http.StatusCreated:
			r.CreatesOK++
		case err != nil:
			// No answer within the client's 5 s: slow, not a refusal.
			r.CreatesUnanswered++
		default:
			r.CreatesRefused++
			if code == http.StatusOK {
				r.ReadyRefusing = append(r.ReadyRefusing, fmt.Sprintf("%s at +%.1fs: /readyz 200 (%s), create %d %v", a.url, at.Seconds(), body, ccode, m))
			}
		}
	}
	// Each API on its own: every 100 ms its /readyz, then a create; a
	// probe that takes longer delays the next (a tick is dropped), so the
	// probe never piles up calls on a slow machine.
	start := time.Now()
	for _, a := range d.g.apis {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := time.NewTicker(100 * time.Millisecond)
			defer t.Stop()
			for time.Since(start) < d.cfg.readyProbe && ctx.Err() == nil {
				wg.Add(1)
				probe(a, time.Since(start))
				<-t.C
			}
		}()
	}
	wg.Wait()
	d.logf("ready probe: %d probes, %d ready, %d creates taken, %d refused, %d unanswered, %d ready-and-refusing",
		r.Probes, r.Ready, r.CreatesOK, r.CreatesRefused, r.CreatesUnanswered, len(r.ReadyRefusing))
	if len(r.ReadyRefusing) > 0 {
		d.fail("an API said ready and refused a create %d times: %s", len(r.ReadyRefusing), r.ReadyRefusing[0])
	}
}

// admin calls the API as the operator, repeating while it answers 503.
func (d *drill) admin(ctx context.Context, method, path, body string, want int) (map[string]any, error) {
	var m map[string]any
	var code int
	var err error
	werr := waitFor(ctx, 60*time.Second, 250*time.Millisecond, func() bool {
		code, m, err = d.g.call(d.g.client, method, d.g.pick().url+path, d.adminKey, body)
		return err == nil && code == want
	})
	if werr != nil {
		return m, fmt.Errorf("%s %s: want %d, got %d %v %v", method, path, want, code, m, err)
	}
	return m, nil
}

// traffic runs the clients and the nemesis, then checks everything.
func (d *drill) traffic(ctx context.Context) {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go d.g.watch(wctx, 100*time.Millisecond)
	steady, err := d.p.waitTargetsUp(ctx, 90*time.Second)
	d.rep.TargetsSteady = steady
	if err != nil {
		d.fail("steady state: %v", err)
	}
	budget := int64(d.cfg.users) * 200
	quota := int64(d.cfg.users) * 8 / 10
	m, err := d.admin(ctx, "POST", "/v1/campaigns", fmt.Sprintf(`{"total":"%d.00","count":%d,"shards":%d}`, d.cfg.packets, d.cfg.packets, shards), http.StatusCreated)
	if err != nil {
		d.fail("create the rain: %v", err)
		return
	}
	id, _ := m["id"].(string)
	m, err = d.admin(ctx, "POST", "/v1/discounts", fmt.Sprintf(
		`{"budget_cents":%d,"quota":%d,"max":"%d.%02d","per_user_count":%d,"per_user_amount":"%d.%02d","shards":%d,"hold":%q}`,
		budget, quota, discountMax/100, discountMax%100, perUserCount, perUserAmount/100, perUserAmount%100, shards, holdFor), http.StatusCreated)
	if err != nil {
		d.fail("create the discount campaign: %v", err)
		return
	}
	did, _ := m["id"].(string)
	d.logf("campaigns: rain %s (%d packets), discounts %s (budget %d cents, quota %d)", id, d.cfg.packets, did, budget, quota)

	c := &clients{g: d.g, rec: history.NewRecorder(), secret: d.secret, pay: d.payKey, id: id, did: did,
		tokens: map[string]string{}, refused: map[string]int{}}
	c.setPhase("steady")
	w := newAlertWatch(d.p)
	w.setPhase("steady")
	go w.run(wctx)
	n := &nemesis{s: d.s, g: d.g, c: c, w: w, alerts: d.cfg.alerts, hold: d.cfg.hold, logf: d.logf}

	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); c.workload(d.cfg.users, d.cfg.workers, stop) }()
	// The faults begin once the rain is under way.
	_ = waitFor(ctx, 60*time.Second, 100*time.Millisecond, func() bool { return c.answered.Load() >= 200 })
	for _, f := range d.cfg.faults {
		if ctx.Err() != nil {
			break
		}
		fr := n.run(ctx, f)
		if err := n.settle(ctx); err != nil && fr.Error == "" {
			fr.Error = err.Error()
		}
		d.rep.Faults = append(d.rep.Faults, fr)
		if fr.Error != "" {
			d.fail("fault %s: %s", f, fr.Error)
		}
		if fr.Expected != "" && !contains(fr.AlertsFiring, fr.Expected) {
			d.fail("fault %s: alert %s did not fire (firing %v, pending %v)", f, fr.Expected, fr.AlertsFiring, fr.AlertsPending)
		}
		if f == "rolling-restart" && fr.Refused > 0 {
			d.fail("the rolling restart refused %d connections", fr.Refused)
		}
		d.logf("  %d calls answered so far", c.answered.Load())
	}
	close(stop)
	d.logf("faults done; the clients finish their users")
	wg.Wait()
	d.rep.Violations = append(d.rep.Violations, n.violations...)
	for _, v := range n.violations {
		d.fail("redis safety: %s", v)
	}

	d.logf("resolving: every user reads their packet back, open orders driven to their end")
	c.resolve(d.cfg.users, d.cfg.workers)
	d.finish(ctx, c, id, did, budget, quota)
	d.checkFencing(ctx, n.failoverAt)
	d.reconcile(ctx, id, did)
	d.endState(ctx)
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// finish waits for the abandoned holds to return, closes both campaigns,
// waits for them to settle, and judges the history.
func (d *drill) finish(ctx context.Context, c *clients, id, did string, budget, quota int64) {
	var dst map[string]any
	err := waitFor(ctx, 3*time.Minute, time.Second, func() bool {
		var err error
		dst, err = d.admin(ctx, "GET", "/v1/discounts/"+did, "", http.StatusOK)
		n, _ := dst["reserved_count"].(float64)
		return err == nil && n == 0
	})
	if err != nil {
		d.fail("abandoned holds not returned within 3 minutes: %v", dst)
	} else {
		d.logf("every abandoned hold returned (reserved_count 0)")
	}
	if _, err := d.admin(ctx, "POST", "/v1/campaigns/"+id+"/close", "", http.StatusOK); err != nil {
		d.fail("close the rain: %v", err)
	}
	if _, err := d.admin(ctx, "POST", "/v1/discounts/"+did+"/close", "", http.StatusOK); err != nil {
		d.fail("close the discount campaign: %v", err)
	}
	settled := func(path string) (bool, map[string]any) {
		var st map[string]any
		err := waitFor(ctx, 3*time.Minute, time.Second, func() bool {
			st, _ = d.admin(ctx, "GET", path, "", http.StatusOK)
			return st["state"] == "settled"
		})
		return err == nil, st
	}
	ok1, st := settled("/v1/campaigns/" + id)
	ok2, dst := settled("/v1/discounts/" + did)
	if !ok1 {
		d.fail("the rain did not settle within 3 minutes: %v", st)
	}
	if !ok2 {
		d.fail("the discount campaign did not settle within 3 minutes: %v", dst)
	}
	d.logf("both campaigns settled; reading Redis and the ledger")

	ops := c.rec.Ops()
	final, err := d.readFinal(ctx, ops, id, did, budget, quota, dst)
	if err != nil {
		d.fail("read the final state: %v", err)
		return
	}
	final.Packets[0].Settled, final.Discounts[0].Settled = ok1, ok2
	rep := history.Check(ops, final, 60*time.Second)
	counts := history.Counts(ops)
	o := &d.rep.Ops
	o.Total, o.OK, o.Refused, o.Unknown, o.Resolved = rep.Ops, counts[history.OK], counts[history.Fail], rep.Unknown, rep.Resolved
	o.Anomalies = len(rep.Anomalies)
	for i, a := range rep.Anomalies {
		if i == 50 {
			break
		}
		o.AnomalyList = append(o.AnomalyList, a.String())
	}
	o.Users, o.Packets = d.cfg.users, d.cfg.packets
	o.Granted = len(final.Packets[0].Claims)
	for _, g := range final.Packets[0].Grants {
		o.GrantedCents += g.Cents
	}
	o.RefundedCents = final.Packets[0].Refunded
	o.DiscountsConfirmed = len(final.Discounts[0].Confirmed)
	for _, x := range final.Discounts[0].Confirmed {
		o.DiscountCents += x.Cents
	}
	o.BadRefusals = c.badFails
	d.logf("history: %s", rep)
	if !rep.OK() {
		d.fail("the history checker found %d anomalies", len(rep.Anomalies))
	}
	if len(c.badFails) > 0 {
		d.fail("%d calls refused with an unexpected 4xx: %s", len(c.badFails), c.badFails[0])
	}
	if rep.Unknown == 0 && len(d.cfg.faults) > 0 {
		d.fail("no call ended unknown: the faults met no traffic")
	}
	if want := min(d.cfg.packets, d.cfg.users); o.Granted != want {
		d.fail("%d packets granted, want %d", o.Granted, want)
	}
}

// readFinal reads the claims from the Redis master and the ledger's side
// of both campaigns, and every user's balance.
func (d *drill) readFinal(ctx context.Context, ops []history.Op, id, did string, budget, quota int64, dst map[string]any) (history.Final, error) {
	var f history.Final
	master, err := d.s.master(ctx)
	if err != nil {
		return f, err
	}
	claims := map[string]history.Packet{}
	for k := range shards {
		out, err := d.s.redisCLI(ctx, master, "HGETALL", redisstore.Default.ShardKeys(id, shards, k).Claims)
		if err != nil {
			return f, err
		}
		lines := strings.Split(out, "\n")
		if len(lines)%2 != 0 {
			return f, fmt.Errorf("HGETALL of shard %d: %d lines", k, len(lines))
		}
		for i := 0; i+1 < len(lines); i += 2 {
			seq, cents, ok := strings.Cut(lines[i+1], ":")
			p := history.Packet{}
			var e1, e2 error
			p.Seq, e1 = strconv.ParseInt(seq, 10, 64)
			p.Cents, e2 = strconv.ParseInt(cents, 10, 64)
			if !ok || e1 != nil || e2 != nil {
				return f, fmt.Errorf("claim %q of %s", lines[i+1], lines[i])
			}
			claims[lines[i]] = p
		}
	}
	ip, err := d.s.ip(ctx, "postgres")
	if err != nil {
		return f, err
	}
	pw, err := os.ReadFile(filepath.Join(d.cfg.secrets, "postgres_password"))
	if err != nil {
		return f, err
	}
	l, err := open.OpenExisting(ctx, fmt.Sprintf("postgres://hongbao:%s@%s:5432/hongbao?sslmode=disable", strings.TrimSpace(string(pw)), ip))
	if err != nil {
		return f, fmt.Errorf("open the ledger (an image built from another version than this drill? make drill-images rebuilds it): %w", err)
	}
	defer l.Close()
	c := history.Campaign{ID: id, Total: int64(d.cfg.packets) * 100, Claims: claims}
	if err := l.Grants(ctx, id, func(g ledger.Grant) error {
		c.Grants = append(c.Grants, history.Grant{User: g.User, Seq: g.Seq, Cents: g.Cents})
		return nil
	}); err != nil {
		return f, err
	}
	tot, err := l.Totals(ctx, id)
	if err != nil {
		return f, err
	}
	c.Funded, c.Refunded = tot.Funded, tot.Refunded
	dc := history.DiscountCampaign{ID: did, Budget: budget, Quota: quota, Max: discountMax, PerUserCount: perUserCount, PerUserAmount: perUserAmount, RedisConfirmed: -1}
	if n, ok := dst["confirmed_count"].(float64); ok {
		cents, _ := dst["confirmed_cents"].(float64)
		dc.RedisConfirmed, dc.RedisSumConf = int64(n), int64(cents)
	}
	if err := l.Discounts(ctx, ledger.DiscountCampaign(did), func(x ledger.Discount) error {
		dc.Confirmed = append(dc.Confirmed, history.Discount{User: x.User, Order: x.Order, Seq: x.Seq, Cents: x.Cents})
		return nil
	}); err != nil {
		return f, err
	}
	dtot, err := l.Totals(ctx, ledger.DiscountCampaign(did))
	if err != nil {
		return f, err
	}
	dc.Funded, dc.Refunded = dtot.Funded, dtot.Refunded
	balances := map[string]int64{}
	for _, op := range ops {
		if _, ok := balances[op.User]; ok {
			continue
		}
		if balances[op.User], err = l.Balance(ctx, ledger.UserAccount(op.User)); err != nil {
			return f, err
		}
	}
	return history.Final{Packets: []history.Campaign{c}, Discounts: []history.DiscountCampaign{dc}, Balances: balances}, nil
}

// checkFencing reads the scheduler's elections from its log (every run
// of its container): each token is above the one before, and the first
// election after the failover is above every earlier token.
func (d *drill) checkFencing(ctx context.Context, failoverAt time.Time) {
	id, err := d.s.container(ctx, "scheduler")
	if err != nil {
		d.fail("fencing: %v", err)
		return
	}
	cmd := exec.CommandContext(ctx, "docker", "logs", id)
	out, err := cmd.CombinedOutput()
	if err != nil {
		d.fail("fencing: docker logs: %v", err)
		return
	}
	rep, problems := fencing(out, failoverAt, contains(d.cfg.faults, "scheduler-kill"))
	d.rep.Fencing = rep
	d.logf("fencing: elections %v", rep.Elections)
	for _, p := range problems {
		d.fail("fencing: %s", p)
	}
}

// fencing reads the elections of a scheduler's JSON log: a token never
// goes back; a token equal to the one before is the same term going on
// (the holder renewed the lease it held, nobody held it between); the
// first new token after failoverAt must be above every earlier one, and,
// when the scheduler was restarted after it (restarted), there must be
// one.
func fencing(log []byte, failoverAt time.Time, restarted bool) (fencingReport, []string) {
	var f fencingReport
	var problems []string
	var last int64
	sc := bufio.NewScanner(strings.NewReader(string(log)))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var e struct {
			Time  time.Time   `json:"time"`
			Msg   string      `json:"msg"`
			Token json.Number `json:"token"`
		}
		if json.Unmarshal(sc.Bytes(), &e) != nil || e.Msg != "elected" {
			continue
		}
		tok, err := e.Token.Int64()
		if err != nil {
			continue
		}
		at := e.Time.UTC().Format(time.RFC3339)
		switch {
		case tok == last:
			f.Elections = append(f.Elections, fmt.Sprintf("%s token=%d (kept: the lease survived)", at, tok))
			continue
		case tok < last:
			problems = append(problems, fmt.Sprintf("token %d at %s is below the one before (%d)", tok, at, last))
		}
		f.Elections = append(f.Elections, fmt.Sprintf("%s token=%d", at, tok))
		last = tok
		switch {
		case failoverAt.IsZero() || e.Time.Before(failoverAt):
			f.MaxBefore = max(f.MaxBefore, tok)
		case f.FirstAfter == 0:
			f.FirstAfter = tok
		}
	}
	if len(f.Elections) == 0 {
		problems = append(problems, "the scheduler's log has no election")
	}
	if f.FirstAfter != 0 && f.FirstAfter <= f.MaxBefore {
		problems = append(problems, fmt.Sprintf("first token after the failover %d is not above %d", f.FirstAfter, f.MaxBefore))
	}
	if f.FirstAfter == 0 && restarted && !failoverAt.IsZero() {
		problems = append(problems, "no new token after the failover, though the scheduler was killed and restarted")
	}
	return f, problems
}

// reconcile runs hongbao reconcile in the scheduler container, from the
// config file, for both campaigns.
func (d *drill) reconcile(ctx context.Context, id, did string) {
	for _, arg := range []string{"--campaign=" + id, "--discount=" + did} {
		out, err := d.s.compose(ctx, "exec", "-T", "scheduler", "/usr/local/bin/hongbao", "reconcile", "--config", "/etc/hongbao/hongbao.yaml", arg)
		line := fmt.Sprintf("reconcile %s: %s", arg, strings.Join(strings.Fields(out), " "))
		d.rep.Reconcile = append(d.rep.Reconcile, line)
		d.logf("%s", line)
		if err != nil {
			d.fail("reconcile %s: %v", arg, err)
		}
	}
}

// endState checks, once all is back, that every target is up and no
// alert fires (waiting for the alerts of the faults to resolve).
func (d *drill) endState(ctx context.Context) {
	d.logf("the end state: every Prometheus target up, no alert firing (waiting up to 6 minutes for the faults' alerts to resolve)")
	t, err := d.p.waitTargetsUp(ctx, 60*time.Second)
	d.rep.TargetsEnd = t
	if err != nil {
		d.fail("at the end: %v", err)
	}
	var a map[string]string
	err = waitFor(ctx, 6*time.Minute, 5*time.Second, func() bool {
		a, err = d.p.alerts()
		if err != nil {
			return false
		}
		for _, st := range a {
			if st == "firing" {
				return false
			}
		}
		return true
	})
	d.rep.AlertsAtEnd = a
	if err != nil {
		var names []string
		for n, st := range a {
			if st == "firing" {
				names = append(names, n)
			}
		}
		sort.Strings(names)
		d.fail("alerts still firing 6 minutes after the faults: %v", names)
	}
}
