package rebuild_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/internal/redisstore"
	"github.com/hongbao/hongbao/rebuild"
)

// homedOn returns a user named prefix<i> homed on shard k of shards.
func homedOn(k, shards int, prefix string) string {
	for i := 0; ; i++ {
		u := prefix + strconv.Itoa(i)
		if redisstore.HomeShard(u, shards) == k {
			return u
		}
	}
}

// noteSays reports whether a note of rep contains s.
func noteSays(rep *rebuild.Report, s string) bool {
	for _, n := range rep.Notes {
		if strings.Contains(n, s) {
			return true
		}
	}
	return false
}

// requireRebuiltPaused checks that the rebuild brought the campaign back
// paused for source, that every shard holds the pause, and that a new
// user homed on each shard is answered Paused.
func requireRebuiltPaused(t *testing.T, e *env, id string, shards int, rep *rebuild.Report, err error, source, prefix string) {
	t.Helper()
	require.NoError(t, err)
	require.True(t, rep.Paused)
	require.Equal(t, source, rep.PauseSource)
	require.False(t, rep.PauseUnknown)
	st, err := e.eng.Status(ctx, id)
	require.NoError(t, err)
	require.True(t, st.Paused)
	require.Equal(t, shards, st.PausedShards)
	for k := range shards {
		u := homedOn(k, shards, prefix)
		g, err := e.eng.Grab(ctx, id, u)
		require.NoError(t, err)
		require.Equal(t, hongbao.Paused, g.Outcome, "%s on shard %d", u, k)
	}
}

// TestRebuildKeepsAPause: a paused campaign that loses a shard other than
// the root comes back paused on every shard, the rebuilt one too; one
// that loses everything comes back unpaused with the pause reported
// unknown, and paused on Config.Paused.
func TestRebuildKeepsAPause(t *testing.T) {
	t.Parallel()
	const shards = 3
	e := newEnv(t, ledgers[0].dsn(t))
	c := e.create(90, shards)
	grabAll(t, e.eng, c.ID, "u", 12)
	_, err := e.eng.Pause(ctx, c.ID)
	require.NoError(t, err)
	quiet(t, e.eng)
	flushKeysOf(t, e, c.ID, 1)
	rep, err := e.rebuild(e.r.Client, c.ID, false)
	requireRebuiltPaused(t, e, c.ID, shards, rep, err, "root", "new")

	// A pause stopped half way (the root not written yet) comes back whole.
	_, err = e.eng.Resume(ctx, c.ID)
	require.NoError(t, err)
	k2 := redisstore.Default.ShardKeys(c.ID, shards, 2)
	require.NoError(t, e.r.Client.Do(ctx, e.r.Client.B().Hset().Key(k2.Meta).FieldValue().FieldValue("paused", "1").Build()).Error())
	flushKeysOf(t, e, c.ID, 1)
	rep, err = e.rebuild(e.r.Client, c.ID, false)
	requireRebuiltPaused(t, e, c.ID, shards, rep, err, "shard 2", "half")

	quiet(t, e.eng)
	flushAll(t, e.r.Client)
	rep, err = e.rebuild(e.r.Client, c.ID, false)
	require.NoError(t, err)
	require.False(t, rep.Paused)
	require.True(t, rep.PauseUnknown)
	require.True(t, noteSays(rep, "pause it again"), "notes: %v", rep.Notes)
	st, err := e.eng.Status(ctx, c.ID)
	require.NoError(t, err)
	require.False(t, st.Paused)
	require.Zero(t, st.PausedShards)

	quiet(t, e.eng)
	flushAll(t, e.r.Client)
	rep, err = rebuild.Rebuild(ctx, rebuild.Config{Redis: e.r.Client, Ledger: e.l, Paused: true}, c.ID)
	requireRebuiltPaused(t, e, c.ID, shards, rep, err, "config", "cfg")
	_, err = e.eng.Resume(ctx, c.ID)
	require.NoError(t, err)
	e.requireSettledOK(e.r.Client, e.eng, c.ID)
}

// TestRebuildBlocklists: a shard's blocked hash that survived comes
// through the rebuild unchanged and its users are still refused, even
// when the shard lost its meta; a shard that lost the hash is counted,
// and comes back with the placeholder every live shard holds.
func TestRebuildBlocklists(t *testing.T) {
	t.Parallel()
	const shards = 2
	e := newEnv(t, ledgers[0].dsn(t))
	c := e.create(60, shards)
	grabAll(t, e.eng, c.ID, "u", 10)
	bad0, bad1 := homedOn(0, shards, "bad"), homedOn(1, shards, "bad")
	_, err := e.eng.Block(ctx, c.ID, []string{bad0, bad1})
	require.NoError(t, err)
	k0, k1 := redisstore.Default.ShardKeys(c.ID, shards, 0), redisstore.Default.ShardKeys(c.ID, shards, 1)
	rc := e.r.Client
	hash := func(k redisstore.Keys) map[string]string {
		m, err := rc.Do(ctx, rc.B().Hgetall().Key(k.Blocked).Build()).AsStrMap()
		require.NoError(t, err)
		return m
	}
	before := hash(k0)
	require.Contains(t, before, bad0)
	quiet(t, e.eng)
	for _, k := range []redisstore.Keys{k0, k1} { // all but shard 0's blocked hash
		require.NoError(t, rc.Do(ctx, rc.B().Del().Key(k.Meta, k.Pool, k.Claims, k.Grants, k.Dead, k.Xfers, k.Applied).Build()).Error())
	}
	require.NoError(t, rc.Do(ctx, rc.B().Del().Key(k1.Blocked).Build()).Error())
	rep, err := e.rebuild(rc, c.ID, false)
	require.NoError(t, err)
	require.Equal(t, 1, rep.BlocklistLostShards)
	require.True(t, noteSays(rep, "block those users again"), "notes: %v", rep.Notes)
	require.True(t, rep.PauseUnknown)
	require.Equal(t, before, hash(k0), "a surviving blocked hash is kept unchanged")
	require.Equal(t, map[string]string{"": "0"}, hash(k1), "a lost one comes back with its placeholder")
	g, err := e.eng.Grab(ctx, c.ID, bad0)
	require.NoError(t, err)
	require.Equal(t, hongbao.Blocked, g.Outcome, "blocked on a surviving hash")
	st, err := e.eng.Status(ctx, c.ID)
	require.NoError(t, err)
	require.EqualValues(t, 1, st.BlockedUsers)

	// Run again (forced): nothing was lost this time.
	rep, err = e.rebuild(rc, c.ID, true)
	require.NoError(t, err)
	require.Zero(t, rep.BlocklistLostShards)
	require.False(t, rep.PauseUnknown)
	require.Equal(t, before, hash(k0))
	e.requireSettledOK(rc, e.eng, c.ID)
}
