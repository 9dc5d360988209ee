package testenv

import (
	"context"
	"fmt"
	"strconv"
	"time"
)

// Migration is a live migration of one hash slot from its master to
// another, done as an operator (or redis-cli --cluster reshard) does it:
// the target IMPORTING, the source MIGRATING, the keys moved with MIGRATE
// a batch at a time, then the slot assigned to the target everywhere.
//
// Between BeginMigration and Finish the slot is half-migrated: the source
// answers ASK for keys it no longer has (and for new keys), and TRYAGAIN
// for a multi-key command or script whose keys are split between the two.
// A test holds that state as long as it likes by calling Step itself.
type Migration struct {
	// Slot is the slot being moved.
	Slot int
	// From and To are the addresses of the source and target masters.
	From, To string
	// Batch is how many keys Finish moves per MIGRATE. Default 10: small,
	// so clients run between batches.
	Batch int
	// Moved counts the keys moved so far.
	Moved int

	c            *Cluster
	fromID, toID string
}

// migrateTimeout is MIGRATE's timeout for one batch.
const migrateTimeout = 5 * time.Second

// MigrateSlot moves slot to the master at addr to, keys and all, while
// clients keep running; it returns once every node agrees the target owns
// it. It is BeginMigration followed by Finish.
func (c *Cluster) MigrateSlot(ctx context.Context, slot int, to string) error {
	m, err := c.BeginMigration(ctx, slot, to)
	if err != nil {
		return err
	}
	return m.Finish(ctx)
}

// BeginMigration opens the migration of slot to the master at addr to:
// CLUSTER SETSLOT IMPORTING on the target, then MIGRATING on the source.
// No key moves yet.
func (c *Cluster) BeginMigration(ctx context.Context, slot int, to string) (*Migration, error) {
	if slot < 0 || slot >= Slots {
		return nil, fmt.Errorf("testenv: migrate: slot %d out of range", slot)
	}
	from, err := c.MasterOfSlot(ctx, slot)
	if err != nil {
		return nil, err
	}
	if from == to {
		return nil, fmt.Errorf("testenv: migrate: %s already owns slot %d", to, slot)
	}
	if c.Node(to) == nil {
		return nil, fmt.Errorf("testenv: migrate: %s is not a node of the cluster", to)
	}
	m := &Migration{Slot: slot, From: from, To: to, Batch: 10, c: c, fromID: c.ids[from], toID: c.ids[to]}
	s := strconv.Itoa(slot)
	if err := do(ctx, c.Node(to).Client, "CLUSTER", "SETSLOT", s, "IMPORTING", m.fromID).Error(); err != nil {
		return nil, fmt.Errorf("testenv: migrate: SETSLOT IMPORTING on %s: %w", to, err)
	}
	if err := do(ctx, c.Node(from).Client, "CLUSTER", "SETSLOT", s, "MIGRATING", m.toID).Error(); err != nil {
		return nil, fmt.Errorf("testenv: migrate: SETSLOT MIGRATING on %s: %w", from, err)
	}
	return m, nil
}

// Step moves up to n keys of the slot to the target with one MIGRATE and
// returns how many it moved; 0 means the source has none left.
func (m *Migration) Step(ctx context.Context, n int) (int, error) {
	src := m.c.Node(m.From).Client
	keys, err := do(ctx, src, "CLUSTER", "GETKEYSINSLOT", strconv.Itoa(m.Slot), strconv.Itoa(n)).AsStrSlice()
	if err != nil {
		return 0, fmt.Errorf("testenv: migrate: GETKEYSINSLOT on %s: %w", m.From, err)
	}
	if len(keys) == 0 {
		return 0, nil
	}
	args := append([]string{"MIGRATE", "127.0.0.1", strconv.Itoa(portOf(m.To)), "", "0",
		strconv.FormatInt(migrateTimeout.Milliseconds(), 10), "KEYS"}, keys...)
	// The reply is OK, or NOKEY when every key vanished meanwhile (deleted
	// or expired): both leave none of them on the source.
	if err := do(ctx, src, args...).Error(); err != nil {
		return 0, fmt.Errorf("testenv: migrate: MIGRATE %d keys %s to %s: %w", len(keys), m.From, m.To, err)
	}
	m.Moved += len(keys)
	return len(keys), nil
}

// Remaining returns how many keys of the slot are still on the source.
func (m *Migration) Remaining(ctx context.Context) (int64, error) {
	n, err := do(ctx, m.c.Node(m.From).Client, "CLUSTER", "COUNTKEYSINSLOT", strconv.Itoa(m.Slot)).AsInt64()
	if err != nil {
		return 0, fmt.Errorf("testenv: migrate: COUNTKEYSINSLOT on %s: %w", m.From, err)
	}
	return n, nil
}

// Finish moves the keys left, Batch at a time, then assigns the slot to
// the target with CLUSTER SETSLOT NODE: on the target first (so it stops
// needing ASKING), then the source, then the other running masters (so
// they need not learn it by gossip), and waits until the cluster is
// consistent again.
func (m *Migration) Finish(ctx context.Context) error {
	batch := m.Batch
	if batch <= 0 {
		batch = 10
	}
	for {
		n, err := m.Step(ctx, batch)
		if err != nil {
			return err
		}
		if n == 0 {
			break
		}
	}
	order := []string{m.To, m.From}
	for _, n := range m.c.Nodes {
		if n.Addr == m.To || n.Addr == m.From || !n.Running() {
			continue
		}
		// A node that does not answer learns the owner by gossip.
		if lines, err := clusterNodes(ctx, n.Client); err == nil && mine(lines).has("master") {
			order = append(order, n.Addr)
		}
	}
	for _, addr := range order {
		if err := do(ctx, m.c.Node(addr).Client, "CLUSTER", "SETSLOT", strconv.Itoa(m.Slot), "NODE", m.toID).Error(); err != nil {
			return fmt.Errorf("testenv: migrate: SETSLOT NODE on %s: %w", addr, err)
		}
	}
	return m.c.WaitConsistent(ctx)
}
