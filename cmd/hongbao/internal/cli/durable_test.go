package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/internal/redisserver"
	"github.com/hongbao/hongbao/internal/testenv"
	"github.com/hongbao/hongbao/ledger/open"
	"github.com/hongbao/hongbao/rebuild"
)

// sizes are a fault test's packets and users: small in the normal suite,
// large with HONGBAO_LONG_FAULTS=1.
func sizes(short, long [2]int) (packets, users int) {
	if longFaults() {
		return long[0], long[1]
	}
	return short[0], short[1]
}

// TestFailoverRain: a rain through serve on a master, a replica and three
// sentinels, serve given the Sentinel URL and --wait-replicas 1. The
// master is SIGKILLed mid-rain; the sentinels promote the replica, serve
// follows it without a restart, and the old master comes back as its
// replica (until then every grab waits for a replica in vain and answers
// 503). Every grant a client was told of reads back from the new master,
// every claim there was told to its user, nobody holds two packets, the
// campaign settles (the worker waits for the replica too) and reconcile,
// given the Sentinel URL as well, is ok.
func TestFailoverRain(t *testing.T) {
	t.Parallel()
	packets, users := sizes([2]int{400, 600}, [2]int{20_000, 30_000})
	s := testenv.NewSentinel(t, testenv.SentinelOptions{})
	fx := newServeFixture(t, redisserver.Options{AOF: "off"}) // its Redis is unused: serve gets the Sentinel URL
	p := startServe(t, "--redis", s.URL, "--ledger", fx.dsn, "--admin-key-file", fx.adminFile, "--token-secret-file", fx.secretFile,
		"--listen", "127.0.0.1:0", "--user-rate", "-1", "--wait-replicas", "1", "--wait-timeout", "300ms", "--lease-ttl", "2s")
	api := fx.api(t, p.URL)
	id := api.create(t, p.URL, fmt.Sprintf(`{"total":"%d.00","count":%d}`, packets, packets))
	r := newRainer(t, api, func() string { return p.URL }, id)

	ctx := context.Background()
	var old, newMaster string
	r.rain("f", 0, users, 16, 1, int64(users/4), func() {
		old = s.KillMaster()
		var err error
		if newMaster, err = s.WaitFailover(ctx); err != nil {
			t.Errorf("failover: %v", err)
			return
		}
		if err := s.RestartAsReplica(ctx, old); err != nil {
			t.Errorf("the old master back as a replica: %v", err)
		}
	})
	require.NotEmpty(t, newMaster)
	st := r.statusCounts()
	t.Logf("%d granted, %d sold out, %d retries; answers by status %v; master %s -> %s",
		r.granted.Load(), r.soldOut.Load(), r.retries.Load(), st, old, newMaster)
	require.Positive(t, st[http.StatusServiceUnavailable], "the failover was seen: some grabs answered 503")

	r.requireReadBack(t, s.Node(newMaster).Client, 1)
	eng, err := hongbao.New(hongbao.Config{Redis: s.Client})
	require.NoError(t, err)
	a, err := eng.Audit(ctx, id)
	require.NoError(t, err)
	require.True(t, a.OK(), "nobody holds two packets, no packet is held twice: %v", a.Problems)
	require.EqualValues(t, len(r.acked), a.ClaimsCount, "every claim was told to its user")
	require.EqualValues(t, min(packets, users), a.ClaimsCount)

	closeAfterFaults(t, api, p.URL, id)
	waitSettled(t, api, func() string { return p.URL }, id, 60*time.Second)
	codeR, out, errs := run(t, nil, "reconcile", "--campaign", id, "--redis", s.URL, "--ledger", fx.dsn)
	require.Equal(t, 0, codeR, "%s %s", out, errs)
	require.Contains(t, out, "OK")
}

// TestFlushThenRebuild: settlement caught up, then the Redis under a
// running serve is flushed. hongbao rebuild restores the campaign from
// the ledger; reconcile is ok; users who held a packet get ALREADY with
// the same packet. The campaign is smaller than a block, so every packet
// nobody holds was poppable. Released on the operator's flag (every
// grant had settled: the case the flag is for), they go back to the
// pool; by default (a rebuild run again, forced) they are quarantined,
// --json says how many and their cents, new users are answered SOLD_OUT
// (a sharded campaign: granted + held out = count), and settlement
// refunds them: the campaign settles and reconciles.
func TestFlushThenRebuild(t *testing.T) {
	t.Parallel()
	packets, users := sizes([2]int{300, 200}, [2]int{100_000, 80_000})
	fx := newServeFixture(t, redisserver.Options{AOF: "off"})
	p := startServe(t, fx.args("--user-rate", "-1")...)
	url := func() string { return p.URL }
	api := fx.api(t, p.URL)
	id := api.create(t, p.URL, fmt.Sprintf(`{"total":"%d.00","count":%d,"shards":2}`, packets, packets))
	r := newRainer(t, api, url, id)
	r.rain("h", 0, users, 16, 2, 0, nil)
	require.EqualValues(t, users, r.granted.Load())
	waitFor(t, "settlement to catch up", 60*time.Second, func() bool {
		_, m, err := api.call("GET", p.URL+"/v1/campaigns/"+id, api.admin, "")
		s, _ := m["settlement"].(map[string]any)
		return err == nil && s != nil && s["lag_entries"] == 0.0 && s["pending_entries"] == 0.0
	})
	ctx := context.Background()
	require.NoError(t, fx.redis.Client.Do(ctx, fx.redis.Client.B().Flushall().Build()).Error())
	code, _, err := api.call("POST", p.URL+"/v1/campaigns/"+id+"/grab", api.userToken(t, "h0"), "")
	require.NoError(t, err)
	require.Equal(t, http.StatusNotFound, code, "Redis lost the campaign")

	code, out, errs := run(t, nil, "rebuild", "--campaign", id, "--redis", fx.redisURL(), "--ledger", fx.dsn,
		"--release-quarantine-risking-double-grants", "--json")
	require.Equal(t, 0, code, "%s %s", out, errs)
	var rel rebuild.Report
	require.NoError(t, json.Unmarshal([]byte(out), &rel))
	require.Positive(t, rel.Released)
	require.Zero(t, rel.Quarantined)
	require.EqualValues(t, packets-users, rel.RestoredPool, "the released packets and the blocks never opened")
	require.True(t, rel.PauseUnknown, "every shard lost its pause flag")
	require.False(t, rel.Paused)
	require.Equal(t, 2, rel.BlocklistLostShards, "every shard lost its blocked hash")
	code, out, errs = run(t, nil, "reconcile", "--campaign", id, "--redis", fx.redisURL(), "--ledger", fx.dsn)
	require.Equal(t, 0, code, "reconcile after the rebuild: %s %s", out, errs)
	code, _, errs = run(t, nil, "rebuild", "--campaign", id, "--redis", fx.redisURL(), "--ledger", fx.dsn)
	require.Equal(t, 1, code)
	require.Contains(t, errs, "--force")

	// A release holds for the rebuild it was given to: the packets'
	// blocks stay recorded as opened, so a rebuild without the flag holds
	// them out again.
	code, out, errs = run(t, nil, "rebuild", "--campaign", id, "--redis", fx.redisURL(), "--ledger", fx.dsn, "--force", "--json")
	require.Equal(t, 0, code, "%s %s", out, errs)
	var rep rebuild.Report
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	require.EqualValues(t, users, rep.RestoredClaims)
	require.Equal(t, rel.Released, rep.Quarantined, "what was released is quarantined again")
	require.Equal(t, rel.ReleasedCents, rep.QuarantinedCents)
	require.EqualValues(t, packets-users, rep.RestoredPool+rep.Quarantined, "the rest: the blocks never opened")
	require.Zero(t, rep.Unrecoverable)
	require.Contains(t, out, `"restored_claims"`)
	require.Contains(t, out, `"restored_pool"`)
	require.Contains(t, out, `"unrecoverable"`)
	require.Contains(t, out, fmt.Sprintf(`"quarantined":%d,"quarantined_cents":%d`, rep.Quarantined, rep.QuarantinedCents))
	require.Greater(t, rep.LedgerFence, rel.LedgerFence, "every rebuild raises the fence: serve's worker settles under the newest")
	require.Contains(t, out, fmt.Sprintf(`"ledger_fence":%d`, rep.LedgerFence))
	require.Contains(t, out, `"paused":false,"pause_source":"","pause_unknown":false,"blocklist_lost_shards":0`,
		"every shard kept its meta and blocked hash")

	before := len(r.acked)
	r.rain("h", 0, users, 16, 1, 0, nil) // the same users again: ALREADY, the same packets
	require.EqualValues(t, users, r.granted.Load(), "nobody was granted twice")
	require.Len(t, r.acked, before)
	r.rain("n", 0, int(rep.RestoredPool)+50, 16, 1, 0, nil)
	require.EqualValues(t, int64(users)+rep.RestoredPool, r.granted.Load(), "new users got the restored pool, no quarantined packet")
	require.EqualValues(t, 50, r.soldOut.Load())

	code, _, err = api.call("POST", p.URL+"/v1/campaigns/"+id+"/close", api.admin, "")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, code)
	waitSettled(t, api, url, id, 60*time.Second)
	code, out, errs = run(t, nil, "reconcile", "--campaign", id, "--redis", fx.redisURL(), "--ledger", fx.dsn)
	require.Equal(t, 0, code, "%s %s", out, errs)
	l, err := open.Open(ctx, fx.dsn)
	require.NoError(t, err)
	defer l.Close()
	tot, err := l.Totals(ctx, id)
	require.NoError(t, err)
	require.Equal(t, rep.QuarantinedCents, tot.Refunded, "the pool was granted: the refund is the quarantined packets")
}

// TestProxyFaultsRain: serve reaches Redis through a proxy that delays
// replies and cuts every connection, again and again, during a rain.
// Grabs whose answer was lost answer 503 and are retried: nobody is
// granted twice, every acknowledged grant is in Redis afterwards, and the
// campaign settles and reconciles.
func TestProxyFaultsRain(t *testing.T) {
	t.Parallel()
	packets, users := sizes([2]int{1500, 2000}, [2]int{50_000, 60_000})
	fx := newServeFixture(t, redisserver.Options{AOF: "off"})
	proxy := testenv.NewProxy(t, fx.redis.Addr)
	p := startServe(t, "--redis", "redis://"+proxy.Addr, "--ledger", fx.dsn, "--admin-key-file", fx.adminFile,
		"--token-secret-file", fx.secretFile, "--listen", "127.0.0.1:0", "--user-rate", "-1")
	api := fx.api(t, p.URL)
	id := api.create(t, p.URL, fmt.Sprintf(`{"total":"%d.00","count":%d}`, packets, packets))
	r := newRainer(t, api, func() string { return p.URL }, id)

	stop := make(chan struct{})
	chaos := make(chan int)
	go func() {
		n := 0
		defer func() { chaos <- n }()
		for {
			select {
			case <-stop:
				proxy.Delay(0)
				proxy.Restore()
				return
			case <-time.After(150 * time.Millisecond):
			}
			n++
			if n%2 == 0 {
				proxy.Delay(0)
				proxy.Cut()
				time.Sleep(30 * time.Millisecond)
				proxy.Restore()
			} else {
				proxy.Delay(20 * time.Millisecond)
			}
		}
	}()
	r.rain("p", 0, users, 32, 2, 0, nil)
	close(stop)
	faults := <-chaos
	st := r.statusCounts()
	t.Logf("%d faults; %d granted, %d sold out, %d retries; answers by status %v", faults, r.granted.Load(), r.soldOut.Load(), r.retries.Load(), st)
	require.Positive(t, st[http.StatusServiceUnavailable], "the faults were seen")
	r.requireReadBack(t, fx.redis.Client, 1)
	eng, err := hongbao.New(hongbao.Config{Redis: fx.redis.Client})
	require.NoError(t, err)
	ctx := context.Background()
	a, err := eng.Audit(ctx, id)
	require.NoError(t, err)
	require.True(t, a.OK(), "%v", a.Problems)
	require.EqualValues(t, len(r.acked), a.ClaimsCount, "every claim was told to its user")
	require.EqualValues(t, min(packets, users), a.ClaimsCount)

	closeAfterFaults(t, api, p.URL, id)
	waitSettled(t, api, func() string { return p.URL }, id, 60*time.Second)
	code, out, errs := run(t, nil, "reconcile", "--campaign", id, "--redis", fx.redisURL(), "--ledger", fx.dsn)
	require.Equal(t, 0, code, "%s %s", out, errs)
}

// TestServeWaitWithoutReplica: serve --wait-replicas 1 on a Redis that no
// replica follows warns at the start, says it is not ready (/readyz 503,
// naming the replicas attached against those wanted), and a grab answers
// 503 outcome_unknown with Retry-After (the grant is on the primary, no
// replica holds it, nobody is told GRANTED) saying that too few replicas
// acknowledged it, not that an answer was lost.
func TestServeWaitWithoutReplica(t *testing.T) {
	t.Parallel()
	fx := newServeFixture(t, redisserver.Options{AOF: "off"})
	p := startServe(t, fx.args("--wait-replicas", "1", "--wait-timeout", "100ms")...)
	require.Contains(t, p.stderr.String(), "min-replicas-to-write")
	require.Contains(t, p.stderr.String(), "fewer replicas follow Redis")
	api := fx.api(t, p.URL)
	id := api.create(t, p.URL, `{"total":"10.00","count":10}`)
	req, err := http.NewRequest("POST", p.URL+"/v1/campaigns/"+id+"/grab", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+api.userToken(t, "ann"))
	res, err := api.c.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	var body map[string]map[string]string
	require.NoError(t, json.NewDecoder(res.Body).Decode(&body))
	require.Equal(t, http.StatusServiceUnavailable, res.StatusCode)
	require.Equal(t, "outcome_unknown", body["error"]["code"])
	require.Contains(t, body["error"]["message"], "too few Redis replicas: 0 of the 1")
	require.NotEmpty(t, res.Header.Get("Retry-After"))

	code, text, err := api.raw("GET", p.URL+"/readyz", "")
	require.NoError(t, err)
	require.Equal(t, http.StatusServiceUnavailable, code, text)
	var ready struct {
		Error  struct{ Message string }
		Checks map[string]string
	}
	require.NoError(t, json.Unmarshal([]byte(text), &ready))
	require.Equal(t, "0 of 1 replicas attached", ready.Checks["replicas"], text)
	require.Equal(t, "ok", ready.Checks["redis"], text)
	require.Contains(t, ready.Error.Message, "replicas: 0 of 1 replicas attached")

	code, _, errs := run(t, nil, "serve", "--wait-timeout", "5s", "--data-dir", t.TempDir())
	require.Equal(t, 2, code)
	require.Contains(t, errs, "--wait-timeout")
}

// TestRebuildCommandRefuses: the rebuild command's flags, and a healthy
// campaign refused without --force.
func TestRebuildCommandRefuses(t *testing.T) {
	t.Parallel()
	r := testenv.SharedRedis(t)
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"--redis", r.Addr, "--ledger", "sqlite:x"}, "--campaign"},
		{[]string{"--campaign", "c1", "--ledger", "sqlite:x"}, "--redis"},
		{[]string{"--campaign", "c1", "--redis", r.Addr}, "--ledger"},
		{[]string{"--campaign", "bad id", "--redis", r.Addr, "--ledger", "sqlite:x"}, "--campaign"},
	} {
		code, _, errs := run(t, nil, append([]string{"rebuild"}, tc.args...)...)
		require.Equal(t, 2, code, errs)
		require.Contains(t, errs, tc.msg)
	}
	fx := newServeFixture(t, redisserver.Options{AOF: "off"})
	code, _, errs := run(t, nil, "demo", "--redis", fx.redisURL(), "--ledger", fx.dsn, "--packets", "50", "--users", "80", "--json")
	require.Equal(t, 0, code, errs)
	// The demo's campaign is settled: nothing to rebuild.
	ids, err := fx.redis.Client.Do(context.Background(), fx.redis.Client.B().Keys().Pattern("hb:{c:*}:meta").Build()).AsStrSlice()
	require.NoError(t, err)
	require.Len(t, ids, 1)
	id := strings.TrimSuffix(strings.TrimPrefix(ids[0], "hb:{c:"), "}:meta")
	code, _, errs = run(t, nil, "rebuild", "--campaign", id, "--redis", fx.redisURL(), "--ledger", fx.dsn, "--force", "--paused")
	require.Equal(t, 1, code)
	require.Contains(t, errs, "settled")
}

// TestRebuildDiscountCampaign: rebuild given a discount campaign's id says
// that it restores red packet campaigns (not that the packets were never
// recorded), and given an id nothing knows, that nothing knows it.
func TestRebuildDiscountCampaign(t *testing.T) {
	t.Parallel()
	fx := newServeFixture(t, redisserver.Options{AOF: "off"})
	p := startServe(t, fx.args()...)
	api := fx.api(t, p.URL)
	code, m, err := api.call("POST", p.URL+"/v1/discounts", api.admin, `{"budget":"10.00","quota":10}`)
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, code, m)
	id := m["id"].(string)
	code, out, errs := run(t, nil, "rebuild", "--campaign", id, "--redis", fx.redisURL(), "--ledger", fx.dsn)
	require.Equal(t, 1, code, out)
	require.Contains(t, errs, id+" is a discount campaign: rebuild restores red packet campaigns only")
	require.NotContains(t, errs, "without recording its packets")

	code, _, errs = run(t, nil, "rebuild", "--campaign", "nosuch", "--redis", fx.redisURL(), "--ledger", fx.dsn)
	require.Equal(t, 1, code)
	require.Contains(t, errs, "no campaign nosuch: neither the ledger nor Redis knows it")
}
