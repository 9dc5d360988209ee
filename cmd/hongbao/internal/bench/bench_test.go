package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/internal/redisserver"
	"github.com/hongbao/hongbao/internal/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

func TestCPUList(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		cpus []int
		out  string
	}{
		{"0", []int{0}, "0"},
		{"0-1", []int{0, 1}, "0-1"},
		{"0-3,6,8-9", []int{0, 1, 2, 3, 6, 8, 9}, "0-3,6,8-9"},
	} {
		got, err := parseCPUList(tc.in)
		require.NoError(t, err, tc.in)
		require.Equal(t, tc.cpus, got)
		require.Equal(t, tc.out, formatCPUList(got))
	}
	for _, bad := range []string{"", "a", "3-1", "1-x"} {
		_, err := parseCPUList(bad)
		require.Error(t, err, bad)
	}
	require.Equal(t, "redis on cpu 0, bench on cpu 1", (&Pinning{RedisCPUs: "0", BenchCPUs: "1"}).String())
	require.Equal(t, "redis on cpu 0, bench on cpus 1-7", (&Pinning{RedisCPUs: "0", BenchCPUs: "1-7"}).String())
}

func TestParseCPU(t *testing.T) {
	t.Parallel()
	v, err := parseCPU("# CPU\r\nused_cpu_sys:1.500000\r\nused_cpu_user:2.250000\r\nused_cpu_sys_children:9\r\n")
	require.NoError(t, err)
	require.InDelta(t, 3.75, v, 1e-9)
	_, err = parseCPU("used_cpu_sys:1\r\n")
	require.Error(t, err)
}

// TestSummarizeMedian: the reported run is the one with the median
// grants/s, and a problem in any run makes the result not OK.
func TestSummarizeMedian(t *testing.T) {
	t.Parallel()
	run := func(granted int64, p50us uint32, problems ...string) *runStats {
		return &runStats{grabs: granted, granted: granted, seconds: 1, hist: histogramOf([]latencies{{p50us}}),
			batches: 1, carried: uint64(granted), problems: problems}
	}
	o := Options{Packets: 100, Users: 100, Concurrency: 1}
	r := summarize(Engine, o, "off", []*runStats{run(300, 30), run(100, 10, "boom"), run(200, 20)})
	require.Equal(t, 200.0, r.GrantsPerSec)
	require.Equal(t, 0.02, r.P50Ms)
	require.Equal(t, []float64{300, 100, 200}, r.RunsPerSec)
	require.False(t, r.OK)
	require.Equal(t, []string{"run 2: boom"}, r.Problems)
	require.True(t, r.RedisCPUReliable)
	// Two runs: the lower of the middle two.
	r = summarize(Classic, o, "off", []*runStats{run(300, 30), run(100, 10)})
	require.Equal(t, 100.0, r.GrantsPerSec)
	require.True(t, r.OK)
}

func TestHistogramOf(t *testing.T) {
	t.Parallel()
	var a, b latencies
	for i := 1; i <= 1000; i++ {
		a.add(time.Duration(i) * time.Microsecond)
	}
	b.add(0)               // clamped to 1 us
	b.add(2 * time.Minute) // clamped to 60 s
	h := histogramOf([]latencies{a, b})
	require.EqualValues(t, 1002, h.TotalCount())
	require.InDelta(t, 500, h.ValueAtQuantile(50), 1)
	require.EqualValues(t, 1, h.Min())
	require.InDelta(t, histMaxUs, h.Max(), histMaxUs/1000)
}

func TestWriteSVG(t *testing.T) {
	t.Parallel()
	var pts []SweepPoint
	for i, c := range []int{16, 32, 64, 128} {
		e := &Result{Mode: Engine, GrantsPerSec: float64(100000 + 20000*i), P99Ms: 0.3 * float64(i+1)}
		cl := &Result{Mode: Classic, GrantsPerSec: 50000, P99Ms: 0.5 * float64(i+1) * float64(i+1)}
		pts = append(pts, SweepPoint{Concurrency: c, Engine: e, Classic: cl, Ratio: Ratio(e, cl)})
	}
	var buf bytes.Buffer
	require.NoError(t, WriteSVG(&buf, "a <title>", "sub & title", pts))
	d := xml.NewDecoder(bytes.NewReader(buf.Bytes()))
	for {
		_, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
	}
	s := buf.String()
	require.Contains(t, s, "a &lt;title&gt;")
	require.Contains(t, s, "concurrency (log2 scale)")
	require.Equal(t, 4, strings.Count(s, "<polyline"))
	require.Error(t, WriteSVG(&buf, "", "", nil))
	require.Equal(t, 2.5, niceCeil(2.1))
	require.Equal(t, 200000.0, niceCeil(160000))
	require.Equal(t, "150k", formatCount(150000))
}

// TestClassicScript runs the classic script through our RESP client: a
// grab returns the packet with the user added, a second grab by the same
// user and a grab of an empty pool return nil.
func TestClassicScript(t *testing.T) {
	t.Parallel()
	r := testenv.SharedRedis(t)
	ctx := context.Background()
	k := newClassicKeys(testenv.UniqueID(t))
	tg := &target{client: r.Client}
	require.NoError(t, loadClassic(ctx, tg, k, []int64{7, 9}, nopProgress{}))
	t.Cleanup(func() { r.Client.Do(ctx, r.Client.B().Del().Key(k.pool, k.consumed, k.dedupe).Build()) })

	rc, err := dialRESP(r.Addr, "", "", 0)
	require.NoError(t, err)
	defer rc.Close()
	grab := func(user string) ([]byte, error) {
		return rc.do("EVAL", ClassicScript, "4", k.pool, k.consumed, k.dedupe, user)
	}
	got, err := grab("u1")
	require.NoError(t, err)
	var p classicPacket
	require.NoError(t, json.Unmarshal(got, &p))
	require.Equal(t, classicPacket{ID: 2, Money: 9, UserID: "u1"}, p)
	_, err = grab("u1")
	require.ErrorIs(t, err, errNil)
	_, err = grab("u2")
	require.NoError(t, err)
	_, err = grab("u3")
	require.ErrorIs(t, err, errNil)
	n, err := rc.do("HLEN", k.dedupe)
	require.NoError(t, err)
	require.Equal(t, "2", string(n))
	_, err = rc.do("NOSUCHCOMMAND")
	var re respError
	require.ErrorAs(t, err, &re)
	_, err = rc.do("LRANGE", k.consumed, "0", "-1") // arrays are read and dropped
	require.NoError(t, err)
	pong, err := rc.do("PING")
	require.NoError(t, err)
	require.Equal(t, "PONG", string(pong))
}

// BenchmarkClassicGrab is the classic script's round trip on one
// connection to the shared test Redis.
func BenchmarkClassicGrab(b *testing.B) {
	r := testenv.SharedRedis(b)
	ctx := context.Background()
	k := newClassicKeys(testenv.UniqueID(b))
	amounts := make([]int64, b.N)
	for i := range amounts {
		amounts[i] = 100
	}
	tg := &target{client: r.Client}
	require.NoError(b, loadClassic(ctx, tg, k, amounts, nopProgress{}))
	b.Cleanup(func() { r.Client.Do(ctx, r.Client.B().Unlink().Key(k.pool, k.consumed, k.dedupe).Build()) })
	rc, err := dialRESP(r.Addr, "", "", 0)
	require.NoError(b, err)
	defer rc.Close()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := rc.do("EVAL", ClassicScript, "4", k.pool, k.consumed, k.dedupe, "u"+strconv.Itoa(i+1)); err != nil {
			b.Fatal(err)
		}
	}
}

// TestShardedSkewedRun: a run over four shards with half the users homed
// on shard 0 makes transfers, keeps every invariant, and the slow log
// tells the transfer scripts' time apart from the grabs'.
func TestShardedSkewedRun(t *testing.T) {
	t.Parallel()
	if !redisserver.Available("") {
		if os.Getenv("CI") == "true" {
			t.Fatal("redis-server is not installed")
		}
		t.Skip("redis-server is not installed")
	}
	o := Options{Packets: 4000, Users: 4000, Total: 400_000, Seed: 7, Concurrency: 32, Runs: 1,
		Shards: 4, Skew: 0.5, ScriptTimes: true}
	r, err := Run(context.Background(), Engine, o)
	require.NoError(t, err)
	require.True(t, r.OK, "problems: %v", r.Problems)
	require.EqualValues(t, 4000, r.Granted)
	require.Equal(t, 4, r.Shards)
	require.NotZero(t, r.Transfers)
	require.NotZero(t, r.PacketsMoved)
	require.Greater(t, r.ScriptMs["grab.lua"], 0.0)
	require.Greater(t, r.ScriptMs["xfer_take.lua"], 0.0)
	require.Greater(t, r.ScriptMs["xfer_apply.lua"], 0.0)

	names := skewedNames(1000, 4, 0.5)
	home := 0
	for _, u := range names {
		if u == "" {
			t.Fatal("empty name")
		}
		if hongbao.HomeShard(u, 4) == 0 {
			home++
		}
	}
	require.Equal(t, 500, home, "exactly half homed on shard 0")
}
