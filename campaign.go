package hongbao

import (
	"cmp"
	"strconv"
	"time"

	"github.com/hongbao/hongbao/internal/redisstore"
	"github.com/hongbao/hongbao/split"
)

// State is where a campaign is in its life.
//
//	loading --activate--> scheduled --opens_at--> open --closes_at or operator--> closed --refunded--> settled
//
// Opening and closing by time are decided by the Redis clock inside the
// scripts; Status reports the state in force at the moment of the read.
type State string

// The states of a campaign.
const (
	StateLoading   State = "loading"
	StateScheduled State = "scheduled"
	StateOpen      State = "open"
	StateClosed    State = "closed"
	StateSettled   State = "settled"
)

// Why a campaign closed.
const (
	CloseSoldOut   = "sold_out"  // the pool ran out
	CloseTime      = "time"      // its window ended
	CloseOperator  = "operator"  // an operator closed it
	CloseCancelled = "cancelled" // closed before it opened
)

// DefaultWindow is how long a campaign stays open when its spec gives no
// close time.
const DefaultWindow = 24 * time.Hour

// DefaultFunding is the account that funds a campaign when its spec names
// none.
const DefaultFunding = "platform"

// Spec describes a campaign to create. Amounts are integer cents.
type Spec struct {
	// ID names the campaign: 1 to 64 of A-Z a-z 0-9 _ -. Empty: a random id.
	// Creating a campaign whose id exists fails with ErrCampaignExists.
	ID string
	// Total is the amount to hand out, in cents (at most split.MaxTotal).
	Total int64
	// Count is the number of packets.
	Count int
	// Min is the smallest packet in cents; 0 means 1 cent.
	Min int64
	// Max is the largest packet in cents; 0 means no maximum.
	Max int64
	// Split is the split algorithm; empty means split.DoubleAverage.
	Split split.Algorithm
	// Seed reproduces the split; nil means a fresh one from crypto/rand.
	// It is recorded with the campaign and is an operator secret: with
	// the algorithm it reveals the order of the pool.
	Seed *uint64
	// OpensAt is when grabs start; zero means at once (by the Redis clock).
	OpensAt time.Time
	// ClosesAt is when grabs end; zero means OpensAt + DefaultWindow.
	ClosesAt time.Time
	// Funding is the account the money comes from; empty means
	// DefaultFunding.
	Funding string
	// Shards spreads the campaign over this many groups of Redis keys,
	// each under its own hash tag, so that on a Redis Cluster one hot
	// campaign uses several masters: 1 to MaxShards, at most Count; 0
	// means 1. Every user has a home shard (HomeShard) that holds the
	// user's claim, so a user still gets at most one packet; a shard
	// that runs dry borrows packets from the others.
	Shards int
}

// campaign is the campaign spec creates, loading, with sp its split spec
// with defaults (check) and seed its split's seed. A term a create
// decides is copied here from the spec, the only place that does.
func (spec Spec) campaign(sp split.Spec, seed uint64) *Campaign {
	return &Campaign{
		ID: spec.ID, State: StateLoading, Total: sp.Total, Count: sp.Count, Min: sp.Min, Max: sp.Max,
		Split: sp.Algorithm, Seed: seed, Funding: cmp.Or(spec.Funding, DefaultFunding), Shards: max(spec.Shards, 1),
	}
}

// MaxShards is the most shards a campaign may have.
const MaxShards = redisstore.MaxShards

// HomeShard is the shard of a campaign of shards shards that holds
// user's claim: the 32-bit FNV-1a hash of the user id (its bytes), modulo
// shards. It is stable across processes and releases.
func HomeShard(user string, shards int) int { return redisstore.HomeShard(user, shards) }

// Campaign is a created campaign.
type Campaign struct {
	ID       string
	State    State
	Total    int64 // cents
	Count    int
	Min      int64 // cents
	Max      int64 // cents, 0 when unbounded
	Split    split.Algorithm
	Seed     uint64
	OpensAt  time.Time
	ClosesAt time.Time
	Funding  string
	Shards   int
	// Owner is the identity of the ledger or sink the campaign settles
	// into (Config.Owner), "" when it records none.
	Owner string
}

// Status is a campaign and its counters, read at one instant.
type Status struct {
	Campaign
	// CloseReason says why it closed (CloseSoldOut, ...), when it did.
	CloseReason string
	// GrantedCount and GrantedCents count the packets handed out.
	GrantedCount int64
	GrantedCents int64
	// RemainingCount and RemainingCents are what is still in the pool
	// (over all shards).
	RemainingCount int64
	RemainingCents int64
	// RefundedCents went back to the funding account.
	RefundedCents int64
	// LostCount and LostCents are the packets a rebuild found granted to
	// nobody it could name (package rebuild): in no pool and no claim,
	// and refunded with the pool. 0 unless the campaign was rebuilt.
	LostCount, LostCents int64
	// InFlight counts the packets (of RemainingCount) on their way from
	// one shard to another; always 0 with one shard.
	InFlight int64
	// Paused is true while an operator paused the campaign (Engine.Pause);
	// PausedShards counts the shards paused, which is Shards once a Pause
	// returned and 0 once a Resume did.
	Paused       bool
	PausedShards int
	// Overtaken is set only on the status Pause or Resume answers: a
	// Pause or Resume that started later wrote a shard before this call
	// could, and the campaign is as that later call wants (Paused says
	// which), not as this one asked; PausedShards may disagree with Paused
	// while the later call is still writing.
	Overtaken bool
	// BlockedUsers counts the users blocked on the campaign (Engine.Block).
	BlockedUsers int64
	// Now is the Redis clock at the read.
	Now time.Time
}

// Outcome is the answer to a grab.
type Outcome uint8

// The outcomes of a grab. Their values are the codes grab.lua returns
// (internal/redisstore/lua/lib/outcomes.lua); outcomeTable (outcome.go)
// names each one's API word and metric label.
const (
	// Granted: this call handed the user a packet.
	Granted Outcome = 1
	// Already: the user holds a packet of this campaign; it is the one
	// returned. A retried or double-clicked grab answers this.
	Already Outcome = 2
	// SoldOut: no packet is left.
	SoldOut Outcome = 3
	// NotOpen: the campaign has not opened yet.
	NotOpen Outcome = 4
	// Closed: the campaign's window ended or an operator closed it.
	Closed Outcome = 5
	// Paused: an operator paused the campaign (Engine.Pause); its
	// window still runs.
	Paused Outcome = 14
	// Blocked: an operator blocked the user on this campaign
	// (Engine.Block).
	Blocked Outcome = 15
)

// HasPacket reports whether the answer carries the user's packet.
func (o Outcome) HasPacket() bool { return o == Granted || o == Already }

// Grant is the answer to one user's grab.
type Grant struct {
	Campaign string
	User     string
	Outcome  Outcome
	// Seq numbers the packet within its campaign (1..Count); 0 when the
	// outcome carries no packet.
	Seq int64
	// Cents is the packet's amount; 0 when the outcome carries no packet.
	Cents int64
	// GrantedAt is when the packet was granted, by Redis' clock (the time
	// of the grant's settlement stream entry, which the ledger records as
	// the grant's time, ms precision), for the outcome Granted; zero for
	// the others, Already included (GrantTime reads it from the ledger).
	GrantedAt time.Time
}

// PacketID names the packet across campaigns: "<campaign>/<seq>".
func (g Grant) PacketID() string {
	if g.Seq == 0 {
		return ""
	}
	return g.Campaign + "/" + strconv.FormatInt(g.Seq, 10)
}
