// Package race runs a naive approach and hongbao's atomicop scripts side
// by side under load, on the same Redis, and counts what each got wrong
// against ground truth kept in Go. It is the workload of the command
// "hongbao race":
//
//   - update-if-newer (Update): updates of device records sent out of
//     order; the naive side reads the stored version, then writes when
//     newer, then moves a summary count.
//   - once (Once): messages handed to several workers that may die
//     before or after their push; the naive side checks a mark, sets it,
//     pushes.
package race

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/redis/rueidis"

	"github.com/hongbao/hongbao/internal/random"
)

// The modes of a race, as the command names them.
const (
	UpdateIfNewer = "update-if-newer"
	OnceOnly      = "once"
)

// Config is one race's workload. Validate's messages name the command's
// flags (--workers for Workers, and so on).
type Config struct {
	// Workers is the number of concurrent workers per approach, 1..4096.
	Workers int
	// Ops is the number of updates sent (update-if-newer), or of copies
	// of messages handed out (once), 1..10,000,000.
	Ops int
	// Keys is the number of device records (update-if-newer), or of
	// messages handed out together, their copies shuffled (once),
	// 1..1,000,000.
	Keys int
	// Copies is how many workers each message is handed to (once), 1..64.
	Copies int
	// Die is the probability that a worker dies after claiming, before
	// pushing (once); DieAfterPush after pushing, before confirming. Each
	// in [0, 0.9], their sum at most 0.9.
	Die, DieAfterPush float64
	// Lease is the lease of a claim (once), 10ms..1m; the source
	// redelivers a dead worker's copy a little after it.
	Lease time.Duration
	// Seed seeds the workload: the same seed, the same updates and order.
	Seed uint64
}

// Validate checks the workload's ranges.
func (cfg Config) Validate() error {
	for _, c := range []struct {
		name  string
		v, hi int
	}{
		{"workers", cfg.Workers, 4096},
		{"ops", cfg.Ops, 10_000_000},
		{"keys", cfg.Keys, 1_000_000},
		{"copies", cfg.Copies, 64},
	} {
		if c.v < 1 || c.v > c.hi {
			return fmt.Errorf("--%s must be in 1..%d, not %d", c.name, c.hi, c.v)
		}
	}
	// A worker dies at most 90% of the time, or a message could take
	// very many leases to get through.
	for _, p := range []struct {
		name string
		v    float64
	}{{"die", cfg.Die}, {"die-after-push", cfg.DieAfterPush}} {
		if !(p.v >= 0 && p.v <= 0.9) {
			return fmt.Errorf("--%s must be a probability in [0, 0.9], not %v", p.name, p.v)
		}
	}
	if cfg.Die+cfg.DieAfterPush > 0.9 {
		return fmt.Errorf("--die plus --die-after-push must be at most 0.9")
	}
	if cfg.Lease < 10*time.Millisecond || cfg.Lease > time.Minute {
		return fmt.Errorf("--lease must be in 10ms..1m, not %v", cfg.Lease)
	}
	return nil
}

// Messages is the number of messages of a once race: Ops copies handed
// out, Copies per message.
func (cfg Config) Messages() int { return max(1, cfg.Ops/cfg.Copies) }

// Report is the command's --json output: {"naive": {...}, "hongbao": {...}}.
type Report[S any] struct {
	Naive   S `json:"naive"`
	Hongbao S `json:"hongbao"`
}

// NewPrefix returns a key prefix no other run uses.
func NewPrefix() string {
	return "hb:race:" + random.Hex(6) + ":"
}

// Cleanup deletes the keys of a run from every node.
func Cleanup(ctx context.Context, c rueidis.Client, prefix string) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for _, n := range c.Nodes() {
		var cursor uint64
		for {
			e, err := n.Do(ctx, n.B().Scan().Cursor(cursor).Match(prefix+"*").Count(1000).Build()).AsScanEntry()
			if err != nil {
				break
			}
			// One key per command, pipelined: in a cluster the keys of a
			// node span many slots.
			cmds := make(rueidis.Commands, 0, len(e.Elements))
			for _, k := range e.Elements {
				cmds = append(cmds, n.B().Unlink().Key(k).Build())
			}
			if len(cmds) > 0 {
				n.DoMulti(ctx, cmds...)
			}
			if cursor = e.Cursor; cursor == 0 {
				break
			}
		}
	}
}

// firstError keeps the first error of many goroutines and cancels the
// others.
type firstError struct {
	once   sync.Once
	err    error
	cancel context.CancelFunc
}

func (e *firstError) set(err error) {
	e.once.Do(func() { e.err = err; e.cancel() })
}
