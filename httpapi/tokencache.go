package httpapi

import (
	"hash/maphash"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// tokenCache remembers tokens whose signature and claims were verified, so
// a user's repeated taps (and retries) skip the HMAC and the JSON parsing.
// The key is the token's exact text; the expiry and not-before times are
// checked again on every hit. Secrets do not change while a server runs,
// so a verified token stays verified. Memory is bounded: a full shard
// forgets an arbitrary entry.
type tokenCache struct {
	seed   maphash.Seed
	shards [32]tokenShard
}

type tokenShard struct {
	mu sync.Mutex
	m  map[string]cachedToken
}

type cachedToken struct {
	user     string
	exp, nbf int64 // unix nanoseconds; nbf 0 when absent
}

// tokenCacheShardSize bounds the cache at 32 x 4096 = 131,072 tokens: with
// the token text as key, about 30 to 40 MB when full.
const tokenCacheShardSize = 4096

func newTokenCache() *tokenCache {
	c := &tokenCache{seed: maphash.MakeSeed()}
	for i := range c.shards {
		c.shards[i].m = make(map[string]cachedToken)
	}
	return c
}

func (c *tokenCache) shard(raw string) *tokenShard {
	return &c.shards[maphash.String(c.seed, raw)%uint64(len(c.shards))]
}

func (c *tokenCache) get(raw string, now time.Time, leeway time.Duration) (string, bool) {
	sh := c.shard(raw)
	sh.mu.Lock()
	t, ok := sh.m[raw]
	sh.mu.Unlock()
	if !ok {
		return "", false
	}
	// The parser's own rules, to the nanosecond: valid while now is
	// before exp + leeway, and from nbf - leeway on.
	n, lw := now.UnixNano(), int64(leeway)
	if n >= t.exp+lw || (t.nbf != 0 && n < t.nbf-lw) {
		return "", false // expired or not yet valid: verify in full, which refuses it
	}
	return t.user, true
}

func (c *tokenCache) put(raw string, claims jwt.RegisteredClaims) {
	if claims.ExpiresAt == nil {
		return
	}
	t := cachedToken{user: claims.Subject, exp: claims.ExpiresAt.UnixNano()}
	if claims.NotBefore != nil {
		t.nbf = claims.NotBefore.UnixNano()
	}
	sh := c.shard(raw)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if len(sh.m) >= tokenCacheShardSize {
		for k := range sh.m {
			delete(sh.m, k)
			break
		}
	}
	sh.m[raw] = t
}
