package query

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/hongbao/hongbao/ledger"
	"github.com/hongbao/hongbao/ledger/internal/batch"
)

// Statements are a backend's SQL for Reads, in its dialect. Each names
// its parameters and the columns it answers, in that order.
type Statements struct {
	// PacketSetNum: campaign id -> the packet set's num.
	PacketSetNum string
	// Packets: packet set num -> seq, cents, in seq order.
	Packets string
	// UngrantedPackets: packet set num, campaign id -> seq, cents of the
	// packets no grant holds, in seq order.
	UngrantedPackets string
	// MismatchedGrants: packet set num, campaign id -> seq, user_id,
	// cents, the packet's cents (0 for no packet), in seq order.
	MismatchedGrants string
	// Grants: campaign id -> seq, user_id, cents, in seq order.
	Grants string
	// Discounts: campaign id -> user_id, order_id, seq, cents, in seq
	// order.
	Discounts string
	// Blocks: campaign id -> id, shard, seqs, in id order.
	Blocks string
	// Terms: campaign id -> terms (NULL for none) of its packet set.
	Terms string
	// PendingRollUps: limit -> campaign ids.
	PendingRollUps string
	// Totals: campaign id, escrow account -> funding, funded, grant count,
	// grant cents, refunded (NULL before the refund), escrow, packet count,
	// packet cents; one row whatever the campaign has.
	Totals string
	// UserBalance: user account, user id -> the account's stored balance
	// plus the user's entries of the campaigns not rolled up.
	UserBalance string
	// Balance: account id -> its stored balance.
	Balance string
}

// Reads implements the reads of ledger.Ledger for a backend, which
// embeds it: the backend gives its pool, its statements and its error
// naming, Reads the Go around them. None of them takes a lock or writes.
type Reads struct {
	query    Query
	queryRow func(ctx context.Context, sql string, args ...any) Row
	snapshot Snapshot
	stmt     Statements
	wrap     func(op string, err error) error
	// identity holds the ledger's identity once read (Identity): it never
	// changes while the database lives.
	identity *atomic.Pointer[string]
}

// NewReads returns the reads of a backend that runs them with query and
// queryRow (its pool's methods), and CheckBalances in snapshot, and names
// their errors with wrap.
func NewReads[R Rows, W Row](query func(ctx context.Context, sql string, args ...any) (R, error),
	queryRow func(ctx context.Context, sql string, args ...any) W, snapshot Snapshot, stmt Statements,
	wrap func(op string, err error) error) Reads {
	return Reads{
		query:    QueryOf(query),
		queryRow: func(ctx context.Context, sql string, args ...any) Row { return queryRow(ctx, sql, args...) },
		snapshot: snapshot,
		stmt:     stmt,
		wrap:     wrap,
		identity: new(atomic.Pointer[string]),
	}
}

// stream runs query and calls fn with each row, read by scan; database
// errors are named op.
func stream[T any](ctx context.Context, r Reads, op string, scan Scanner[T], fn func(T) error, query string, args ...any) error {
	rows, err := r.query(ctx, query, args...)
	if err != nil {
		return r.wrap(op, err)
	}
	return Each(rows, scan, fn, func(err error) error { return r.wrap(op, err) })
}

// packetSetNum returns the short key of the campaign's packets, or
// ErrNoPackets. It is a statement of its own before the read that uses
// it; that is safe because a set never changes once committed.
func (r Reads) packetSetNum(ctx context.Context, campaign string) (int64, error) {
	var num int64
	err := PacketSet(r.queryRow(ctx, r.stmt.PacketSetNum, campaign), campaign, &num)
	return num, err
}

func packetRows() Scanner[ledger.Packet] {
	var p ledger.Packet
	dest := []any{&p.Seq, &p.Cents}
	return func(rows Rows) (ledger.Packet, error) {
		err := rows.Scan(dest...)
		return p, err
	}
}

// streamPackets calls fn for each (seq, cents) row of query, run with the
// campaign's packet set num and then args.
func (r Reads) streamPackets(ctx context.Context, op, campaign string, fn func(ledger.Packet) error, query string, args ...any) error {
	num, err := r.packetSetNum(ctx, campaign)
	if err != nil {
		return r.wrap(op, err)
	}
	return stream(ctx, r, op, packetRows(), fn, query, append([]any{num}, args...)...)
}

// Packets implements ledger.Ledger.
func (r Reads) Packets(ctx context.Context, campaign string, fn func(ledger.Packet) error) error {
	return r.streamPackets(ctx, "packets", campaign, fn, r.stmt.Packets)
}

// UngrantedPackets implements ledger.Ledger. The campaign's grant key is
// looked up inside the statement, so packets and grants come from one
// snapshot even when the fund entry is written meanwhile.
func (r Reads) UngrantedPackets(ctx context.Context, campaign string, fn func(ledger.Packet) error) error {
	return r.streamPackets(ctx, "ungranted packets", campaign, fn, r.stmt.UngrantedPackets, campaign)
}

// MismatchedGrants implements ledger.Ledger.
func (r Reads) MismatchedGrants(ctx context.Context, campaign string, fn func(ledger.Mismatch) error) error {
	const op = "mismatched grants"
	num, err := r.packetSetNum(ctx, campaign)
	if err != nil {
		return r.wrap(op, err)
	}
	var m ledger.Mismatch
	dest := []any{&m.Grant.Seq, &m.Grant.User, &m.Grant.Cents, &m.Packet.Cents}
	return stream(ctx, r, op, func(rows Rows) (ledger.Mismatch, error) {
		err := rows.Scan(dest...)
		m.Grant.Campaign, m.Packet.Seq = campaign, m.Grant.Seq
		return m, err
	}, fn, r.stmt.MismatchedGrants, num, campaign)
}

// Grants implements ledger.Ledger. It streams the rows, so a campaign of
// any size is read in constant memory.
func (r Reads) Grants(ctx context.Context, campaign string, fn func(ledger.Grant) error) error {
	g := ledger.Grant{Campaign: campaign}
	dest := []any{&g.Seq, &g.User, &g.Cents}
	return stream(ctx, r, "grants", func(rows Rows) (ledger.Grant, error) {
		err := rows.Scan(dest...)
		return g, err
	}, fn, r.stmt.Grants, campaign)
}

// Discounts implements ledger.Ledger. It streams the rows.
func (r Reads) Discounts(ctx context.Context, campaign string, fn func(ledger.Discount) error) error {
	d := ledger.Discount{Campaign: campaign}
	dest := []any{&d.User, &d.Order, &d.Seq, &d.Cents}
	return stream(ctx, r, "discounts", func(rows Rows) (ledger.Discount, error) {
		err := rows.Scan(dest...)
		return d, err
	}, fn, r.stmt.Discounts, campaign)
}

// Blocks implements ledger.Ledger. It reads every block before calling
// fn, so fn runs with the statement closed.
func (r Reads) Blocks(ctx context.Context, campaign string, fn func(ledger.Block) error) error {
	var bs []ledger.Block
	var b ledger.Block
	var seqs string
	dest := []any{&b.ID, &b.Shard, &seqs}
	err := stream(ctx, r, "blocks", func(rows Rows) (ledger.Block, error) {
		err := rows.Scan(dest...)
		return b, err
	}, func(b ledger.Block) (err error) {
		if b.Seqs, err = batch.DecodeSeqs(seqs); err == nil {
			bs = append(bs, b)
		}
		return err
	}, r.stmt.Blocks, campaign)
	if err != nil {
		return err
	}
	for _, b := range bs {
		if err := fn(b); err != nil {
			return err
		}
	}
	return nil
}

// Terms implements ledger.Ledger.
func (r Reads) Terms(ctx context.Context, campaign string) (ledger.Terms, error) {
	var stored *string
	if err := PacketSet(r.queryRow(ctx, r.stmt.Terms, campaign), campaign, &stored); err != nil {
		return ledger.Terms{}, r.wrap("terms", err)
	}
	return batch.DecodeTerms(campaign, stored)
}

// PendingRollUps implements ledger.Ledger. The campaigns not rolled up
// are few and have a partial index; the refunded ones among them come in
// the order they were created.
func (r Reads) PendingRollUps(ctx context.Context, limit int) ([]string, error) {
	if limit <= 0 {
		return nil, fmt.Errorf("%w: pending roll-ups limit %d", ledger.ErrInvalid, limit)
	}
	var ids []string
	var id string
	dest := []any{&id}
	err := stream(ctx, r, "pending roll-ups", func(rows Rows) (string, error) {
		err := rows.Scan(dest...)
		return id, err
	}, func(id string) error {
		ids = append(ids, id)
		return nil
	}, r.stmt.PendingRollUps, limit)
	if err != nil {
		return nil, err
	}
	return ids, nil
}

// Totals implements ledger.Ledger. One statement reads everything, so the
// values come from one snapshot; it answers one row whether the campaign
// has a fund entry, packets, both or neither.
func (r Reads) Totals(ctx context.Context, campaign string) (ledger.Totals, error) {
	var t ledger.Totals
	var refunded *int64
	err := r.queryRow(ctx, r.stmt.Totals, campaign, ledger.EscrowAccount(campaign)).
		Scan(&t.Funding, &t.Funded, &t.GrantCount, &t.GrantCents, &refunded, &t.Escrow, &t.PacketCount, &t.PacketCents)
	if err != nil {
		return ledger.Totals{}, r.wrap("totals", err)
	}
	if refunded != nil {
		t.Refunded, t.RefundDone = *refunded, true
	}
	return t, nil
}

// Balance implements ledger.Ledger. A user's balance is the stored one
// (campaigns rolled up after their refund) plus the user's entries of
// the campaigns not rolled up yet, read from the journal in the same
// statement, so from one snapshot: RollUp commits the stored balance and
// the campaign's flag together, and no entry is counted twice or missed.
func (r Reads) Balance(ctx context.Context, account string) (int64, error) {
	var b int64
	if user, ok := strings.CutPrefix(account, ledger.UserPrefix); ok {
		err := r.queryRow(ctx, r.stmt.UserBalance, account, user).Scan(&b)
		return b, r.wrap("balance", err)
	}
	err := r.queryRow(ctx, r.stmt.Balance, account).Scan(&b)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	return b, r.wrap("balance", err)
}
