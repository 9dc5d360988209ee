package ledger

import (
	"context"
	"errors"
	"time"
)

// Commitment is a campaign's fairness commitment as the ledger records it
// (package fairness makes it): the tree head over its packets and the
// published document, written once, after the packets and before the
// campaign goes live, and never changed.
type Commitment struct {
	Campaign string
	Root     [32]byte
	Count    int64 // packets, as the packet set has them
	Cents    int64 // their sum, as the packet set has it
	// Body is the published commitment, byte for byte as it is served.
	Body []byte
	// HolderKey (32 bytes) keys the draw log's pseudonyms of holders. It
	// is never published. Nil once the draw data is purged.
	HolderKey []byte
	// PurgedAt is when PurgeDrawData deleted the salts and the holder
	// key; zero while they are kept.
	PurgedAt time.Time
}

// SaltSize is the size of one packet's salt.
const SaltSize = 32

// SaltsPerChunk is how many packets' salts one stored chunk holds.
const SaltsPerChunk = 4096

// DrawRow is one packet of a campaign with its grant, if the ledger has
// one: the draw log's row before its salt and pseudonym.
type DrawRow struct {
	Seq   int64
	Cents int64
	// User holds the packet; "" when the ledger records no grant of it.
	User string
	// GrantedAt is when Redis granted the packet (Grant.GrantedAt); zero
	// without a grant, or for a grant whose time the ledger does not know.
	GrantedAt time.Time
}

// ErrNoCommitment: the campaign has no commitment recorded (created before
// commitments were, or not yet).
var ErrNoCommitment = errors.New("ledger: campaign commitment not recorded")

// ErrDrawDataPurged: the campaign's salts and holder key were deleted
// when its retention ended (PurgeDrawData); its commitment stays.
var ErrDrawDataPurged = errors.New("ledger: draw data purged after its retention")

// ErrNoGrant: the ledger records no grant of the packet.
var ErrNoGrant = errors.New("ledger: no grant recorded")

// Committer records and reads campaigns' fairness commitments. Both
// ledgers (PostgreSQL and SQLite) are one; hongbao.Config.Packets that is
// one makes every create commit.
type Committer interface {
	// WriteCommitment records c and the salts of its packets (SaltSize
	// bytes a packet, seq order) in one transaction, once. The campaign's
	// packets must be recorded (ErrNoPackets) with c's count and cents,
	// and salts must be SaltSize bytes a packet (ErrInvalid). A replay
	// with the same root is a no-op (its salts and body are not compared:
	// the root binds the salts). Another root is a *ConflictError (Entry
	// "commitment") and changes nothing: the recorded commitment stands.
	WriteCommitment(ctx context.Context, c Commitment, salts []byte) error
	// Commitment reads the campaign's commitment, or ErrNoCommitment.
	Commitment(ctx context.Context, campaign string) (Commitment, error)
	// Salts reads the salts of every packet of the campaign, in seq order,
	// or ErrNoCommitment, or ErrDrawDataPurged once PurgeDrawData ran.
	Salts(ctx context.Context, campaign string) ([]byte, error)
	// DrawRows calls fn for every packet of the campaign in seq order, with
	// its grant when the ledger has one; ErrNoPackets without packets.
	DrawRows(ctx context.Context, campaign string, fn func(DrawRow) error) error
	// GrantTime reads the grant of packet seq of the campaign: its user
	// and when Redis granted it (zero when the ledger does not know);
	// ErrNoGrant when the ledger records none (yet: settlement writes it
	// after the grant).
	GrantTime(ctx context.Context, campaign string, seq int64) (user string, at time.Time, err error)
	// PurgeDrawData deletes the salts and the holder key of up to limit
	// campaigns whose refund was recorded before before, and marks their
	// commitments purged (Commitment.PurgedAt), one transaction each; it
	// returns their ids. The root, count, cents and body stay, and so do
	// the packets and the grants (the ledger's entries). A campaign purged
	// already is not listed again, so a sweep is idempotent and several
	// processes may run it. A limit below 1 is ErrInvalid.
	PurgeDrawData(ctx context.Context, before time.Time, limit int) ([]string, error)
}
