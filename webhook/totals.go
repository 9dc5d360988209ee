package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/hongbao/hongbao/ledger"
)

// Totals asks the host what its wallet holds of campaign (a "totals"
// event, answered with a TotalsReply), so that a reconcile can compare it
// with what Redis granted (settle.ReconcileSink). It is delivered as the
// other events are: signed, retried on outages, refused for good on
// another 4xx (ErrRejected). It writes nothing, and its Idempotency-Key
// header is new on every call, so that a host never answers it from a
// cache.
//
// The reply is returned as ledger.Totals, as the ledger's own Totals
// reads: Funded, Funding, GrantCount, GrantCents, Refunded, RefundDone,
// and Escrow derived as Funded - GrantCents - Refunded; a host keeps no
// packets, so PacketCount and PacketCents are 0. A reply that is not a
// TotalsReply for campaign (not JSON, another campaign, none at all as a
// host that answers "OK" to any event would give, negative amounts, or
// refunded cents without a refund) is ErrReply.
//
// It returns ledger.ErrInvalid for an empty campaign, and a
// *ledger.ForeignError when ctx carries an owner that is not this sink's
// Name (see Fund), without sending anything.
func (s *Sink) Totals(ctx context.Context, campaign string) (ledger.Totals, error) {
	if campaign == "" {
		s.down.Store(nil)
		return ledger.Totals{}, fmt.Errorf("%w: totals of an empty campaign id", ledger.ErrInvalid)
	}
	owner, err := s.owner(ctx, campaign)
	if err != nil {
		return ledger.Totals{}, err
	}
	body, err := json.Marshal(TotalsEvent{Type: EventTotals, Campaign: campaign, Owner: owner})
	if err != nil {
		return ledger.Totals{}, fmt.Errorf("webhook: totals: %w", err)
	}
	key := fmt.Sprintf("%s/totals/%016x", campaign, rand.Uint64())
	reply, err := s.deliver(ctx, EventTotals, key, body)
	if err != nil {
		return ledger.Totals{}, err
	}
	t, err := parseTotals(campaign, reply)
	if err != nil {
		return ledger.Totals{}, fmt.Errorf("webhook: totals %s: %w", key, err)
	}
	return t, nil
}

// parseTotals reads a host's TotalsReply about campaign.
func parseTotals(campaign string, reply []byte) (ledger.Totals, error) {
	var r TotalsReply
	if err := json.Unmarshal(reply, &r); err != nil {
		return ledger.Totals{}, fmt.Errorf("%w: not a totals reply: %w", ErrReply, err)
	}
	switch {
	case r.Campaign != campaign:
		return ledger.Totals{}, fmt.Errorf("%w: the reply is about campaign %q, not %q (does the host answer %q events?)",
			ErrReply, r.Campaign, campaign, EventTotals)
	case r.FundedCents < 0 || r.GrantCount < 0 || r.GrantCents < 0 || r.RefundedCents < 0:
		return ledger.Totals{}, fmt.Errorf("%w: negative totals %+v", ErrReply, r)
	case r.GrantCents > math.MaxInt64-r.RefundedCents:
		return ledger.Totals{}, fmt.Errorf("%w: granted %d and refunded %d cents overflow", ErrReply, r.GrantCents, r.RefundedCents)
	case r.RefundedCents != 0 && !r.Refunded:
		return ledger.Totals{}, fmt.Errorf("%w: %d cents refunded without a refund", ErrReply, r.RefundedCents)
	}
	return ledger.Totals{
		Funded: r.FundedCents, Funding: r.Funding,
		GrantCount: r.GrantCount, GrantCents: r.GrantCents,
		Refunded: r.RefundedCents, RefundDone: r.Refunded,
		Escrow: r.FundedCents - r.GrantCents - r.RefundedCents,
	}, nil
}
