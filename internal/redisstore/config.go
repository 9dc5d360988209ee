package redisstore

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"
)

// ConfigGet reads one Redis configuration parameter.
func ConfigGet(ctx context.Context, c rueidis.Client, name string) (string, error) {
	m, err := c.Do(ctx, c.B().ConfigGet().Parameter(name).Build()).AsStrMap()
	if err != nil {
		return "", err
	}
	return m[name], nil
}

// Persistence says how Redis persists writes: "off" without an AOF, else
// its appendfsync policy ("always", "everysec" or "no"). Only "always"
// keeps every acknowledged grant through a Redis crash. It fails where
// CONFIG GET is not allowed (some managed services rename it).
func Persistence(ctx context.Context, c rueidis.Client) (string, error) {
	aof, err := ConfigGet(ctx, c, "appendonly")
	if err != nil {
		return "", err
	}
	if aof != "yes" {
		return "off", nil
	}
	return ConfigGet(ctx, c, "appendfsync")
}

// Ping checks that Redis answers.
func (s *Store) Ping(ctx context.Context) error {
	return s.c.Do(ctx, s.c.B().Ping().Build()).Error()
}

// readyKeyTTL bounds the life of the readiness probe's key: it is written
// again at every reading, and gone soon after the last.
const readyKeyTTL = time.Minute

// ProbeWrite writes the namespace's ReadyKey, with a short expiry: a write
// of the deployment's own, which Redis takes only when it takes writes
// (not while it refuses them for too few replicas, as a replica or a
// demoted primary, while loading, when it cannot persist or is full). On a
// Redis Cluster it tells of the node holding that key.
func (s *Store) ProbeWrite(ctx context.Context) error {
	k := s.ns.ReadyKey()
	return s.c.Do(ctx, s.c.B().Set().Key(k).Value(strconv.FormatInt(time.Now().UnixMilli(), 10)).
		Px(readyKeyTTL).Build()).Error()
}

// Replicas reads how many replicas are attached to the primary that
// ProbeWrite writes to: INFO replication's connected_slaves, on that
// key's node.
func (s *Store) Replicas(ctx context.Context) (int, error) {
	info, err := s.c.Do(ctx, s.c.B().Info().Section("replication").Build().SetSlot(s.ns.ReadyKey())).ToString()
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "connected_slaves:"); ok {
			return strconv.Atoi(v)
		}
	}
	return 0, errors.New("INFO replication has no connected_slaves")
}

// RefusalCode is the code of Redis's error reply in err ("NOREPLICAS",
// "READONLY", "LOADING", "MASTERDOWN", "MISCONF", "OOM", ...): its first
// word. It is "" when err holds no error reply (Redis did not answer).
func RefusalCode(err error) string {
	var re *rueidis.RedisError
	if !errors.As(err, &re) {
		return ""
	}
	code, _, _ := strings.Cut(re.Error(), " ")
	return code
}
