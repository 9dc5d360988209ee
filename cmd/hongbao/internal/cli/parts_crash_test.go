package cli

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/internal/testenv"
	"github.com/hongbao/hongbao/ledger/ledgertest"
	"github.com/hongbao/hongbao/ledger/open"
	"github.com/hongbao/hongbao/settle"
)

// settler is one hongbao settle process of the crash test.
type settler struct {
	args   []string
	bin    string
	cmd    *exec.Cmd
	done   chan struct{}
	stderr *syncBuffer
}

func (s *settler) start(t *testing.T) {
	t.Helper()
	s.cmd = exec.Command(s.bin, s.args...)
	s.cmd.Stderr = s.stderr
	require.NoError(t, s.cmd.Start())
	s.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) {
		_ = cmd.Wait()
		close(done)
	}(s.cmd, s.done)
}

// kill SIGKILLs the process and waits for it to be gone.
func (s *settler) kill() {
	_ = s.cmd.Process.Kill()
	<-s.done
}

// TestPartsCrashOnCluster: three hongbao settle processes (the binary)
// share the 16 parts of an 8-shard campaign on a Redis Cluster of three
// masters, into PostgreSQL, while clients grab and one process after
// another is SIGKILLed and started again (the same consumer name, as a
// supervisor restarts it). Afterwards reconcile finds every grant in the
// ledger once, the refund once, escrow at 0 and no dead entry, and no
// process logged an incident. The short version runs about 20-40 s;
// HONGBAO_LONG_FAULTS=1 (make faults) runs ten times the grants and kills.
func TestPartsCrashOnCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs a Redis Cluster")
	}
	t.Parallel()
	users, kills := 8000, 12
	if longFaults() {
		users, kills = 80000, 120
	}
	c := testenv.NewCluster(t, testenv.ClusterOptions{})
	dsn := ledgertest.PostgresDSN(t)
	bin := buildBinary(t)
	ctx := context.Background()
	led, err := open.Open(ctx, dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = led.Close() })
	eng, err := hongbao.New(hongbao.Config{Redis: c.Client, Packets: led})
	require.NoError(t, err)
	const shards = 8
	packets := users + users/4
	camp, err := eng.Create(ctx, hongbao.Spec{ID: testenv.UniqueID(t), Total: int64(10 * packets), Count: packets, Shards: shards})
	require.NoError(t, err)

	url := "redis://" + c.Nodes[0].Addr
	procs := make([]*settler, 3)
	for i := range procs {
		procs[i] = &settler{bin: bin, stderr: &syncBuffer{}, args: []string{"settle", "--redis", url, "--ledger", dsn,
			"--settle-parts", "16", "--lease-ttl", "1s", "--consumer", "s" + strconv.Itoa(i)}}
		procs[i].start(t)
	}
	t.Cleanup(func() {
		for _, p := range procs {
			p.kill()
		}
	})

	// Clients grab while the nemesis kills: the users come in chunks, one
	// per kill of the first half, so grants keep arriving throughout it;
	// then the campaign closes and the other half strike during the drain
	// and the refund.
	var granted, grantedCents, failed atomic.Int64
	feed := make(chan int, users)
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for u := range feed {
				g, err := eng.Grab(ctx, camp.ID, "u"+strconv.Itoa(u))
				if err != nil || g.Outcome != hongbao.Granted {
					failed.Add(1)
					continue
				}
				granted.Add(1)
				grantedCents.Add(g.Cents)
			}
		}()
	}
	fed, chunk := 0, users/(kills/2)
	midRun, duringGrabs := 0, 0
	for k := range kills {
		time.Sleep(time.Duration(400+rand.IntN(1000)) * time.Millisecond)
		switch {
		case k < kills/2:
			for ; fed < min((k+1)*chunk, users); fed++ {
				feed <- fed
			}
			// The kill strikes while this chunk's grants are settling.
			time.Sleep(time.Duration(rand.IntN(200)) * time.Millisecond)
		case k == kills/2:
			for ; fed < users; fed++ {
				feed <- fed
			}
			close(feed)
			wg.Wait()
			_, err := eng.CloseCampaign(ctx, camp.ID)
			require.NoError(t, err)
		}
		victim := procs[k%len(procs)]
		victim.kill()
		if k < kills/2 {
			duringGrabs++
		}
		if tot, err := led.Totals(ctx, camp.ID); err == nil && tot.GrantCount > 0 && tot.GrantCount < granted.Load() {
			midRun++
		}
		time.Sleep(time.Duration(rand.IntN(300)) * time.Millisecond)
		victim.start(t)
	}
	require.Zero(t, failed.Load(), "grabs that were not granted")
	require.Positive(t, midRun, "a kill struck with grants in Redis not yet in the ledger")

	waitFor(t, "the campaign settled", 3*time.Minute, func() bool {
		st, err := eng.Status(ctx, camp.ID)
		return err == nil && st.State == hongbao.StateSettled
	})
	out, err := exec.Command(bin, "reconcile", "--redis", url, "--ledger", dsn, "--campaign", camp.ID, "--json").Output()
	require.NoError(t, err, "reconcile: %s", out)
	var rep settle.Report
	require.NoError(t, json.Unmarshal(out, &rep))
	require.True(t, rep.OK, "after %d kills: %v", kills, rep.Differences)
	require.Equal(t, granted.Load(), rep.GrantedLedger, "every grant in the ledger, once")
	require.Equal(t, grantedCents.Load(), rep.GrantedCentsLedger)
	require.Equal(t, int64(10*packets)-grantedCents.Load(), rep.RefundCents, "the refund, once")
	require.Zero(t, rep.EscrowCents)
	require.Zero(t, rep.Dead, "no dead entries")
	for i, p := range procs {
		require.NotContains(t, p.stderr.String(), "INCIDENT", "process %d", i)
	}
	// Each process settled between kills: every one took parts.
	for i, p := range procs {
		require.Contains(t, p.stderr.String(), "elected", "process %d never held a part", i)
	}
	t.Logf("%d grants over %d shards, %d kills (%d while grabs ran, %d with the ledger behind Redis): every grant once, the refund once",
		rep.GrantedLedger, shards, kills, duringGrabs, midRun)
}
