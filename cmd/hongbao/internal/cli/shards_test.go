package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/internal/redisstore"
	"github.com/hongbao/hongbao/internal/testenv"
)

// long reports whether the long acceptance runs are asked for
// (HONGBAO_LONG=1); without it the same runs are made smaller.
func long() bool { return os.Getenv("HONGBAO_LONG") == "1" }

// TestOnCluster runs demo and serve on a real three-master Redis Cluster
// (made by redis-cli --cluster create), each given the URL of one node:
// the client finds the other nodes itself. With HONGBAO_LONG=1 they run
// at full size: demo --shards 3 with 30,000 packets and users, serve with
// a campaign of 4 shards and 20,000 users x 2 clicks.
func TestOnCluster(t *testing.T) {
	t.Parallel()
	c := testenv.NewCluster(t, testenv.ClusterOptions{})
	t.Run("Demo", func(t *testing.T) { demoOnCluster(t, c) })
	t.Run("Serve", func(t *testing.T) { serveOnCluster(t, c) })
}

// TestDemoShardsEmbedded: demo --shards 8 on the embedded redis-server
// (one Redis, so all eight shards on it) grants every packet, one per
// user, settles and reconciles.
func TestDemoShardsEmbedded(t *testing.T) {
	t.Parallel()
	testenv.SharedRedis(t) // skips or fails like every Redis test when redis-server is missing
	code, out, errs := run(t, nil, "demo", "--shards", "8", "--packets", "2000", "--users", "2500", "--clicks", "2", "--json")
	require.Equal(t, 0, code, errs)
	var rep demoReport
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	require.Equal(t, "embedded", rep.Redis)
	require.Equal(t, 8, rep.Shards)
	require.EqualValues(t, 2000, rep.Granted)
	require.EqualValues(t, 1000, rep.SoldOut, "the 500 users left over are told sold out, at each click")
	require.True(t, rep.ConservationOK, "problems: %v", rep.Problems)
	require.True(t, rep.ReconcileOK, "reconcile: %+v", rep.Reconcile)
	require.EqualValues(t, 2000, rep.Settled)
}

// campaignKeysOn counts the keys of campaign id of shards shards that the
// node holds.
func campaignKeysOn(t *testing.T, n *testenv.Node, id string, shards int) int64 {
	t.Helper()
	var keys int64
	for _, k := range redisstore.Default.Layout(id, shards) {
		slot := strconv.Itoa(testenv.KeySlot(k.Meta))
		count, err := n.Client.Do(context.Background(), n.Client.B().Arbitrary("CLUSTER", "COUNTKEYSINSLOT", slot).Build()).AsInt64()
		require.NoError(t, err)
		keys += count
	}
	return keys
}

// demoOnCluster: demo --shards 3 grants every packet, one to each user
// although the users' homes are uneven (so packets move between shards),
// settles, refunds and reconciles, and every master holds keys of the
// campaign.
func demoOnCluster(t *testing.T, c *testenv.Cluster) {
	n := 3000
	if long() {
		n = 30000
	}
	start := time.Now()
	code, out, errs := run(t, nil, "demo", "--redis", "redis://"+c.Nodes[1].Addr, "--shards", "3",
		"--packets", strconv.Itoa(n), "--users", strconv.Itoa(n), "--clicks", "2", "--json")
	require.Equal(t, 0, code, errs)
	var rep demoReport
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	t.Logf("demo of %d packets on the cluster in %v: %d transfers moved %d packets", n, time.Since(start), rep.Transfers, rep.PacketsMoved)
	require.Equal(t, "given", rep.Redis)
	require.Equal(t, 3, rep.Shards)
	require.EqualValues(t, n, rep.Granted, "every packet granted")
	require.EqualValues(t, 2*n, rep.Attempts)
	require.EqualValues(t, n, rep.Already, "each user's second click answers the same packet")
	require.Zero(t, rep.SoldOut, "nobody was refused while packets remained")
	require.Zero(t, rep.DuplicateUsers)
	require.Zero(t, rep.DuplicatePackets)
	require.True(t, rep.ConservationOK, "problems: %v", rep.Problems)
	require.True(t, rep.ReconcileOK, "reconcile: %+v", rep.Reconcile)
	require.EqualValues(t, n, rep.Settled)
	require.Positive(t, rep.Transfers, "uneven homes: packets moved")
	require.Positive(t, rep.PacketsMoved)
	for _, node := range c.Nodes {
		require.Positive(t, campaignKeysOn(t, node, rep.Campaign, 3), "%s holds keys of the campaign", node.Addr)
	}
}

// serveOnCluster: serve on the cluster; a campaign of 4 shards created
// over HTTP; a rain of users x 2 clicks on as many packets grants them
// all, one per user; each user's later grab answers the same packet; the
// campaign closes, settles and reconciles.
func serveOnCluster(t *testing.T, c *testenv.Cluster) {
	users := 2000
	if long() {
		users = 20000
	}
	dir := t.TempDir()
	fx := &serveFixture{dir: dir, adminFile: writeSecret(t, dir, "admin.key"), secretFile: writeSecret(t, dir, "token.secret"),
		dsn: "sqlite:" + filepath.Join(dir, "ledger.db")}
	url := "redis://" + c.Nodes[2].Addr
	p := startServe(t, "--redis", url, "--ledger", fx.dsn, "--admin-key-file", fx.adminFile, "--token-secret-file", fx.secretFile,
		"--listen", "127.0.0.1:0", "--global-rate", "1000000", "--lease-ttl", "2s")
	api := fx.api(t, p.URL)
	id := api.create(t, p.URL, fmt.Sprintf(`{"total":"%d.00","count":%d,"shards":4}`, users, users))

	start := time.Now()
	first := rainHTTP(t, api, p.URL, id, users, 2)
	t.Logf("%d users x 2 clicks over HTTP on the cluster in %v", users, time.Since(start))
	packets := map[string]string{}
	for u, packet := range first {
		require.NotEmpty(t, packet, "user %d got a packet", u)
		other, dup := packets[packet]
		require.False(t, dup, "packet %s to users %s and %d", packet, other, u)
		packets[packet] = strconv.Itoa(u)
	}
	again := rainHTTP(t, api, p.URL, id, users, 1)
	require.Equal(t, first, again, "every later grab answers the same packet")

	code, m, err := api.call("POST", p.URL+"/v1/campaigns/"+id+"/close", api.admin, "")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, code, "%v", m)
	waitFor(t, "the campaign to settle", 2*time.Minute, func() bool {
		_, m, err := api.call("GET", p.URL+"/v1/campaigns/"+id, api.admin, "")
		return err == nil && m["state"] == string(hongbao.StateSettled)
	})
	codeR, outR, errR := run(t, nil, "reconcile", "--campaign", id, "--redis", url, "--ledger", fx.dsn)
	require.Equal(t, 0, codeR, "%s %s", outR, errR)
	require.Contains(t, outR, "OK")
}

// rainHTTP has users user-0.. grab clicks times each over HTTP (the clicks
// of one user at once), 64 users at a time, and returns the packet each
// user was answered, requiring all of a user's answers to name it.
func rainHTTP(t *testing.T, api *apiClient, base, id string, users, clicks int) []string {
	t.Helper()
	got := make([]string, users)
	var mu sync.Mutex
	var wg sync.WaitGroup
	next := make(chan int)
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for u := range next {
				tok := api.userToken(t, "user-"+strconv.Itoa(u))
				var cw sync.WaitGroup
				for range clicks {
					cw.Add(1)
					go func() {
						defer cw.Done()
						packet := grabHTTP(t, api, base, id, tok)
						mu.Lock()
						defer mu.Unlock()
						if got[u] != "" && got[u] != packet {
							t.Errorf("user %d told packets %s and %s", u, got[u], packet)
						}
						got[u] = packet
					}()
				}
				cw.Wait()
			}
		}()
	}
	for u := range users {
		next <- u
	}
	close(next)
	wg.Wait()
	require.False(t, t.Failed())
	return got
}

// grabHTTP grabs once, retrying a 503 (busy, or an unknown outcome: both
// safe to retry), and returns the packet of a granted or already granted
// answer ("" for another outcome).
func grabHTTP(t *testing.T, api *apiClient, base, id, tok string) string {
	for attempt := 0; ; attempt++ {
		code, m, err := api.call("POST", base+"/v1/campaigns/"+id+"/grab", tok, "")
		if code == http.StatusServiceUnavailable && attempt < 20 {
			time.Sleep(5 * time.Millisecond)
			continue
		}
		if err != nil || code != http.StatusOK {
			t.Errorf("grab: %d %v %v", code, m, err)
			return ""
		}
		if m["outcome"] != "granted" && m["outcome"] != "already_granted" {
			return ""
		}
		packet, _ := m["packet_id"].(string)
		return packet
	}
}
