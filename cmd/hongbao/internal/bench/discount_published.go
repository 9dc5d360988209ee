package bench

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"
)

// The published design, hand-written as its description goes: the amounts
// wait in a list; a payment journals its start under its own key (the
// timestamp), pops an amount plus one waiting in the compensation list (a
// script, PublishedPop), adds count and amount to the user's usage in one
// value (HINCRBY of count<<32 + cents), rolls both back when the count is
// over the limit, clips when the amount is over it (the excess pushed to
// compensation), and marks its journal done (-1). Every step is its own
// call, on one blocking connection per worker, nothing pipelined: as a
// team would write it from the description. The task that deletes finished
// journals and rolls back timed-out ones every 5 s is not run during the
// measurement: it would only add to this design's cost.

// PublishedPop is the published design's pop step.
//
//	KEYS[1] amounts list   KEYS[2] compensation list
//	Reply   "<amount>:<compensation>" (compensation 0 when none waits), or
//	        nil when the amounts are exhausted
const PublishedPop = `local a = redis.call('LPOP', KEYS[1])
if not a then
  return nil
end
local c = redis.call('LPOP', KEYS[2])
return a .. ':' .. (c or '0')
`

// usageUnit is the count's place in a packed usage value.
const usageUnit = int64(1) << 32

type publishedKeys struct{ queue, comp, usage, journal string }

func newPublishedKeys(runID string) publishedKeys {
	p := "bench:pub:" + runID + ":"
	return publishedKeys{queue: p + "queue", comp: p + "comp", usage: p + "usage", journal: p + "j:"}
}

// runPublished measures the published design on the same amounts.
func runPublished(ctx context.Context, t *target, o DiscountOptions, amounts []int64, label string) (*dstats, error) {
	k := newPublishedKeys(t.runID)
	if t.shared {
		defer dropPublished(t, k)
	}
	if err := loadPublished(ctx, t.client, k, amounts); err != nil {
		return nil, err
	}
	sha, err := t.client.Do(ctx, t.client.B().ScriptLoad().Script(PublishedPop).Build()).ToString()
	if err != nil {
		return nil, fmt.Errorf("load the pop script: %w", err)
	}
	conns, err := dialClassic(t, o.BaselineWorkers)
	if err != nil {
		return nil, err
	}
	defer closeAll(conns)
	counts := make([]pubCounts, o.BaselineWorkers)
	var probs problems
	ds, err := measureWorkers(ctx, t, o, label, o.BaselineWorkers, func(w, from, to int, lat *latencies, bar Progress) {
		pw := &pubWorker{rc: conns[w], k: k, sha: sha, o: o, c: &counts[w], lat: lat, w: w}
		if err := pw.run(from, to, bar); err != nil {
			probs.add("worker %d: %v", w, err)
		}
	})
	if err != nil {
		return nil, err
	}
	var cents int64
	for _, c := range counts {
		ds.payments, ds.refused, ds.calls, cents = ds.payments+c.payments, ds.refused+c.refused, ds.calls+c.calls, cents+c.cents
	}
	checkPublished(ctx, t.client, k, o, cents, &probs)
	ds.problems = probs.all()
	return ds, nil
}

// loadPublished pushes the amounts onto the list, in pipelined chunks.
func loadPublished(ctx context.Context, c rueidis.Client, k publishedKeys, amounts []int64) error {
	var cmds rueidis.Commands
	for off := 0; off < len(amounts); off += 1000 {
		vals := make([]string, 0, 1000)
		for _, a := range amounts[off:min(off+1000, len(amounts))] {
			vals = append(vals, strconv.FormatInt(a, 10))
		}
		cmds = append(cmds, c.B().Rpush().Key(k.queue).Element(vals...).Build())
	}
	cmds = append(cmds, c.B().Del().Key(k.comp, k.usage).Build())
	for _, r := range c.DoMulti(ctx, cmds...) {
		if err := r.Error(); err != nil {
			return fmt.Errorf("load the published design's amounts: %w", err)
		}
	}
	return nil
}

type pubCounts struct{ payments, refused, calls, cents int64 }

// pubWorker is one worker of the published design.
type pubWorker struct {
	rc  *respConn
	k   publishedKeys
	sha string
	o   DiscountOptions
	c   *pubCounts
	lat *latencies
	w   int
}

// do is one call, counted.
func (pw *pubWorker) do(args ...string) ([]byte, error) {
	pw.c.calls++
	return pw.rc.do(args...)
}

// run pays once for each user in [from, to).
func (pw *pubWorker) run(from, to int, bar Progress) error {
	tk := ticker{bar: bar}
	defer tk.flush()
	for u := from; u < to; u++ {
		t0 := time.Now()
		cents, paid, err := pw.pay(UserName(u), pw.k.journal+strconv.Itoa(pw.w)+"-"+strconv.Itoa(u))
		*pw.lat = append(*pw.lat, uint32(min(max(time.Since(t0).Microseconds(), 1), histMaxUs)))
		if err != nil {
			return err
		}
		if paid {
			pw.c.payments++
			pw.c.cents += cents
		} else {
			pw.c.refused++
		}
		tk.tick()
	}
	return nil
}

// pay is one payment of the published design, step by step.
func (pw *pubWorker) pay(user, journal string) (cents int64, paid bool, err error) {
	if _, err := pw.do("SET", journal, strconv.FormatInt(time.Now().UnixMilli(), 10)); err != nil {
		return 0, false, err
	}
	reply, err := pw.do("EVALSHA", pw.sha, "2", pw.k.queue, pw.k.comp)
	if errors.Is(err, errNil) {
		_, err = pw.do("SET", journal, "-1")
		return 0, false, err // exhausted
	}
	if err != nil {
		return 0, false, err
	}
	a, c, err := parsePop(reply)
	if err != nil {
		return 0, false, err
	}
	d := a + c
	v, err := pw.doInt("HINCRBY", pw.k.usage, user, strconv.FormatInt(usageUnit+d, 10))
	if err != nil {
		return 0, false, err
	}
	count, amt := v/usageUnit, v%usageUnit
	switch {
	case pw.o.PerUserCount > 0 && count > int64(pw.o.PerUserCount):
		// Over the count: roll both back, the amount to the queue.
		if err := pw.rollback(user, a, c, d); err != nil {
			return 0, false, err
		}
		_, err = pw.do("SET", journal, "-1")
		return 0, false, err
	case pw.o.PerUserAmount > 0 && amt > pw.o.PerUserAmount:
		excess := min(amt-pw.o.PerUserAmount, d)
		d -= excess
		if _, err := pw.do("HINCRBY", pw.k.usage, user, strconv.FormatInt(-excess, 10)); err != nil {
			return 0, false, err
		}
		if _, err := pw.do("RPUSH", pw.k.comp, strconv.FormatInt(excess, 10)); err != nil {
			return 0, false, err
		}
	}
	_, err = pw.do("SET", journal, "-1")
	return d, err == nil, err
}

// rollback undoes a payment over the count limit.
func (pw *pubWorker) rollback(user string, a, c, d int64) error {
	if _, err := pw.do("HINCRBY", pw.k.usage, user, strconv.FormatInt(-(usageUnit+d), 10)); err != nil {
		return err
	}
	if _, err := pw.do("LPUSH", pw.k.queue, strconv.FormatInt(a, 10)); err != nil {
		return err
	}
	if c > 0 {
		_, err := pw.do("RPUSH", pw.k.comp, strconv.FormatInt(c, 10))
		return err
	}
	return nil
}

func (pw *pubWorker) doInt(args ...string) (int64, error) {
	b, err := pw.do(args...)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(string(b), 10, 64)
}

// parsePop reads "<amount>:<compensation>".
func parsePop(b []byte) (a, c int64, err error) {
	x, y, ok := strings.Cut(string(b), ":")
	a, err1 := strconv.ParseInt(x, 10, 64)
	c, err2 := strconv.ParseInt(y, 10, 64)
	if !ok || err1 != nil || err2 != nil {
		return 0, 0, fmt.Errorf("bench: pop reply %q", b)
	}
	return a, c, nil
}

// checkPublished checks conservation: what the clients were told, plus
// what waits in the amounts and compensation lists, is the budget.
func checkPublished(ctx context.Context, c rueidis.Client, k publishedKeys, o DiscountOptions, told int64, probs *problems) {
	var left int64
	for _, key := range []string{k.queue, k.comp} {
		vals, err := c.Do(ctx, c.B().Lrange().Key(key).Start(0).Stop(-1).Build()).AsIntSlice()
		if err != nil {
			probs.add("read %s: %v", key, err)
			return
		}
		for _, v := range vals {
			left += v
		}
	}
	if told+left != o.Budget {
		probs.add("conservation: told %d + left %d = %d cents, the budget is %d", told, left, told+left, o.Budget)
	}
}

// dropPublished unlinks the published design's keys from a shared Redis,
// its journals found by a scan of their prefix.
func dropPublished(t *target, k publishedKeys) {
	t.drop(k.queue, k.comp, k.usage)
	c := t.client
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for cursor := uint64(0); ; {
		e, err := c.Do(ctx, c.B().Scan().Cursor(cursor).Match(k.journal+"*").Count(1000).Build()).AsScanEntry()
		if err != nil {
			return
		}
		if len(e.Elements) > 0 {
			t.drop(e.Elements...)
		}
		if e.Cursor == 0 {
			return
		}
		cursor = e.Cursor
	}
}
