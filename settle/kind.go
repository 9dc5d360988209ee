package settle

import (
	"context"

	"github.com/hongbao/hongbao/internal/redisstore"
	"github.com/hongbao/hongbao/ledger"
)

// kind is what settlement does differently for a kind of campaign: red
// packet campaigns (redPacketKind) and discount campaigns (discountKind). The
// passes, the stream reads, the ledger batches, the acknowledgements and
// the dead stream are one piece of code for both; each kind brings its
// registry and keys (redisstore.Kind), its name in the ledger, and the
// hooks below. A new kind is a new value in kinds.
type kind struct {
	store *redisstore.Kind
	// name is the log's word for a campaign of the kind; stream the one
	// for its shards' stream.
	name, stream string
	// ledgerID is the ledger's id of campaign id: its fund, escrow,
	// refund and totals live under it.
	ledgerID func(id string) string
	// funds is the meta field of the root that holds the cents the
	// campaign funds its escrow with.
	funds string
	// pass settles what it can of campaign id (Pass); k is the kind
	// itself (the hooks take it from their caller, never from the
	// variables below, which refer to them).
	pass func(w *Worker, ctx context.Context, k *kind, id string) (work int, unsettled int64, open bool, err error)
	// apply writes the items of entries to the sink in one transaction
	// and acknowledges the entries after the commit (apply).
	apply func(w *Worker, ctx context.Context, sh shard, es []redisstore.Entry) error
}

// The kinds of campaign settlement walks, in the order of a pass.
var (
	redPacketKind = &kind{store: redisstore.RedPacket, name: "campaign", stream: "grants",
		ledgerID: func(id string) string { return id }, funds: "total",
		pass: (*Worker).campaign, apply: (*Worker).applyGrants}
	discountKind = &kind{store: redisstore.Discount, name: "discount campaign", stream: "confirms",
		ledgerID: ledger.DiscountCampaign, funds: "budget",
		pass: (*Worker).discount, apply: (*Worker).applyDiscounts}
	kinds = []*kind{redPacketKind, discountKind}
)

// fund writes the fund entry of campaign id of kind k once (idempotent in
// the ledger), from its root's meta in Redis: the first to touch a
// campaign in the ledger funds it.
func (w *Worker) fund(ctx context.Context, k *kind, id string, root redisstore.Snapshot) error {
	return w.fundLedger(owned(ctx, root), ledger.Campaign{ID: k.ledgerID(id), Funding: root.Meta["funding"], Total: atoi(root.Meta[k.funds])})
}
