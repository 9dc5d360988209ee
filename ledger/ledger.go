package ledger

import (
	"context"
	"errors"
	"fmt"
)

// Grant is one packet given to one user. Its key is (Campaign, Seq); a
// user holds at most one packet of a campaign, so (Campaign, User) is
// unique too.
type Grant struct {
	Campaign string
	Seq      int64
	User     string
	Cents    int64
	// GrantedAt is when Redis granted the packet, in ms since the epoch:
	// the time of the settlement stream entry that carried it (its id),
	// by Redis' clock. 0 when unknown (recorded as NULL). It is not part
	// of the grant's identity: a replay with another time is a replay,
	// and the first time recorded stays.
	GrantedAt int64
}

// Campaign is what the fund entry needs: the campaign's id, the funding
// account it draws from and the total moved into its escrow.
type Campaign struct {
	ID      string
	Funding string
	Total   int64
}

// ConflictKind names why a grant could not be written.
type ConflictKind string

const (
	// PacketTaken: the packet (campaign, seq) is stored with another user
	// or another amount.
	PacketTaken ConflictKind = "packet_taken"
	// UserHasOther: the user already holds another packet of the campaign.
	UserHasOther ConflictKind = "user_has_other"
)

// Conflict is a grant that disagrees with a stored one. It is an incident
// (Redis and the ledger disagree), never a replay, so it is reported
// rather than dropped.
type Conflict struct {
	Grant    Grant
	Kind     ConflictKind
	Existing Grant
}

// ApplyResult says what ApplyGrants did with each grant of a batch: every
// grant is counted exactly once, in Inserted, Replayed or Conflicts.
type ApplyResult struct {
	Inserted      int
	Replayed      int
	InsertedCents int64
	Conflicts     []Conflict
}

// Totals is a campaign's state in the ledger, read in one snapshot.
type Totals struct {
	Funded     int64  // cents moved funding -> escrow (0 if not funded)
	Funding    string // funding account name (without the "funding:" prefix)
	GrantCount int64
	GrantCents int64
	Refunded   int64
	RefundDone bool
	Escrow     int64 // balance of the campaign's escrow account (funded - granted - refunded)
	// PacketCount and PacketCents describe the packets WritePackets
	// recorded; both are 0 when none are. Once the campaign is funded too,
	// PacketCents equals Funded (WritePackets and Fund refuse anything
	// else), so a difference here means the database was edited by hand.
	PacketCount int64
	PacketCents int64
}

// Packet is one packet of a campaign as it was split at create, before
// anyone grabbed it. Seqs run from 1 to the campaign's packet count, as
// in the Redis pool; a grant of packet Seq moves exactly Cents.
type Packet struct {
	Seq   int64
	Cents int64
}

// Terms are what a campaign was created with besides its packets: the
// funding account, the spec, the layout over shards and the open window
// as the create resolved it. Redis keeps them in the campaign's meta; the
// ledger keeps a copy so that a campaign Redis lost entirely can be
// rebuilt with the same window and layout (hongbao rebuild), never a
// guessed one. They are declared here, beside the ledger that checks them
// against the packets, and not in package hongbao: the ledger and its
// drivers import nothing of the engine, and the engine writes its
// campaigns' terms through hongbao.TermsRecorder.
type Terms struct {
	Funding string `json:"funding"`
	Total   int64  `json:"total"`
	Count   int64  `json:"count"`
	Min     int64  `json:"min"`
	Max     int64  `json:"max"`
	Split   string `json:"split"`
	Seed    uint64 `json:"seed"`
	Shards  int    `json:"shards"`
	// OpensAt and ClosesAt are the window in ms since the epoch.
	OpensAt  int64 `json:"opens_at"`
	ClosesAt int64 `json:"closes_at"`
	// CloseReason and ClosedAt (ms) record a close the window does not
	// explain: an operator's ("operator", "cancelled"). Empty and 0
	// otherwise; a close by time or by the pool running out is derived
	// again from the window and the packets.
	CloseReason string `json:"close_reason,omitempty"`
	ClosedAt    int64  `json:"closed_at,omitempty"`
	// Lost lists, in seq order, the packets a rebuild found gone from the
	// pools without a holder it could name: some user was told GRANTED,
	// and no record says who. A later rebuild keeps them out of the pool
	// too.
	Lost []int64 `json:"lost,omitempty"`
	// Block is the size of the blocks the engine opened the pools in
	// under the durable pop frontier (OpenBlock); 0 when it did not: then
	// any packet may have been popped, and a rebuild holds out every one
	// no record places.
	Block int64 `json:"block,omitempty"`
	// Owner is the identity of the ledger or sink the campaign settles
	// into, as it recorded at create (hongbao.Config.Owner) or an
	// operator changed it since; "" for none. A rebuild restores it.
	Owner string `json:"owner,omitempty"`
}

// Mismatch is a grant that disagrees with the campaign's packets: no
// packet has its seq (Packet.Cents is 0 then), or the packet has another
// amount. Like a Conflict it is an incident: Redis granted money that was
// never in the pool.
type Mismatch struct {
	Grant  Grant
	Packet Packet
}

// Sentinel errors. Compare with errors.Is.
var (
	// ErrConflict: a fund or refund entry is stored with other values.
	// The typed *ConflictError unwraps to it.
	ErrConflict = errors.New("ledger: conflicting entry")
	// ErrNotFunded: the campaign has no fund entry, so nothing can be
	// granted from or refunded to its escrow yet.
	ErrNotFunded = errors.New("ledger: campaign not funded")
	// ErrInvalid: an argument can never be written (empty id, a user or
	// order id that is not UTF-8 or holds a NUL byte, negative amount, a
	// grant of another campaign in the batch). Retrying will not help.
	ErrInvalid = errors.New("ledger: invalid argument")
	// ErrNoPackets: the campaign's packets were never recorded (it was
	// created before the ledger kept them, or WritePackets has not run),
	// so the ledger cannot say which packets exist. A reader that needs
	// them must report this rather than assume an empty pool.
	ErrNoPackets = errors.New("ledger: campaign packets not recorded")
	// ErrNoTerms: the campaign's packets are recorded but its terms are
	// not (it was created before the ledger kept them).
	ErrNoTerms = errors.New("ledger: campaign terms not recorded")
	// ErrRefused: the ledger refused an entry that cannot be right, whose
	// write would break its invariants: a grant or a confirmed discount
	// for a campaign already refunded, an escrow going below zero, a
	// refund that would not leave the escrow at exactly zero. Nothing of
	// the call is written. It is an incident, never a replay and never an
	// outage: retrying will not help until an operator finds its cause.
	// The typed *RefusedError unwraps to it.
	ErrRefused = errors.New("ledger: refused")
	// ErrFenced: the call carries a fence (WithFence) older than the
	// campaign's: it was prepared from a Redis that a rebuild has since
	// replaced (see Ledger.Fence). Nothing is written. It is not the
	// entries' fault: read the campaign again and retry with its fence.
	ErrFenced = errors.New("ledger: fenced off by a rebuild")
	// ErrForeign: the call carries an owner (WithOwner) that is not this
	// ledger's Identity: the campaign settles into another ledger or sink,
	// and an entry here would pay its users twice or lose its escrow.
	// Nothing is written. It is neither an outage nor the entries' fault:
	// the campaign is not this ledger's to settle. The typed
	// *ForeignError unwraps to it.
	ErrForeign = errors.New("ledger: campaign owned by another ledger")
	// ErrNotMigrated: the ledger was opened as one that exists (package
	// open's OpenExisting, the backends' Existing option), and it does
	// not: no SQLite file, no schema or no ledger tables in PostgreSQL, or
	// a schema behind this build's migrations. Nothing was created or
	// migrated. Create or migrate it explicitly (hongbao migrate; serve
	// and settle migrate when they start), then open it again.
	ErrNotMigrated = errors.New("ledger: not created or not migrated")
	// ErrSchemaAhead: the ledger's schema is newer than this build's
	// migrations: a newer build migrated it. Every open refuses it, since
	// this build would write without what the newer one relies on. Run
	// the newer build.
	ErrSchemaAhead = errors.New("ledger: schema newer than this build")
	// ErrStaleLease: RaiseLease was given a lease's fencing token not
	// above the one recorded: the lease was handed out again under a
	// token already used. Nothing is written. The typed *StaleLeaseError
	// unwraps to it.
	ErrStaleLease = errors.New("ledger: lease token not above the recorded one")
)

// StaleLeaseError is an ErrStaleLease with the lease, the token refused
// and the token recorded (at least Token).
type StaleLeaseError struct {
	Lease    string
	Token    int64
	Recorded int64
}

func (e *StaleLeaseError) Error() string {
	return fmt.Sprintf("ledger: lease %q: token %d is not above the recorded %d", e.Lease, e.Token, e.Recorded)
}

// Unwrap makes errors.Is(err, ErrStaleLease) hold.
func (e *StaleLeaseError) Unwrap() error { return ErrStaleLease }

// ForeignError is an ErrForeign with the campaign, the owner it records
// and this ledger's identity.
type ForeignError struct {
	Campaign string
	Owner    string // the identity the campaign records as its owner
	Ledger   string // this ledger's identity
}

func (e *ForeignError) Error() string {
	return fmt.Sprintf("ledger: campaign %q is owned by %q, not by this ledger (%s)", e.Campaign, e.Owner, e.Ledger)
}

// Unwrap makes errors.Is(err, ErrForeign) hold.
func (e *ForeignError) Unwrap() error { return ErrForeign }

type ownerKey struct{}

// WithOwner returns ctx carrying the owner that the campaign of the writes
// made with it records (its "owner" in Redis, see hongbao.Config.Owner):
// the identity of the ledger or sink it settles into. A ledger refuses
// with a *ForeignError (ErrForeign) a write whose owner is not its own
// Identity; a call whose ctx carries none, or an empty one (a campaign
// created before owners were recorded), is not checked.
func WithOwner(ctx context.Context, owner string) context.Context {
	return context.WithValue(ctx, ownerKey{}, owner)
}

// OwnerFrom returns the owner ctx carries, if any.
func OwnerFrom(ctx context.Context) (string, bool) {
	o, ok := ctx.Value(ownerKey{}).(string)
	return o, ok && o != ""
}

type fenceKey struct{}

// WithFence returns ctx carrying the fence that the writes made with it
// were prepared under: the campaign's "ledger_fence" in Redis (0 when it
// has none) as read before the entries were. ApplyGrants, ApplyDiscounts
// and Refund refuse with ErrFenced a call whose fence is below the
// campaign's; a call whose ctx carries none is not checked.
func WithFence(ctx context.Context, fence int64) context.Context {
	return context.WithValue(ctx, fenceKey{}, fence)
}

// FenceFrom returns the fence ctx carries, if any.
func FenceFrom(ctx context.Context) (int64, bool) {
	f, ok := ctx.Value(fenceKey{}).(int64)
	return f, ok
}

// Refusal names why the ledger refused an entry.
type Refusal string

const (
	// RefusedAfterRefund: a new grant or confirmed discount for a campaign
	// whose refund is recorded (its escrow was closed). A replay of a
	// stored one is still a no-op.
	RefusedAfterRefund Refusal = "after_refund"
	// RefusedOverdraw: the entry would take the escrow below zero: more
	// granted (or refunded) than was funded.
	RefusedOverdraw Refusal = "overdraw"
	// RefusedOutstanding: a refund smaller than what the escrow holds,
	// which would leave cents in it: the ledger lacks entries that the
	// refund's caller counted as granted.
	RefusedOutstanding Refusal = "outstanding"
)

// RefusedError is an ErrRefused with what was refused and why.
type RefusedError struct {
	Entry    string // "grant", "discount" or "refund"
	Campaign string
	Reason   Refusal
	Escrow   int64 // the escrow's balance before the entry
	Cents    int64 // what the entry would move out of it
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("ledger: refused %s of %d cents for campaign %q (%s): its escrow holds %d",
		e.Entry, e.Cents, e.Campaign, e.Reason, e.Escrow)
}

// Unwrap makes errors.Is(err, ErrRefused) hold.
func (e *RefusedError) Unwrap() error { return ErrRefused }

// ConflictError is an ErrConflict with the stored and the attempted values,
// for the incident report.
type ConflictError struct {
	Entry    string // "fund", "refund" or "packets"
	Campaign string
	Existing string // what is stored
	Attempt  string // what the call wanted to write
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("ledger: conflicting %s entry of campaign %q: stored %s, attempted %s",
		e.Entry, e.Campaign, e.Existing, e.Attempt)
}

// Unwrap makes errors.Is(err, ErrConflict) hold.
func (e *ConflictError) Unwrap() error { return ErrConflict }

// Ledger is a durable double-entry ledger of campaigns. Every write is one
// transaction and idempotent, so a settlement worker can retry any call
// after a crash or a lost reply without moving money twice. All methods
// are safe for concurrent use.
type Ledger interface {
	// Identity returns the ledger's identity: "ledger-" and 32 lower-case
	// hex digits drawn from crypto/rand once, by the migration that made
	// the ledger's identity table (0009, which gives an older ledger its
	// identity when it upgrades), and stored in the database. So every
	// process, connection and reopening of the database gets the same
	// value for as long as the database lives, and two ledgers (two
	// schemas, two files) get two. A campaign records the identity of the
	// ledger it settles into as its owner, and the writes of its
	// settlement carry it (WithOwner), so that a worker of another
	// deployment sharing the Redis cannot settle it here. A copy of the
	// database (a restored backup, a copied file) has the original's
	// identity: it is the same ledger, and must not run beside it. Read
	// from the database once, then kept.
	Identity(ctx context.Context) (string, error)

	// Fund writes the fund entry (funding -> escrow, total) once. A replay
	// with the same funding and total is a no-op; a different one is
	// ErrConflict. So is a total that differs from the sum of the packets
	// WritePackets recorded for the campaign. A ctx carrying an owner
	// (WithOwner) other than Identity is a *ForeignError (ErrForeign), and
	// nothing is written; with no owner, or an empty one, it is not
	// checked.
	Fund(ctx context.Context, c Campaign) error
	// ApplyGrants writes a batch of grants of one campaign in one
	// transaction: each grant is inserted (escrow -> user: the escrow's
	// balance moves, the user's Balance includes it),
	// replayed (the identical row exists: no-op) or a conflict (reported in
	// ApplyResult.Conflicts, not inserted, never dropped silently). Grants
	// of one batch that conflict with each other are handled too: the
	// first in batch order wins. It returns ErrNotFunded if the campaign
	// has no fund entry, and a *RefusedError (ErrRefused), writing
	// nothing, if the batch would insert a grant into a campaign already
	// refunded or take its escrow below zero. A ctx carrying an owner
	// other than Identity is a *ForeignError and writes nothing, as for
	// Fund.
	ApplyGrants(ctx context.Context, campaign string, grants []Grant) (ApplyResult, error)
	// Refund writes the refund entry (escrow -> funding) once per campaign.
	// A replay with the same amount is a no-op, a different amount is
	// ErrConflict. cents may be 0, which records that the refund is done.
	// It waits for the campaign's batches in flight. It does not roll the
	// campaign's user balances up: RollUp does, later, in a transaction
	// of its own (see the package doc, Balances).
	// The first refund must empty the escrow exactly: one that would leave
	// cents in it (grants outstanding) or take it below zero is a
	// *RefusedError (ErrRefused) and writes nothing. Once it
	// is recorded, the ledger takes no new grant or discount of the
	// campaign. A ctx carrying an owner other than Identity is a
	// *ForeignError and writes nothing, as for Fund.
	Refund(ctx context.Context, campaign string, cents int64) error
	// RollUp adds each user's entries of a refunded campaign to the
	// user's stored balance and marks the campaign rolled up, in one
	// transaction: Balance answers the same before, during and after it.
	// done says whether this call moved the balances. A campaign not
	// refunded yet is left alone (done false, no error: new entries could
	// still come), and so is one rolled up already, so a retry or a second
	// caller racing the first moves nothing twice. ErrNotFunded for a
	// campaign the ledger does not know. Cost: one row per user of the
	// campaign, once.
	RollUp(ctx context.Context, campaign string) (done bool, err error)
	// PendingRollUps lists up to limit campaigns refunded and not rolled
	// up yet, oldest first: what RollUp still has to do, whoever stopped
	// between a refund and its roll-up. A limit below 1 is ErrInvalid.
	PendingRollUps(ctx context.Context, limit int) ([]string, error)
	// Totals reads the campaign's totals, its packet count and cents
	// included; a campaign with neither a fund entry nor packets has zero
	// Totals and no error.
	Totals(ctx context.Context, campaign string) (Totals, error)
	// Grants calls fn for every grant of the campaign in seq order, for
	// reconciliation against Redis. An error from fn stops the iteration
	// and is returned.
	Grants(ctx context.Context, campaign string, fn func(Grant) error) error
	// Balance returns the balance of an account: "user:<id>",
	// "escrow:<campaign>" or "funding:<name>". An account that no entry
	// touched has balance 0.
	Balance(ctx context.Context, account string) (int64, error)

	// WritePackets records every packet of the campaign, as split at
	// create and before the campaign goes live: cents[i] is the amount of
	// packet seq i+1 (the numbering of split.Split's result and of the
	// Redis pool). All packets go in one transaction, so a campaign has
	// all of its packets or none.
	//
	// A replay with the same amounts in the same order (a retried create)
	// is a no-op, decided from a stored digest without reading the
	// packets back. Different packets for a campaign that has some are a
	// *ConflictError (Entry "packets", unwrapping to ErrConflict) and
	// change nothing; so are packets that do not sum to the total of the
	// campaign's fund entry, when Fund ran first. An empty slice, an
	// amount below 1 cent, a sum above MaxInt64 or an empty campaign id
	// is ErrInvalid. Writers of one campaign run one after another; a
	// second writer waits for the first to commit and then replays or
	// conflicts. Cost: O(n) in time, O(1) memory beyond cents; the
	// backends write by COPY (PostgreSQL) or by prepared multi-row
	// INSERTs (SQLite).
	WritePackets(ctx context.Context, campaign string, cents []int64) error
	// Packets calls fn for every packet of the campaign in seq order,
	// streaming: memory is O(1) in the number of packets. An error from
	// fn stops the iteration and is returned. It returns ErrNoPackets if
	// the campaign's packets were never recorded.
	Packets(ctx context.Context, campaign string, fn func(Packet) error) error
	// UngrantedPackets calls fn, in seq order and streaming, for every
	// packet of the campaign that no grant in the ledger holds: with the
	// grants still in Redis's stream left out, that is the pool a rebuild
	// restores. One statement (an anti-join on the two primary keys)
	// reads packets and grants from one snapshot. An error from fn stops
	// the iteration and is returned; ErrNoPackets as for Packets.
	UngrantedPackets(ctx context.Context, campaign string, fn func(Packet) error) error
	// MismatchedGrants calls fn, in seq order and streaming, for every
	// grant of the campaign whose seq is no packet or whose cents differ
	// from its packet's: the grant side of reconciling against the
	// packets, none in a healthy ledger. It reads every grant once, O(n)
	// in the grants. An error from fn stops the iteration and is
	// returned; ErrNoPackets as for Packets.
	MismatchedGrants(ctx context.Context, campaign string, fn func(Mismatch) error) error

	// WriteTerms records the campaign's terms, replacing any recorded
	// before: a retried create resolves its window again, and a rebuild
	// adds the packets it found lost. The packets must be recorded first
	// (ErrNoPackets otherwise), and t.Count and t.Total must be their
	// count and sum; those, an empty funding account, Shards below 1 or
	// a Lost seq outside 1..Count are ErrInvalid. One statement: O(1).
	WriteTerms(ctx context.Context, campaign string, t Terms) error
	// Terms reads the campaign's terms: ErrNoPackets when its packets
	// were never recorded, ErrNoTerms when they were but its terms were
	// not.
	Terms(ctx context.Context, campaign string) (Terms, error)
	// ApplyDiscounts writes a batch of one discount campaign's confirmed
	// discounts in one transaction, as ApplyGrants does grants: each is
	// inserted (escrow -> user, as for grants, counted in the campaign's
	// GrantCount and GrantCents), replayed (the identical row exists) or
	// a conflict (reported, not inserted). Its key is (campaign, user,
	// order); its unit, (campaign, seq), is confirmed once too. It returns
	// ErrNotFunded if the campaign has no fund entry, ErrInvalid for a
	// discount that can never be written, and a *RefusedError as
	// ApplyGrants does (refunded campaign, escrow below zero), and a
	// *ForeignError, writing nothing, for a ctx carrying an owner other
	// than Identity, as for Fund. campaign is the ledger's id of the
	// campaign (DiscountCampaign).
	ApplyDiscounts(ctx context.Context, campaign string, ds []Discount) (DiscountResult, error)
	// Discounts calls fn for every confirmed discount of the campaign, in
	// seq order (its unit of quota), streaming. An error from fn stops the
	// iteration and is returned.
	Discounts(ctx context.Context, campaign string, fn func(Discount) error) error

	// Fence raises the campaign's fence by one and returns the new value,
	// after every write of the campaign in flight has committed (it locks
	// the campaign's row against them): from then on a grant, discount or refund
	// prepared under an older fence (WithFence) is refused with ErrFenced.
	// A rebuild calls it after freezing the campaign in Redis and before
	// it reads the ledger, and writes the value into the rebuilt shards'
	// meta as "ledger_fence", so that a settlement batch read from a
	// stream before the loss cannot commit after the rebuild read the
	// ledger. ErrNotFunded for a campaign without a fund entry (fund it
	// first, from its terms). One statement: O(1).
	Fence(ctx context.Context, campaign string) (int64, error)

	BlockRecorder
	LeaseFencer

	// CheckBalances walks every account and calls fn, in account order,
	// for each whose stored balance (ledger_accounts) is not what the
	// journal says it should be, the user credits of the campaigns not
	// rolled up yet left out (see the package doc, Balances). It returns
	// the double-entry sums of the whole walk (BalanceCheck). All of it
	// is read in one snapshot (one read-only REPEATABLE READ transaction
	// in PostgreSQL, one read transaction in SQLite) by one statement, so
	// batches, refunds and roll-ups committing meanwhile are seen whole
	// or not at all; it takes no lock a writer waits for. An error from
	// fn stops the walk and is returned. Cost: it reads every row of the
	// journal and of ledger_accounts once, O(entries), and the database
	// groups them by account before the first row comes back; fn is
	// called only for the accounts that differ, so memory here is O(1).
	CheckBalances(ctx context.Context, fn func(BalanceDifference) error) (BalanceCheck, error)

	// Ping checks that the database is reachable.
	Ping(ctx context.Context) error
	// Close releases the database connections.
	Close() error
}

// Discount is one confirmed discount of a discount campaign: escrow ->
// user for one order. Its key is (Campaign, User, Order); Seq is the unit
// of quota it holds, confirmed once, so (Campaign, Seq) is unique too.
type Discount struct {
	Campaign string // the ledger's campaign id, DiscountCampaign(id)
	User     string
	Order    string
	Seq      int64
	Cents    int64
}

// OrderDiffers: the order is stored with another unit or amount.
const OrderDiffers ConflictKind = "order_differs"

// UnitTaken: the unit (campaign, seq) is stored for another order.
const UnitTaken ConflictKind = "unit_taken"

// DiscountConflict is a discount that disagrees with a stored one: an
// incident, reported, never written.
type DiscountConflict struct {
	Discount Discount
	Kind     ConflictKind // OrderDiffers or UnitTaken
	Existing Discount
}

// DiscountResult says what ApplyDiscounts did with each discount of a
// batch: every one is counted exactly once, in Inserted, Replayed or
// Conflicts.
type DiscountResult struct {
	Inserted      int
	Replayed      int
	InsertedCents int64
	Conflicts     []DiscountConflict
}

// DiscountCampaign is the ledger's id of discount campaign id: its fund,
// refund, escrow ("escrow:discount:<id>") and totals live under it.
// Campaign ids have no ':', so it never names a red packet campaign.
func DiscountCampaign(id string) string { return "discount:" + id }

// Account ids. The prefixes keep the three kinds apart in one table, so a
// user named like a campaign can never share its balance.
const (
	UserPrefix    = "user:"
	EscrowPrefix  = "escrow:"
	FundingPrefix = "funding:"
)

// UserAccount is the account id of a user.
func UserAccount(user string) string { return UserPrefix + user }

// EscrowAccount is the account id of a campaign's escrow.
func EscrowAccount(campaign string) string { return EscrowPrefix + campaign }

// FundingAccount is the account id of a funding source.
func FundingAccount(name string) string { return FundingPrefix + name }

// Block is a part of one shard's pool that the engine opened for grabs:
// the packets Seqs, recorded (OpenBlock) before the first of them could
// be popped. A packet of no recorded block was never popped, so a
// rebuild can put it back in a pool; a packet of a recorded block that
// no grant places may have been granted, and is held out
// (quarantined). ID names the block's contents (the same packets always
// get the same ID), so two engines that open the same block write one
// record.
type Block struct {
	ID    string
	Shard int
	Seqs  []int64
}

// BlockRecorder records the blocks of a campaign's pools as the engine
// opens them: the durable pop frontier (hongbao.Config.Packets, package
// rebuild). ledger.Ledger embeds it.
type BlockRecorder interface {
	// OpenBlock records block b of the campaign, once: a replay with the
	// same ID and packets is a no-op, the same ID with other packets is a
	// *ConflictError (Entry "block"). The packets must be recorded first
	// (ErrNoPackets); an empty ID, no packets or a seq outside 1..count is
	// ErrInvalid. One statement: O(len(b.Seqs)).
	OpenBlock(ctx context.Context, campaign string, b Block) error
	// Blocks calls fn for every block of the campaign recorded, in ID
	// order. An error from fn stops the iteration and is
	// returned.
	Blocks(ctx context.Context, campaign string, fn func(Block) error) error
}

// LeaseFencer records, per lease, the largest fencing token a holder
// proved itself with (package leader's Config.Fence): the durable guard
// that a lease handed out again under a token already used (a token
// counter lost in Redis and a clock behind) does not settle here.
// Package scheduler raises a lease's token once per election, before its
// settlement starts. ledger.Ledger embeds it.
type LeaseFencer interface {
	// RaiseLease records token as lease's when it is above the token
	// recorded, or none is: one compare-and-set, durable at its return.
	// A token not above the recorded one is a *StaleLeaseError
	// (ErrStaleLease) carrying the recorded token, and writes nothing; so
	// is a retry of a raise whose reply was lost. An empty lease, one
	// that is not UTF-8 or holds a NUL byte, or a token below 1 is
	// ErrInvalid. O(1).
	RaiseLease(ctx context.Context, lease string, token int64) error
	// LeaseToken reads the token recorded for lease: 0 when none is.
	LeaseToken(ctx context.Context, lease string) (int64, error)
}

// BalanceDifference is an account whose stored balance differs from the
// one the journal derives: a hole in the ledger, an entry without its
// balance move or a balance edited by hand. The account's Balance, which
// adds Pending to what is stored, is then wrong by Stored - Derived too.
type BalanceDifference struct {
	Account string `json:"account"`
	// Stored is the account's row of ledger_accounts (0 for none).
	Stored int64 `json:"stored"`
	// Derived is what Stored should be: the sum of the journal's entries
	// to and from the account, less Pending.
	Derived int64 `json:"derived"`
	// Pending is the account's credits from campaigns not rolled up yet,
	// which the stored balance leaves out until RollUp.
	Pending int64 `json:"pending"`
}

// BalanceCheck is what CheckBalances found over every account of one
// snapshot. In a sound ledger Differences is 0, JournalSum is 0 (every
// entry leaves one account and enters another) and StoredSum + PendingSum
// is 0 (the stored balances miss only the credits not rolled up).
type BalanceCheck struct {
	Accounts    int64 `json:"accounts"`
	Differences int64 `json:"difference_count"`
	JournalSum  int64 `json:"journal_sum"`
	StoredSum   int64 `json:"stored_sum"`
	PendingSum  int64 `json:"pending_sum"`
}

// OK says whether the check found the ledger sound.
func (c BalanceCheck) OK() bool {
	return c.Differences == 0 && c.JournalSum == 0 && c.StoredSum+c.PendingSum == 0
}
