package atomicop

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/hongbao/hongbao/internal/testenv"
)

// The script checks versions again, whatever a client sends: Go is not the
// only possible caller.
func TestVersionScriptDefence(t *testing.T) {
	t.Parallel()
	r := testenv.SharedRedis(t)
	ctx := context.Background()
	tests := []struct {
		version string
		ok      bool
	}{
		{"0", true},
		{"9007199254740991", true},  // 2^53 - 1
		{"9007199254740992", false}, // 2^53
		{"9007199254740993", false}, // 2^53 + 1, which a double rounds to 2^53
		{"18446744073709551615", false},
		{"-1", false},
		{"1.5", false},
		{"1e3", false},
		{" 1", false},
		{"0x10", false},
		{"", false},
	}
	for _, tt := range tests {
		t.Run(tt.version, func(t *testing.T) {
			t.Parallel()
			key := "t:{" + testenv.UniqueID(t) + "}:rec"
			out, err := runScript(ctx, r.Client, "update", updateScript, []string{key}, []string{"1", tt.version, "0", "", "1", "f", "v"})
			if !tt.ok {
				require.ErrorIs(t, err, ErrVersionRange)
				n, err := r.Client.Do(ctx, r.Client.B().Exists().Key(key).Build()).AsInt64()
				require.NoError(t, err)
				require.Zero(t, n, "nothing written")
				return
			}
			require.NoError(t, err)
			require.Equal(t, []int64{1, mustInt(t, tt.version)}, out)
			got, err := r.Client.Do(ctx, r.Client.B().Hget().Key(key).Field(VersionField).Build()).ToString()
			require.NoError(t, err)
			require.Equal(t, tt.version, got, "stored as the exact digits")
		})
	}
}

func mustInt(t *testing.T, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	require.NoError(t, err)
	return n
}

// A batch checks every argument and stored version before its first write.
func TestUpdateScriptChecksBeforeWriting(t *testing.T) {
	t.Parallel()
	r := testenv.SharedRedis(t)
	ctx := context.Background()
	p := "t:{" + testenv.UniqueID(t) + "}:"
	a, b := p+"a", p+"b"

	_, err := runScript(ctx, r.Client, "update", updateScript, []string{a, b},
		[]string{"2", "5", "0", "", "1", "f", "v", "9007199254740992", "0", "", "0"})
	require.ErrorIs(t, err, ErrVersionRange)

	require.NoError(t, r.Client.Do(ctx, r.Client.B().Hset().Key(b).FieldValue().FieldValue(VersionField, "soon").Build()).Error())
	_, err = runScript(ctx, r.Client, "update", updateScript, []string{a, b},
		[]string{"2", "5", "0", "", "1", "f", "v", "6", "0", "", "0"})
	require.ErrorIs(t, err, ErrVersionRange, "a corrupt stored version is refused")
	_, err = runScript(ctx, r.Client, "update", updateScript, []string{b},
		[]string{"1", "6", "0", "", "1", "f", "v"})
	require.ErrorIs(t, err, ErrVersionRange, "also by a single update")
	f, err := r.Client.Do(ctx, r.Client.B().Hget().Key(b).Field("f").Build()).ToString()
	require.True(t, rueidis.IsRedisNil(err), "nothing written to b: %q %v", f, err)

	_, err = runScript(ctx, r.Client, "update", updateScript, []string{a},
		[]string{"1", "5", "0", "", "1", VersionField, "7"})
	require.Error(t, err, "the version field is reserved in the script too")

	_, err = runScript(ctx, r.Client, "update", updateScript, []string{a},
		[]string{"1", "5", "0", "", "2", "f", "v"})
	require.Error(t, err, "fewer pairs than announced")

	n, err := r.Client.Do(ctx, r.Client.B().Exists().Key(a).Build()).AsInt64()
	require.NoError(t, err)
	require.Zero(t, n, "nothing written")
}

func TestHashTag(t *testing.T) {
	t.Parallel()
	tests := []struct {
		key, tag string
		ok       bool
	}{
		{"plain", "", false},
		{"{a}", "a", true},
		{"x{a}y", "a", true},
		{"{a}{b}", "a", true},
		{"{}a", "", false},
		{"{}{a}", "", false},
		{"{{a}", "{a", true},
		{"a}{b}", "b", true},
		{"{a", "", false},
		{"}", "", false},
	}
	for _, tt := range tests {
		tag, ok := hashTag(tt.key)
		require.Equal(t, tt.ok, ok, tt.key)
		require.Equal(t, tt.tag, tag, tt.key)
	}
}

// FuzzKeys checks that every accepted record key lands with its summary in
// one slot, and that message keys share the id's slot.
func FuzzKeys(f *testing.F) {
	for _, s := range []string{"dev-1", "{fleet}dev", "a}b", "{}x", "{{a}", "x{y}z{w}", "é{ü}"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, key string) {
		rkey, tag, err := recordKey("p:", key)
		if err == nil {
			got, ok := hashTag(rkey)
			require.True(t, ok, "%q has a tag", rkey)
			require.Equal(t, tag, got)
			sum, ok := hashTag(summaryKey("p:", tag, "s{x}"))
			require.True(t, ok)
			require.Equal(t, tag, sum)
		} else {
			require.ErrorIs(t, err, ErrInvalidKey)
		}
		mark, fence, err := messageKeys("p:", key)
		if err != nil {
			require.ErrorIs(t, err, ErrInvalidKey)
			return
		}
		require.False(t, strings.ContainsAny(key, "{}"))
		m, ok := hashTag(mark)
		require.True(t, ok)
		require.Equal(t, key, m)
		fe, _ := hashTag(fence)
		require.Equal(t, m, fe)
	})
}

// The claim script checks its floor and the counter it draws from before
// any write, whatever a client sends: a floor that is no token below
// MaxToken, and a counter that holds none, leave mark and counter as
// they were.
func TestClaimScriptDefence(t *testing.T) {
	t.Parallel()
	r := testenv.SharedRedis(t)
	ctx := context.Background()
	claim := func(t *testing.T, floor string) ([]string, []int64, error) {
		t.Helper()
		p := "t:{" + testenv.UniqueID(t) + "}:"
		keys := []string{p + "mark", p + "fence"}
		out, err := runScript(ctx, r.Client, "claim", claimScript, keys, []string{"60000", "60000", floor})
		return keys, out, err
	}
	exists := func(t *testing.T, keys []string) int64 {
		t.Helper()
		n, err := r.Client.Do(ctx, r.Client.B().Exists().Key(keys...).Build()).AsInt64()
		require.NoError(t, err)
		return n
	}
	for _, floor := range []string{"-1", "01", "1.5", "1e3", " 1", "", "9007199254740991", "9007199254740992", "18446744073709551615"} {
		t.Run("floor "+floor, func(t *testing.T) {
			keys, _, err := claim(t, floor)
			require.Error(t, err)
			require.Zero(t, exists(t, keys), "nothing written")
		})
	}
	t.Run("the largest floor", func(t *testing.T) {
		_, out, err := claim(t, "9007199254740990")
		require.NoError(t, err)
		require.Equal(t, []int64{1, MaxToken, 60000}, out)
	})
	for _, counter := range []string{"soon", "-5", "007", "9007199254740991", "1.5"} {
		t.Run("counter "+counter, func(t *testing.T) {
			p := "t:{" + testenv.UniqueID(t) + "}:"
			keys := []string{p + "mark", p + "fence"}
			require.NoError(t, r.Client.Do(ctx, r.Client.B().Set().Key(keys[1]).Value(counter).Build()).Error())
			_, err := runScript(ctx, r.Client, "claim", claimScript, keys, []string{"60000", "60000", "0"})
			require.ErrorIs(t, err, ErrCorrupt)
			require.EqualValues(t, 1, exists(t, keys), "no mark written")
			v, err := r.Client.Do(ctx, r.Client.B().Get().Key(keys[1]).Build()).ToString()
			require.NoError(t, err)
			require.Equal(t, counter, v, "the counter unchanged")
		})
	}
}
