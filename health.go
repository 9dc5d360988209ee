package hongbao

import (
	"context"
	"errors"
	"fmt"

	"github.com/hongbao/hongbao/internal/redisstore"
)

// Health is one reading of what the engine needs of Redis to grant:
// Redis takes writes, and, with Config.WaitReplicas, as many replicas are
// attached as each WAIT asks for. Engine.Health reads it.
type Health struct {
	// Redis is "ok" when Redis took a write of the engine's own (a key of
	// its namespace, no campaign's); "unreachable" when Redis did not
	// answer; else the code of Redis's refusal of the write: "NOREPLICAS"
	// (fewer good replicas than its min-replicas-to-write), "READONLY" (a
	// replica: the client still speaks to a demoted primary), "LOADING"
	// (loading its data set after a restart), "MASTERDOWN", "MISCONF" (it
	// cannot persist), "OOM" (at maxmemory), or another code.
	Redis string
	// Wanted is Config.WaitReplicas. Replicas is how many replicas are
	// attached to the primary (INFO replication's connected_slaves),
	// read only when Wanted is above 0 and Redis is "ok".
	Wanted, Replicas int
	// Err is what the reading met, for a log: the probe's error when Redis
	// is not "ok", else the error of the replicas' count (then Replicas is
	// unknown, and not held against the engine). It may name hosts; it is
	// not for clients.
	Err error
}

// Ready says whether the engine can grant: Redis takes writes and, when
// the engine waits for replicas, enough are attached (or their count
// could not be read).
func (h Health) Ready() bool {
	return h.Redis == "ok" && (h.Wanted == 0 || h.Err != nil || h.Replicas >= h.Wanted)
}

// ReplicasShort says whether fewer replicas are attached than the engine
// waits for: then every WAIT falls short and every grab answers
// ErrOutcomeUnknown (a *ReplicasError).
func (h Health) ReplicasShort() bool {
	return h.Redis == "ok" && h.Wanted > 0 && h.Err == nil && h.Replicas < h.Wanted
}

// String says what the reading found, in words fit for an operator:
// "ok", "unreachable", "refuses writes (READONLY)", "0 of 1 replicas
// attached".
func (h Health) String() string {
	switch {
	case h.Redis == "unreachable":
		return h.Redis
	case h.Redis != "ok":
		return "refuses writes (" + h.Redis + ")"
	case h.ReplicasShort():
		return fmt.Sprintf("%d of %d replicas attached", h.Replicas, h.Wanted)
	}
	return "ok"
}

// Health reads whether the engine can grant now: it writes a key of the
// engine's namespace (a write Redis refuses when it cannot take writes:
// too few replicas for its min-replicas-to-write, a demoted primary, a
// server still loading), and with Config.WaitReplicas counts the replicas
// attached to the primary. Two round trips; a caller that asks often (a
// readiness probe) keeps the reading for a while. On a Redis Cluster it
// reads the node of that key.
func (e *Engine) Health(ctx context.Context) Health {
	h := Health{Redis: "ok", Wanted: e.cfg.WaitReplicas}
	if err := e.store.ProbeWrite(ctx); err != nil {
		h.Redis, h.Err = redisstore.RefusalCode(err), fmt.Errorf("hongbao: health: write: %w", err)
		if h.Redis == "" || errors.Is(err, redisstore.ErrClientClosed) {
			h.Redis = "unreachable"
		}
		return h
	}
	if h.Wanted == 0 {
		return h
	}
	n, err := e.store.Replicas(ctx)
	if err != nil {
		h.Err = fmt.Errorf("hongbao: health: count the replicas: %w", err)
		return h
	}
	h.Replicas = n
	return h
}
