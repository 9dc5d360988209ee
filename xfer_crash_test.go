package hongbao_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/internal/redisstore"
	"github.com/hongbao/hongbao/internal/testenv"
	"github.com/hongbao/hongbao/ledger"
	"github.com/hongbao/hongbao/settle"
)

// crashChildEnv carries the child's orders: "<redis addr>|<campaign id>|
// <shards>|<round>|<acknowledgements file>".
const crashChildEnv = "HONGBAO_XFER_CRASH_CHILD"

// TestTransferCrash re-executes the test binary as a child process that
// grabs for users all homed on shard 0 of a four-shard campaign (so its
// refills move packets all the time) and walks raw transfers between the
// other shards, and SIGKILLs it at a random moment, round after round,
// starting it again each time. After every kill the audit finds every
// packet in exactly one place (a pool, a claim, or a transfer record not
// yet applied); at the end the campaign closes, settlement finishes the
// transfers the kills left, settles and refunds, and the reconcile is
// clean: nothing lost, nothing doubled, and every grant the child was told
// of is in the ledger with the packet it was told. HONGBAO_LONG=1 runs 100
// rounds instead of 15.
func TestTransferCrash(t *testing.T) {
	t.Parallel()
	rounds, packets := 15, 30_000
	if os.Getenv("HONGBAO_LONG") == "1" {
		rounds, packets = 100, 150_000
	}
	r := testenv.SharedRedis(t)
	eng, err := hongbao.New(hongbao.Config{Redis: r.Client})
	require.NoError(t, err)
	ctx := context.Background()
	const shards = 4
	c, err := eng.Create(ctx, hongbao.Spec{ID: testenv.UniqueID(t), Total: int64(packets) * 100, Count: packets, Shards: shards})
	require.NoError(t, err)
	acks := filepath.Join(t.TempDir(), "acks")
	store := redisstore.New(r.Client)
	layout := redisstore.Default.Layout(c.ID, shards)

	// The kills come at random moments, so a slow machine may need more
	// rounds before one has struck between a transfer's steps and the
	// child has emptied shard 0 (so a refill moved packets to it): the
	// rounds go on, up to four times as many, until both have happened.
	refilled := func() int64 {
		root, err := store.Status(ctx, layout[0])
		require.NoError(t, err)
		return root.Int("in_count")
	}
	kills, struck, before := 0, 0, 0
	for round := 0; round < rounds || (round < 4*rounds && (struck == 0 || refilled() == 0)); round++ {
		runCrashChild(t, "TestTransferCrashChild", crashChildEnv+"="+fmt.Sprintf("%s|%s|%d|%d|%s", r.Addr, c.ID, shards, round, acks), 20+rand.IntN(200))
		kills++
		a, err := eng.Audit(ctx, c.ID)
		require.NoError(t, err)
		require.True(t, a.OK(), "after kill %d: %v", round, a.Problems)
		left := 0
		for _, k := range layout {
			ts, err := store.Transfers(ctx, k)
			require.NoError(t, err)
			left += len(ts)
		}
		// A record a kill left stays until a recovery: more of them than
		// before says that this kill struck between a transfer's steps.
		if left > before {
			struck++
		}
		before = left
	}
	require.Positive(t, struck, "a kill struck in the middle of a transfer")
	told := readAcks(t, acks)
	require.NotEmpty(t, told)
	// Only the engine's refills move packets to shard 0.
	in := refilled()
	require.Positive(t, in, "the users' home shard was refilled")
	t.Logf("%d kills, %d of them between the steps of a transfer; %d grants acknowledged; %d packets lent between shards, %d to shard 0 by refills",
		kills, struck, len(told), lent(t, r, c.ID, shards), in)

	_, err = eng.CloseCampaign(ctx, c.ID)
	require.NoError(t, err)
	// Recovery finishes what the kills left: applied where they struck
	// before the apply, a no-op apply and a delete where after.
	done, err := store.Recover(ctx, layout, 0)
	require.NoError(t, err)
	require.Equal(t, before, done)
	a, err := eng.Audit(ctx, c.ID)
	require.NoError(t, err)
	require.True(t, a.OK(), "audit: %v", a.Problems)
	require.Zero(t, a.InFlightCount)
	l := sqliteLedger(t)
	w, err := settle.New(settle.Config{Redis: r.Client, Ledger: l, Consumer: "crash", Only: []string{c.ID}, Logger: quiet()})
	require.NoError(t, err)
	dctx, cancel := context.WithTimeout(ctx, 2*time.Minute) // a refund that cannot balance fails, not hangs
	defer cancel()
	_, err = w.Drain(dctx)
	require.NoError(t, err)
	rep, err := w.Reconcile(ctx, c.ID)
	require.NoError(t, err)
	require.True(t, rep.OK, "reconcile: %v", rep.Differences)
	require.Equal(t, "settled", rep.State)
	require.Equal(t, a.ClaimsCount, rep.GrantedLedger)
	require.Zero(t, rep.EscrowCents)
	st, err := eng.Status(ctx, c.ID)
	require.NoError(t, err)
	require.Zero(t, st.InFlight, "settlement finished every transfer")

	inLedger := map[string]int64{}
	require.NoError(t, l.Grants(ctx, c.ID, func(g ledger.Grant) error { inLedger[g.User] = g.Seq; return nil }))
	for user, seq := range told {
		require.Equal(t, seq, inLedger[user], "the grant %s was told of is in the ledger", user)
	}
}

// lent returns how many packets the shards of campaign id lent each other.
func lent(t *testing.T, r *testenv.Redis, id string, shards int) int64 {
	t.Helper()
	var n int64
	for _, k := range redisstore.Default.Layout(id, shards) {
		out, err := r.Client.Do(context.Background(), r.Client.B().Hget().Key(k.Meta).Field("out_count").Build()).AsInt64()
		require.NoError(t, err)
		n += out
	}
	return n
}

// runCrashChild runs the test named child in a process of its own with env
// ("NAME=value") added, waits until it prints "working", lets it work for ms
// milliseconds, and SIGKILLs it. Timing the kill from the child's first
// work, not from its start, keeps the kills inside the work on a slow or
// busy machine.
func runCrashChild(t *testing.T, child, env string, ms int) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+child+"$", "-test.count=1")
	cmd.Env = append(os.Environ(), env)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if sc.Text() == "working" {
				ready <- true
			}
		}
		close(ready)
	}()
	select {
	case ok := <-ready:
		require.True(t, ok, "the child ended before it worked")
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("the child did not start working")
	}
	time.Sleep(time.Duration(ms) * time.Millisecond)
	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	err = cmd.Wait()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee, "the child was killed, it did not exit")
	require.Equal(t, syscall.SIGKILL, ee.Sys().(syscall.WaitStatus).Signal())
}

// readAcks reads the grants the children were told of, "<user> <seq>" a
// line, and fails on a "BAD" line. (Each line is one write(2) to a file
// opened for appending, so a kill cannot cut one.)
func readAcks(t *testing.T, path string) map[string]int64 {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	told := map[string]int64{}
	for _, line := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		require.False(t, strings.HasPrefix(line, "BAD"), line)
		user, seq, ok := strings.Cut(line, " ")
		require.True(t, ok, "line %q", line)
		n, err := strconv.ParseInt(seq, 10, 64)
		require.NoError(t, err, "line %q", line)
		if prev, dup := told[user]; dup {
			require.Equal(t, prev, n, "user %s told two packets", user)
		}
		told[user] = n
	}
	return told
}

// TestTransferCrashChild is the child of TestTransferCrash; it does
// nothing unless started by it.
func TestTransferCrashChild(t *testing.T) {
	orders := os.Getenv(crashChildEnv)
	if orders == "" {
		t.Skip("the child process of TestTransferCrash")
	}
	f := strings.Split(orders, "|")
	shards, _ := strconv.Atoi(f[2])
	r := testenv.Client(t, f[0])
	eng, err := hongbao.New(hongbao.Config{Redis: r})
	require.NoError(t, err)
	acks, err := os.OpenFile(f[4], os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	require.NoError(t, err)
	ch := &crashChild{eng: eng, store: redisstore.New(r), id: f[1], shards: shards, round: f[3], acks: acks}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() { ch.grab(g) })
	}
	for range 2 {
		wg.Go(ch.transfer)
	}
	wg.Wait() // until killed; a child left alone stops after a minute
}

// crashChild is the work of the child process.
type crashChild struct {
	eng    *hongbao.Engine
	store  *redisstore.Store
	id     string
	shards int
	round  string
	acks   *os.File
	once   sync.Once
}

func (ch *crashChild) working() { ch.once.Do(func() { fmt.Println("working") }) }

// grab has users homed on shard 0 grab twice each, and writes each grant
// it is told of to the acknowledgements file.
func (ch *crashChild) grab(g int) {
	ctx := context.Background()
	deadline := time.Now().Add(time.Minute)
	for i := 0; time.Now().Before(deadline); i++ {
		user := fmt.Sprintf("r%s-%d-%d", ch.round, g, i)
		if redisstore.HomeShard(user, ch.shards) != 0 {
			continue
		}
		var seq int64
		for click := 0; click < 2; {
			gr, err := ch.eng.Grab(ctx, ch.id, user)
			if errors.Is(err, hongbao.ErrBusy) || errors.Is(err, hongbao.ErrOutcomeUnknown) {
				continue
			}
			if err != nil {
				fmt.Fprintf(ch.acks, "BAD grab %s: %v\n", user, err)
				return
			}
			click++
			if !gr.Outcome.HasPacket() {
				continue
			}
			if seq != 0 && gr.Seq != seq {
				fmt.Fprintf(ch.acks, "BAD %s told %d and %d\n", user, seq, gr.Seq)
			}
			seq = gr.Seq
			fmt.Fprintf(ch.acks, "%s %d\n", user, gr.Seq)
			ch.working()
		}
	}
}

// transfer walks whole transfers, each step as the engine makes it, from
// a random shard to a random other shard but 0, until the process is
// killed: shard 0, where the users are homed, is drained by them and by
// these transfers, and refilled by the engine's own.
func (ch *crashChild) transfer() {
	ctx := context.Background()
	layout := redisstore.Default.Layout(ch.id, ch.shards)
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		src := rand.IntN(ch.shards)
		dest := 1 + rand.IntN(ch.shards-1)
		if dest == src {
			continue
		}
		t, err := ch.store.TakeTransfer(ctx, layout[src], dest, 1+rand.IntN(40))
		if err != nil || len(t.Packets) == 0 {
			continue
		}
		if _, err := ch.store.ApplyTransfer(ctx, layout[dest], t); err != nil {
			continue
		}
		_ = ch.store.FinishTransfer(ctx, layout[src], t.ID)
		ch.working()
	}
}
