package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"
)

// Faults the nemesis knows, in the order a full drill runs them.
var allFaults = []string{"api-kill", "rolling-restart", "master-stop", "master-pause", "postgres-restart", "scheduler-kill"}

// expectedAlert is the alert that must fire during a fault when the drill
// holds faults until their alerts fire (-alerts).
var expectedAlert = map[string]string{
	"postgres-restart": "HongbaoLedgerDown",
	"scheduler-kill":   "HongbaoNoScheduler",
	"master-stop":      "HongbaoGrabsUnavailable",
}

// faultReport is what one fault did and what was seen during it.
type faultReport struct {
	Name          string   `json:"name"`
	Started       string   `json:"started"`
	Seconds       float64  `json:"seconds"`
	Detail        []string `json:"detail,omitempty"`
	Refused       int      `json:"refused_connections"`
	AlertsFiring  []string `json:"alerts_firing"`
	AlertsPending []string `json:"alerts_pending,omitempty"`
	Expected      string   `json:"expected_alert,omitempty"`
	Error         string   `json:"error,omitempty"`
}

// nemesis works through the stack's own processes.
type nemesis struct {
	s       *stack
	g       *gateway
	c       *clients
	w       *alertWatch
	alerts  bool // hold the faults that have an alert until it fires
	hold    time.Duration
	logf    func(format string, a ...any)
	mu      sync.Mutex
	details []string
	// violations are breaches of the Redis safety contract seen by the
	// probes: a write answered OK by a server that must refuse it.
	violations []string
	// failoverAt is when the first failover began (for the fencing check).
	failoverAt time.Time
}

func (n *nemesis) note(format string, a ...any) {
	msg := fmt.Sprintf(format, a...)
	n.logf("  %s", msg)
	n.mu.Lock()
	n.details = append(n.details, msg)
	n.mu.Unlock()
}

func (n *nemesis) violation(format string, a ...any) {
	msg := fmt.Sprintf(format, a...)
	n.logf("  VIOLATION: %s", msg)
	n.mu.Lock()
	n.violations = append(n.violations, msg)
	n.mu.Unlock()
}

// run runs one fault and reports it.
func (n *nemesis) run(ctx context.Context, name string) faultReport {
	fns := map[string]func(context.Context) error{
		"api-kill": n.apiKill, "rolling-restart": n.rollingRestart, "master-stop": n.masterStop,
		"master-pause": n.masterPause, "postgres-restart": n.postgresRestart, "scheduler-kill": n.schedulerKill,
	}
	rep := faultReport{Name: name, Started: time.Now().UTC().Format(time.RFC3339), Expected: expectedAlert[name]}
	if !n.alerts {
		rep.Expected = ""
	}
	n.mu.Lock()
	n.details = nil
	n.mu.Unlock()
	n.c.setPhase(name)
	n.w.setPhase(name)
	start := time.Now()
	n.logf("fault %s", name)
	if err := fns[name](ctx); err != nil {
		rep.Error = err.Error()
		n.logf("  fault %s: %v", name, err)
	}
	rep.Seconds = time.Since(start).Seconds()
	n.w.poll()
	n.c.setPhase("steady")
	n.w.setPhase("steady")
	rep.AlertsFiring, rep.AlertsPending = n.w.seen(name)
	n.c.mu.Lock()
	rep.Refused = n.c.refused[name]
	n.c.mu.Unlock()
	n.mu.Lock()
	rep.Detail = n.details
	n.mu.Unlock()
	return rep
}

// settle waits, after a fault, until every API is ready again and the
// clients made progress.
func (n *nemesis) settle(ctx context.Context) error {
	if err := waitFor(ctx, 120*time.Second, 200*time.Millisecond, n.g.allReady); err != nil {
		return fmt.Errorf("the APIs are not all ready again within 120 s")
	}
	before := n.c.answered.Load()
	if err := waitFor(ctx, 60*time.Second, 100*time.Millisecond, func() bool { return n.c.answered.Load() >= before+50 }); err != nil {
		return fmt.Errorf("the clients made no progress within 60 s of the fault's end")
	}
	return nil
}

// apiKill SIGKILLs api-1 and starts it again.
func (n *nemesis) apiKill(ctx context.Context) error {
	if err := n.s.docker(ctx, "api-1", "kill", "-s", "KILL"); err != nil {
		return err
	}
	n.note("api-1 killed (SIGKILL)")
	time.Sleep(3 * time.Second)
	if n.s.health(ctx, "api-1") != "healthy" {
		if err := n.s.docker(ctx, "api-1", "start"); err != nil {
			return err
		}
	}
	if err := n.s.waitHealthy(ctx, "api-1", 90*time.Second); err != nil {
		return err
	}
	n.note("api-1 healthy again")
	return nil
}

// rollingRestart stops each API with SIGTERM (compose stop: its shutdown
// delay, then its drain) and starts it, one after the other.
func (n *nemesis) rollingRestart(ctx context.Context) error {
	for _, svc := range []string{"api-1", "api-2"} {
		t := time.Now()
		if _, err := n.s.compose(ctx, "stop", svc); err != nil {
			return err
		}
		n.note("%s stopped with SIGTERM in %.1f s", svc, time.Since(t).Seconds())
		if _, err := n.s.compose(ctx, "start", svc); err != nil {
			return err
		}
		if err := n.s.waitHealthy(ctx, svc, 90*time.Second); err != nil {
			return err
		}
		if err := waitFor(ctx, 30*time.Second, 100*time.Millisecond, n.g.allReady); err != nil {
			return fmt.Errorf("%s healthy but not ready to the gateway", svc)
		}
		n.note("%s ready again", svc)
	}
	return nil
}

// waitNewMaster waits until the sentinels name a master other than old.
// Three minutes: a sentinel whose timer runs late (a starved machine)
// enters TILT mode for 30 s at a time and fails over only after it; the fault's report says how
// long the promotion took.
func (n *nemesis) waitNewMaster(ctx context.Context, old string) (string, error) {
	var m string
	err := waitFor(ctx, 180*time.Second, 250*time.Millisecond, func() bool {
		var err error
		m, err = n.s.master(ctx)
		return err == nil && m != old
	})
	if err != nil {
		return "", fmt.Errorf("the sentinels did not fail over from %s within 180 s", old)
	}
	return m, nil
}

// probeWrite sends a write to a Redis server; it returns the reply and
// whether the server took it.
func (n *nemesis) probeWrite(ctx context.Context, svc string) (string, bool) {
	out, err := n.s.redisCLI(ctx, svc, "SET", "hongbao-drill:probe", time.Now().UTC().Format(time.RFC3339Nano))
	if err != nil {
		return err.Error(), false
	}
	return out, out == "OK"
}

// oldMasterProbe runs in a restarted (or thawed) old master's container,
// from its first moment: every 100 ms a write and ROLE, one line each
// ("role|reply of the write"), until it is a replica with its link to
// the new master up (exit 0) or 90 s pass (exit 1).
const oldMasterProbe = `
export REDISCLI_AUTH="$(cat /run/secrets/redis_password)"
end=$(( $(date +%s) + 90 ))
while [ "$(date +%s)" -lt "$end" ]; do
  w="$(redis-cli --raw SET hongbao-drill:probe old 2>&1 | head -1)"
  r="$(redis-cli --raw ROLE 2>&1 | head -1)"
  echo "$r|$w"
  if [ "$r" = slave ] && redis-cli --raw INFO replication 2>/dev/null | grep -q master_link_status:up; then exit 0; fi
  sleep 0.1
done
exit 1
`

// watchOldMaster probes a restarted or thawed old master every 100 ms,
// from inside its container, until it follows the new master: it must
// never take a write.
func (n *nemesis) watchOldMaster(ctx context.Context, old string) error {
	id, err := n.s.container(ctx, old)
	if err != nil {
		return err
	}
	out, err := run(ctx, "docker", "exec", id, "sh", "-c", oldMasterProbe)
	probes, roles, took := 0, map[string]int{}, 0
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		role, reply, ok := strings.Cut(line, "|")
		if !ok {
			continue
		}
		probes++
		if role != "master" && role != "slave" {
			role = "down"
		}
		roles[role]++
		if reply == "OK" {
			took++
		}
	}
	if took > 0 {
		n.violation("the old master %s took %d of %d writes before following the new master", old, took, probes)
	}
	n.note("old master %s probed %d times from its first moment (a write and ROLE, 100 ms apart) until its link to the new master was up: roles seen %v, writes taken %d", old, probes, roles, took)
	if err != nil {
		return fmt.Errorf("%s does not follow the new master within 90 s: %v", old, err)
	}
	return nil
}

// checkRefusesAlone checks that a master without a replica refuses a
// write (min-replicas-to-write).
func (n *nemesis) checkRefusesAlone(ctx context.Context, master string) {
	var reply string
	var took bool
	// The new master refuses once the sentinels have reconfigured it; a
	// promoted replica may take a moment to learn it has no replica.
	err := waitFor(ctx, 20*time.Second, 250*time.Millisecond, func() bool {
		info, _ := n.s.redisCLI(ctx, master, "INFO", "replication")
		return strings.Contains(info, "role:master") && strings.Contains(info, "connected_slaves:0")
	})
	if err != nil {
		n.note("new master %s: not a master without replicas within 20 s", master)
		return
	}
	reply, took = n.probeWrite(ctx, master)
	if took {
		n.violation("new master %s took a write without a replica", master)
		return
	}
	n.note("new master %s without a replica refuses a write: %s", master, firstLine(reply))
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	if i := strings.LastIndex(l, ": "); i >= 0 && strings.Contains(l, "redis-cli") {
		return l[i+2:]
	}
	return l
}

// masterStop stops the Redis master (SIGTERM), waits for the sentinels to
// promote the replica, checks the new master refuses writes alone, holds
// the fault until its alert fires, then starts the old master and watches
// it never take a write on its way to being a replica.
func (n *nemesis) masterStop(ctx context.Context) error {
	old, err := n.s.master(ctx)
	if err != nil {
		return err
	}
	if n.failoverAt.IsZero() {
		n.failoverAt = time.Now()
	}
	if _, err := n.s.compose(ctx, "stop", old); err != nil {
		return err
	}
	t := time.Now()
	n.note("master %s stopped", old)
	m, err := n.waitNewMaster(ctx, old)
	if err != nil {
		n.restore(ctx, old)
		return err
	}
	n.note("sentinels promoted %s after %.1f s", m, time.Since(t).Seconds())
	n.checkRefusesAlone(ctx, m)
	herr := n.holdFor(ctx, "master-stop")
	if _, err := n.s.compose(ctx, "start", old); err != nil {
		return err
	}
	if herr != nil {
		return herr
	}
	if err := n.watchOldMaster(ctx, old); err != nil {
		return err
	}
	reply, took := n.probeWrite(ctx, m)
	if !took {
		return fmt.Errorf("new master %s refuses writes with its replica back: %s", m, firstLine(reply))
	}
	n.note("new master %s takes writes with %s as its replica", m, old)
	return nil
}

// restore starts a service a failed fault left stopped, so that the
// faults after it, and the checks at the end, meet a whole stack.
func (n *nemesis) restore(ctx context.Context, svc string) {
	if _, err := n.s.compose(context.WithoutCancel(ctx), "start", svc); err != nil {
		n.note("restoring %s: %v", svc, err)
	}
}

// masterPause freezes the master (docker pause) until the sentinels fail
// over, then thaws it: it comes back believing it is the master, and must
// take no write until it follows the new one.
func (n *nemesis) masterPause(ctx context.Context) error {
	old, err := n.s.master(ctx)
	if err != nil {
		return err
	}
	if n.failoverAt.IsZero() {
		n.failoverAt = time.Now()
	}
	if err := n.s.docker(ctx, old, "pause"); err != nil {
		return err
	}
	t := time.Now()
	n.note("master %s frozen (docker pause)", old)
	m, err := n.waitNewMaster(ctx, old)
	if err != nil {
		_ = n.s.docker(ctx, old, "unpause")
		return err
	}
	n.note("sentinels promoted %s after %.1f s", m, time.Since(t).Seconds())
	if err := n.s.docker(ctx, old, "unpause"); err != nil {
		return err
	}
	n.note("%s thawed", old)
	return n.watchOldMaster(ctx, old)
}

// holdFor holds a fault until its alert fires (with -alerts), else for
// the hold time.
func (n *nemesis) holdFor(ctx context.Context, fault string) error {
	if !n.alerts {
		time.Sleep(n.hold)
		return nil
	}
	t := time.Now()
	if err := n.w.waitFiring(ctx, expectedAlert[fault], 5*time.Minute); err != nil {
		return err
	}
	n.note("%s firing after %.0f s", expectedAlert[fault], time.Since(t).Seconds())
	return nil
}

// postgresRestart stops PostgreSQL and starts it again, after its alert
// fired (with -alerts).
func (n *nemesis) postgresRestart(ctx context.Context) error {
	if _, err := n.s.compose(ctx, "stop", "postgres"); err != nil {
		return err
	}
	n.note("postgres stopped")
	herr := n.holdFor(ctx, "postgres-restart")
	if _, err := n.s.compose(ctx, "start", "postgres"); err != nil {
		return err
	}
	if err := n.s.waitHealthy(ctx, "postgres", 90*time.Second); err != nil {
		return err
	}
	n.note("postgres healthy again")
	return herr
}

// schedulerKill SIGKILLs the scheduler and starts it again, after its
// alert fired (with -alerts).
func (n *nemesis) schedulerKill(ctx context.Context) error {
	if err := n.s.docker(ctx, "scheduler", "kill", "-s", "KILL"); err != nil {
		return err
	}
	n.note("scheduler killed (SIGKILL)")
	herr := n.holdFor(ctx, "scheduler-kill")
	if n.s.health(ctx, "scheduler") != "healthy" {
		if err := n.s.docker(ctx, "scheduler", "start"); err != nil {
			return err
		}
	}
	if err := n.s.waitHealthy(ctx, "scheduler", 90*time.Second); err != nil {
		return err
	}
	n.note("scheduler healthy again")
	return herr
}
