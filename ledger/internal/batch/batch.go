// Package batch holds the parts of ApplyGrants and WritePackets that do
// not depend on the database: checking a batch before it is written,
// sorting each grant into inserted, replayed or conflict after the insert,
// and summing a campaign's packets up into the PacketSet a replay is
// compared with. Both backends use it, so they decide alike.
package batch

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/hongbao/hongbao/ledger"
)

// Check validates a batch of one campaign and returns a copy in which
// every grant carries the campaign id (an empty Campaign field means "this
// batch's campaign").
func Check(campaign string, grants []ledger.Grant) ([]ledger.Grant, error) {
	return checkBatch(campaign, grants, func(g *ledger.Grant) *string { return &g.Campaign }, func(g *ledger.Grant) error {
		switch {
		case g.Campaign != campaign:
			return fmt.Errorf("%w: grant seq %d of campaign %q in a batch of campaign %q",
				ledger.ErrInvalid, g.Seq, g.Campaign, campaign)
		case g.User == "":
			return fmt.Errorf("%w: grant seq %d has no user", ledger.ErrInvalid, g.Seq)
		case !IsText(g.User):
			return fmt.Errorf("%w: grant seq %d: user %q is not text", ledger.ErrInvalid, g.Seq, g.User)
		case g.Seq < 0:
			return fmt.Errorf("%w: grant seq %d is negative", ledger.ErrInvalid, g.Seq)
		case g.Cents <= 0:
			return fmt.Errorf("%w: grant seq %d has %d cents", ledger.ErrInvalid, g.Seq, g.Cents)
		}
		return nil
	})
}

// checkBatch validates a batch of either kind for campaign: it returns a
// copy of es in which every entry whose campaign (campaignOf) is empty
// has the batch's, each checked by check, the kind's own rules.
func checkBatch[E any](campaign string, es []E, campaignOf func(*E) *string, check func(*E) error) ([]E, error) {
	if campaign == "" {
		return nil, fmt.Errorf("%w: empty campaign id", ledger.ErrInvalid)
	}
	out := make([]E, len(es))
	copy(out, es)
	for i := range out {
		if c := campaignOf(&out[i]); *c == "" {
			*c = campaign
		}
		if err := check(&out[i]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// IsText reports whether s can be stored as text by every backend:
// UTF-8 without a NUL byte, which PostgreSQL refuses.
func IsText(s string) bool {
	return utf8.ValidString(s) && strings.IndexByte(s, 0) < 0
}

// Row is a grant row as a database returns it, without the campaign.
type Row struct {
	Seq   int64
	User  string
	Cents int64
}

// RowOf returns the row of a grant.
func RowOf(g ledger.Grant) Row { return Row{Seq: g.Seq, User: g.User, Cents: g.Cents} }

// Classify sorts each grant of the batch, in batch order, into inserted,
// replayed or conflict. inserted are the rows the insert returned; stored
// are the rows stored for the seqs and users of the grants that were not
// inserted, read after the insert in the same transaction (so they include
// this batch's own rows). It returns the result and the inserted grants,
// whose balances the caller moves.
//
// A grant that was neither inserted nor matches a stored row is an error,
// not a silent skip: it would mean the insert skipped it for a reason the
// ledger does not know, and the caller must roll back.
func Classify(grants []ledger.Grant, inserted []Row, stored []Row) (ledger.ApplyResult, []ledger.Grant, error) {
	if inOrder(grants, inserted) {
		return AllInserted(grants), grants, nil
	}
	return classify(grantKind, grants, inserted, stored)
}

// grantKind: a grant's seq is its first key, its user its second.
var grantKind = kind[ledger.Grant, Row, int64, string, ledger.Conflict, ledger.ApplyResult]{
	row:    RowOf,
	cents:  func(g ledger.Grant) int64 { return g.Cents },
	key1:   func(r Row) int64 { return r.Seq },
	key2:   func(r Row) string { return r.User },
	first:  ledger.PacketTaken,
	second: ledger.UserHasOther,
	conflict: func(g ledger.Grant, k ledger.ConflictKind, have Row) ledger.Conflict {
		return ledger.Conflict{Grant: g, Kind: k, Existing: grantOf(g.Campaign, have)}
	},
	extra: func(r Row) error { return fmt.Errorf("ledger: insert returned a row not in the batch: seq %d", r.Seq) },
	missing: func(g ledger.Grant) error {
		return fmt.Errorf("ledger: grant seq %d of campaign %q was neither inserted nor found", g.Seq, g.Campaign)
	},
	result: func(s sorted[ledger.Grant, ledger.Conflict]) ledger.ApplyResult {
		return ledger.ApplyResult{Inserted: len(s.done), Replayed: s.replayed, InsertedCents: s.cents, Conflicts: s.conflicts}
	},
}

// Inserted splits a batch of either kind by the rows its insert returned
// (rowOf is an entry's row): the entries whose rows it returned, each row
// once, and the others, both in batch order; and the rows it returned
// that match no entry of the batch, which mean something is wrong.
func Inserted[E any, R comparable](batch []E, rows []R, rowOf func(E) R) (inserted, others []E, extra []R) {
	fresh := make(map[R]int, len(rows))
	for _, r := range rows {
		fresh[r]++
	}
	inserted = make([]E, 0, len(rows))
	for _, e := range batch {
		r := rowOf(e)
		if fresh[r] > 0 {
			fresh[r]--
			inserted = append(inserted, e)
			continue
		}
		others = append(others, e)
	}
	for r, n := range fresh {
		for ; n > 0; n-- {
			extra = append(extra, r)
		}
	}
	return inserted, others, extra
}

// inOrder reports whether inserted holds the rows of every grant, in
// batch order: the common case, which needs no lookup.
func inOrder(grants []ledger.Grant, inserted []Row) bool {
	if len(inserted) != len(grants) {
		return false
	}
	for i, g := range grants {
		if inserted[i] != RowOf(g) {
			return false
		}
	}
	return true
}

// AllInserted is Classify's answer when the insert wrote every grant of
// the batch, as a COPY that succeeded did: all inserted, in batch order,
// without the lookups Classify needs to tell replays from conflicts.
func AllInserted(grants []ledger.Grant) ledger.ApplyResult {
	res := ledger.ApplyResult{Inserted: len(grants)}
	for _, g := range grants {
		res.InsertedCents += g.Cents
	}
	return res
}

// Missing returns the seqs and users of the grants the insert did not
// return, the keys to look up for Classify. It returns nils when every
// grant was inserted, so the lookup can be skipped.
func Missing(grants []ledger.Grant, inserted []Row) (seqs []int64, users []string) {
	if len(inserted) == len(grants) {
		return nil, nil
	}
	_, others, _ := Inserted(grants, inserted, RowOf)
	for _, g := range others {
		seqs = append(seqs, g.Seq)
		users = append(users, g.User)
	}
	return seqs, users
}

// HasDuplicateKeys reports whether two grants of the batch share a seq or
// a user. It sorts copies of the keys rather than filling two maps: a
// batch holds thousands of grants, and the maps were a tenth of what
// settlement allocated.
func HasDuplicateKeys(grants []ledger.Grant) bool {
	seqs := make([]int64, len(grants))
	users := make([]string, len(grants))
	for i, g := range grants {
		seqs[i], users[i] = g.Seq, g.User
	}
	slices.Sort(seqs)
	slices.Sort(users)
	for i := 1; i < len(grants); i++ {
		if seqs[i] == seqs[i-1] || users[i] == users[i-1] {
			return true
		}
	}
	return false
}

func grantOf(campaign string, r Row) ledger.Grant {
	return ledger.Grant{Campaign: campaign, Seq: r.Seq, User: r.User, Cents: r.Cents}
}
