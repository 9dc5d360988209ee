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
	// is never published.
	HolderKey []byte
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
	// SettledAt is when the ledger recorded the grant (at most the
	// settlement delay after the grant itself); zero without one.
	SettledAt time.Time
}

// ErrNoCommitment: the campaign has no commitment recorded (created before
// commitments were, or not yet).
var ErrNoCommitment = errors.New("ledger: campaign commitment not recorded")

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
	// or ErrNoCommitment.
	Salts(ctx context.Context, campaign string) ([]byte, error)
	// DrawRows calls fn for every packet of the campaign in seq order, with
	// its grant when the ledger has one; ErrNoPackets without packets.
	DrawRows(ctx context.Context, campaign string, fn func(DrawRow) error) error
}
