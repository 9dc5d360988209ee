package sqlite

import (
	"context"
	"sync"
)

// gate admits one writer of this process at a time, the urgent ones
// first: SQLite allows one writer anyway, and queueing here, honouring
// ctx, is cheaper than the busy handler's sleep-and-retry between our own
// goroutines. A grab may wait for OpenBlock (the pop frontier) while
// settlement batches queue for the same lock; an urgent writer goes
// before every normal one that is still waiting, never before the one
// that holds the gate. Within a class the order is first come, first
// served.
type gate struct {
	mu     sync.Mutex
	held   bool
	urgent []chan struct{}
	normal []chan struct{}
	// served, when set (tests), is called by each writer as it is
	// admitted, before it writes.
	served func(urgent bool)
}

// enter waits for the gate, or for ctx to end (then the caller does not
// hold it).
func (g *gate) enter(ctx context.Context, urgent bool) error {
	g.mu.Lock()
	if !g.held {
		g.held = true
		g.mu.Unlock()
		g.admitted(urgent)
		return nil
	}
	ch := make(chan struct{})
	if urgent {
		g.urgent = append(g.urgent, ch)
	} else {
		g.normal = append(g.normal, ch)
	}
	g.mu.Unlock()
	select {
	case <-ch:
		g.admitted(urgent)
		return nil
	case <-ctx.Done():
	}
	g.mu.Lock()
	if g.drop(ch, urgent) {
		g.mu.Unlock()
		return ctx.Err()
	}
	// leave handed the gate over as ctx ended: pass it on.
	g.mu.Unlock()
	g.leave()
	return ctx.Err()
}

func (g *gate) admitted(urgent bool) {
	if g.served != nil {
		g.served(urgent)
	}
}

// drop removes ch from its queue; false if it is no longer queued (the
// gate was handed to it).
func (g *gate) drop(ch chan struct{}, urgent bool) bool {
	q := &g.normal
	if urgent {
		q = &g.urgent
	}
	for i, c := range *q {
		if c == ch {
			*q = append((*q)[:i], (*q)[i+1:]...)
			return true
		}
	}
	return false
}

// leave hands the gate to the first urgent writer waiting, else to the
// first normal one, else frees it.
func (g *gate) leave() {
	g.mu.Lock()
	defer g.mu.Unlock()
	var next chan struct{}
	switch {
	case len(g.urgent) > 0:
		next, g.urgent = g.urgent[0], g.urgent[1:]
	case len(g.normal) > 0:
		next, g.normal = g.normal[0], g.normal[1:]
	default:
		g.held = false
		return
	}
	close(next)
}

// waiting returns the number of writers queued (tests).
func (g *gate) waiting() (urgent, normal int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.urgent), len(g.normal)
}
