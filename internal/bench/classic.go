package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"
)

// ClassicScript is the classic grab, reproduced as the baseline: the pool
// is a list of JSON packets, a grab is one EVAL of this text (never
// EVALSHA), and the user id travels as a key.
//
//	KEYS[1] pool list   KEYS[2] consumed list   KEYS[3] dedupe hash   KEYS[4] user id
//	Reply   the packet as JSON with userId added, or nil when the user has
//	        grabbed before or the pool is empty
const ClassicScript = `if redis.call('hexists', KEYS[3], KEYS[4]) ~= 0 then
  return nil
else
  local packet = redis.call('rpop', KEYS[1])
  if packet then
    local x = cjson.decode(packet)
    x['userId'] = KEYS[4]
    local re = cjson.encode(x)
    redis.call('hset', KEYS[3], KEYS[4], KEYS[4])
    redis.call('lpush', KEYS[2], re)
    return re
  end
end
return nil
`

// classicPacket is one element of the classic lists.
type classicPacket struct {
	ID     int64  `json:"id"`
	Money  int64  `json:"money"`
	UserID string `json:"userId,omitempty"`
}

type classicKeys struct{ pool, consumed, dedupe string }

func newClassicKeys(runID string) classicKeys {
	p := "bench:classic:" + runID + ":"
	return classicKeys{pool: p + "pool", consumed: p + "consumed", dedupe: p + "dedupe"}
}

// runClassic runs one classic measurement: it loads the packets as the JSON
// pool, then Concurrency workers, each on its own connection with one
// blocking EVAL per grab, walk their own range of users until the pool is
// empty.
func runClassic(ctx context.Context, t *target, o Options, amounts []int64, label string) (*runStats, error) {
	k := newClassicKeys(t.runID)
	c := t.client
	cleanup := func() {
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = c.Do(cctx, c.B().Unlink().Key(k.pool, k.consumed, k.dedupe).Build()).Error()
	}
	cleanup()
	if t.shared {
		defer cleanup()
	}
	if err := loadClassic(ctx, t, k, amounts, o.progress("loading", int64(len(amounts)))); err != nil {
		return nil, err
	}
	rs := &runStats{}
	var err error
	if rs.pooledBytes, err = t.memoryUsage(ctx, k.pool); err != nil {
		return nil, err
	}

	var (
		probs  problems
		owner  = make([]atomic.Int32, o.Packets) // id-1 -> user index + 1
		lats   = make([]latencies, o.Concurrency)
		counts = make([]struct{ grabs, granted, soldOut, cents int64 }, o.Concurrency)
		conns  = make([]*respConn, o.Concurrency)
		wg     sync.WaitGroup
		start  = make(chan struct{})
		mu     sync.Mutex
		runErr error
	)
	defer func() {
		for _, rc := range conns {
			if rc != nil {
				rc.Close()
			}
		}
	}()
	// Connections are opened before the clock starts.
	for w := range conns {
		rc, err := dialRESP(t.addr, t.user, t.password, t.db)
		if err != nil {
			return nil, fmt.Errorf("connection %d: %w", w+1, err)
		}
		conns[w] = rc
	}
	var stop atomic.Bool
	fail := func(err error) {
		mu.Lock()
		if runErr == nil {
			runErr = err
		}
		mu.Unlock()
		stop.Store(true)
	}
	bar := o.progress(label, int64(min(o.Users, o.Packets)))
	for w := 0; w < o.Concurrency; w++ {
		from, to := userRange(w, o.Concurrency, o.Users)
		lats[w] = make(latencies, 0, to-from)
		wg.Add(1)
		go func() {
			defer wg.Done()
			lat, n, rc := &lats[w], &counts[w], conns[w]
			args := []string{"EVAL", ClassicScript, "4", k.pool, k.consumed, k.dedupe, ""}
			var p classicPacket
			<-start
			done := 0
			for u := from; u < to && !stop.Load(); u++ {
				args[6] = UserName(u)
				t0 := time.Now()
				reply, err := rc.do(args...)
				lat.add(time.Since(t0))
				if errors.Is(err, errNil) {
					// Each user grabs once, so nil means the pool is empty.
					n.grabs++
					n.soldOut++
					break
				}
				if err != nil {
					fail(err)
					return
				}
				n.grabs++
				n.granted++
				// A client decodes the packet it was given, as this one does.
				p = classicPacket{}
				if err := json.Unmarshal(reply, &p); err != nil {
					probs.add("reply %q is not a packet: %v", reply, err)
					continue
				}
				n.cents += p.Money
				if p.UserID != args[6] {
					probs.add("user %s was given a packet for %q", args[6], p.UserID)
				}
				if p.ID < 1 || p.ID > int64(o.Packets) {
					probs.add("user %s was given packet %d, outside 1..%d", args[6], p.ID, o.Packets)
				} else {
					if !owner[p.ID-1].CompareAndSwap(0, int32(u+1)) {
						probs.add("packet %d was given to %s and %s", p.ID, UserName(int(owner[p.ID-1].Load())-1), args[6])
					}
					if p.Money != amounts[p.ID-1] {
						probs.add("packet %d was given with %d cents; the split made it %d", p.ID, p.Money, amounts[p.ID-1])
					}
				}
				if done++; done == 64 {
					bar.Add(int64(done))
					done = 0
				}
			}
			bar.Add(int64(done))
		}()
	}
	// The workers block in reads, not on ctx: an interrupt unblocks them.
	finished := make(chan struct{})
	defer close(finished)
	go func() {
		select {
		case <-ctx.Done():
			stop.Store(true)
			for _, rc := range conns {
				_ = rc.c.SetDeadline(time.Now())
			}
		case <-finished:
		}
	}()
	perr := grabPhase(ctx, t, rs, start, &wg, bar, func() { stop.Store(true) })
	if runErr != nil {
		return nil, runErr // the workers' own error says more
	}
	if perr != nil {
		return nil, perr
	}

	var toldCents int64
	rs.hist = histogramOf(lats)
	for w := range counts {
		n := &counts[w]
		rs.grabs += n.grabs
		rs.granted += n.granted
		rs.soldOut += n.soldOut
		toldCents += n.cents
	}
	rs.batches, rs.carried = uint64(rs.grabs), uint64(rs.grabs)
	rs.sizes = []BatchBucket{{Max: 1, Count: uint64(rs.grabs)}}
	if rs.grantBytes, err = t.memoryUsage(ctx, k.consumed, k.dedupe); err != nil {
		return nil, err
	}
	if err := checkClassic(ctx, t, k, o, amounts, rs.granted, toldCents, &probs); err != nil {
		return nil, err
	}
	rs.problems = probs.all()
	rs.peakRSSChecks = PeakRSSMB()
	return rs, nil
}

// loadClassic pushes the packets as JSON objects {"id": n, "money": n},
// in pipelined RPUSH chunks (the pool is RPOPped, so the last id goes
// first).
func loadClassic(ctx context.Context, t *target, k classicKeys, amounts []int64, bar Progress) error {
	defer bar.Done()
	c := t.client
	const chunk, pipeline = 1000, 16
	var cmds []rueidis.Completed
	flush := func(done int) error {
		for _, r := range c.DoMulti(ctx, cmds...) {
			if err := r.Error(); err != nil {
				return fmt.Errorf("load the classic pool: %w", err)
			}
		}
		cmds = cmds[:0]
		bar.Set(int64(done))
		return nil
	}
	vals := make([]string, 0, chunk)
	var buf []byte
	for i := 0; i < len(amounts); i += chunk {
		vals = vals[:0]
		for j := i; j < min(i+chunk, len(amounts)); j++ {
			buf = append(buf[:0], `{"id":`...)
			buf = strconv.AppendInt(buf, int64(j+1), 10)
			buf = append(buf, `,"money":`...)
			buf = strconv.AppendInt(buf, amounts[j], 10)
			buf = append(buf, '}')
			vals = append(vals, string(buf))
		}
		cmds = append(cmds, c.B().Rpush().Key(k.pool).Element(vals...).Build())
		if len(cmds) == pipeline {
			if err := flush(min(i+chunk, len(amounts))); err != nil {
				return err
			}
		}
	}
	return flush(len(amounts))
}

// checkClassic checks the classic invariants from the contents of Redis:
// consumed + pool = packets, their money sums to the total, no user twice
// in consumed, the dedupe hash as long as consumed; and that the contents
// agree with what the clients were told and with the split.
func checkClassic(ctx context.Context, t *target, k classicKeys, o Options, amounts []int64, told, toldCents int64, probs *problems) error {
	c := t.client
	llen := func(key string) (int64, error) { return c.Do(ctx, c.B().Llen().Key(key).Build()).AsInt64() }
	poolLen, err := llen(k.pool)
	if err != nil {
		return err
	}
	consumedLen, err := llen(k.consumed)
	if err != nil {
		return err
	}
	dedupeLen, err := c.Do(ctx, c.B().Hlen().Key(k.dedupe).Build()).AsInt64()
	if err != nil {
		return err
	}
	if consumedLen+poolLen != int64(o.Packets) {
		probs.add("consumed %d + pool %d != %d packets", consumedLen, poolLen, o.Packets)
	}
	if dedupeLen != consumedLen {
		probs.add("dedupe hash holds %d users, consumed list %d packets", dedupeLen, consumedLen)
	}
	if consumedLen != told {
		probs.add("clients were told of %d packets, the consumed list holds %d", told, consumedLen)
	}
	seenUser := make([]bool, o.Users)
	seenPacket := make([]bool, o.Packets)
	var consumedCents, poolCents int64
	scan := func(key string, consumed bool, sum *int64) error {
		const page = 10000
		for from := int64(0); ; from += page {
			vals, err := c.Do(ctx, c.B().Lrange().Key(key).Start(from).Stop(from+page-1).Build()).AsStrSlice()
			if err != nil {
				return fmt.Errorf("LRANGE %s: %w", key, err)
			}
			for _, v := range vals {
				var p classicPacket
				if err := json.Unmarshal([]byte(v), &p); err != nil {
					probs.add("%s holds %q: %v", key, v, err)
					continue
				}
				*sum += p.Money
				if p.ID < 1 || p.ID > int64(o.Packets) {
					probs.add("%s holds packet %d, outside 1..%d", key, p.ID, o.Packets)
					continue
				}
				if seenPacket[p.ID-1] {
					probs.add("packet %d is in the lists twice", p.ID)
				}
				seenPacket[p.ID-1] = true
				if p.Money != amounts[p.ID-1] {
					probs.add("packet %d holds %d cents; the split made it %d", p.ID, p.Money, amounts[p.ID-1])
				}
				if !consumed {
					continue
				}
				n, err := strconv.Atoi(strings.TrimPrefix(p.UserID, "u"))
				if err != nil || !strings.HasPrefix(p.UserID, "u") || n < 1 || n > o.Users {
					probs.add("consumed packet %d names user %q, not one of ours", p.ID, p.UserID)
					continue
				}
				if seenUser[n-1] {
					probs.add("user %s is in the consumed list twice", p.UserID)
				}
				seenUser[n-1] = true
			}
			if len(vals) < page {
				return nil
			}
		}
	}
	if err := scan(k.consumed, true, &consumedCents); err != nil {
		return err
	}
	if err := scan(k.pool, false, &poolCents); err != nil {
		return err
	}
	if consumedCents+poolCents != o.Total {
		probs.add("conservation: consumed %d + pool %d = %d cents, total %d", consumedCents, poolCents, consumedCents+poolCents, o.Total)
	}
	if consumedCents != toldCents {
		probs.add("clients were told of %d cents, the consumed list holds %d", toldCents, consumedCents)
	}
	if want := int64(min(o.Users, o.Packets)); told != want {
		probs.add("%d packets granted for %d users and %d packets", told, o.Users, o.Packets)
	}
	return nil
}
