package redisstore

import (
	"context"

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
