package redisstore

import (
	"errors"
	"sync/atomic"

	"github.com/hongbao/hongbao/internal/luascript"
)

// WaitOp names what a WAIT of the store followed, for the count of the
// WAITs that fell short: a label of few values, the same for every
// campaign.
type WaitOp int

// The operations a store under WithWait sends WAIT after.
const (
	WaitGrab     WaitOp = iota // grab.lua
	WaitReserve                // disc_reserve.lua
	WaitConfirm                // disc_confirm.lua
	WaitCancel                 // disc_cancel.lua
	WaitHeld                   // the reads of Held
	WaitTransfer               // the steps of a transfer between shards, and its recovery
	WaitPause                  // pause.lua
	WaitBlock                  // block.lua
	numWaitOps
)

var waitOpNames = [numWaitOps]string{"grab", "reserve", "confirm", "cancel", "held", "transfer", "pause", "block"}

// String is the op's label: grab, reserve, confirm, cancel, held,
// transfer, pause or block.
func (o WaitOp) String() string { return waitOpNames[o] }

// WaitOps are every WaitOp, in order.
func WaitOps() []WaitOp {
	ops := make([]WaitOp, numWaitOps)
	for i := range ops {
		ops[i] = WaitOp(i)
	}
	return ops
}

// shortWaits counts the WAITs of a store, and of the copies made from it
// after WithWait, that fewer replicas than asked acknowledged in time.
type shortWaits struct {
	by        [numWaitOps]atomic.Uint64
	lastAcked atomic.Int64
}

// WaitShortfalls is what a store's WAITs fell short by, since WithWait.
type WaitShortfalls struct {
	// Short counts the WAITs that fewer replicas than asked acknowledged
	// in time, by WaitOp.
	Short [numWaitOps]uint64
	// LastAcked is how many replicas acknowledged the latest of them (0
	// when none fell short).
	LastAcked int
}

// WaitShortfalls returns the store's counts of short WAITs (all 0 when it
// does not wait).
func (s *Store) WaitShortfalls() WaitShortfalls {
	var out WaitShortfalls
	if s.shorts == nil {
		return out
	}
	for i := range out.Short {
		out.Short[i] = s.shorts.by[i].Load()
	}
	out.LastAcked = int(s.shorts.lastAcked.Load())
	return out
}

// countShort counts err when it is a WAIT that fell short after op, and
// returns it.
func (s *Store) countShort(op WaitOp, err error) error {
	var short *luascript.ShortWaitError
	if s.shorts != nil && errors.As(err, &short) {
		s.shorts.lastAcked.Store(short.Got)
		s.shorts.by[op].Add(1)
	}
	return err
}
