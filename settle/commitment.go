package settle

import (
	"context"
	"encoding/hex"
	"errors"

	"github.com/hongbao/hongbao/fairness"
	"github.com/hongbao/hongbao/ledger"
)

// commitment checks the ledger's packets and salts against the root the
// campaign committed to at create (docs/fairness.md): a packet whose
// amount changed, or a salt that moved, since the commitment was
// published is a difference. A ledger without commitments, or a campaign
// created before them, is not checked.
func (rc *reconciler) commitment(ctx context.Context) error {
	cm, ok := rc.l.(ledger.Committer)
	if !ok {
		return nil
	}
	c, err := cm.Commitment(ctx, rc.r.Campaign)
	if errors.Is(err, ledger.ErrNoCommitment) {
		return nil
	}
	if err != nil {
		return err
	}
	salts, err := cm.Salts(ctx, rc.r.Campaign)
	if errors.Is(err, ledger.ErrDrawDataPurged) {
		// Past its retention the salts are gone by design: the root is
		// kept, and there is nothing left to recompute it from.
		rc.r.DrawDataPurged = true
		return nil
	}
	if err != nil {
		return err
	}
	cents := make([]int64, 0, c.Count)
	if err := rc.l.Packets(ctx, rc.r.Campaign, func(p ledger.Packet) error {
		cents = append(cents, p.Cents)
		return nil
	}); err != nil {
		return err
	}
	committed := hex.EncodeToString(c.Root[:])
	if int64(len(cents)) != c.Count {
		rc.r.summary("commitment: the ledger holds %d packets, the commitment %d", len(cents), c.Count)
		return nil
	}
	root, err := fairness.Root(rc.r.Campaign, cents, salts)
	if err != nil {
		return err
	}
	if root.String() != committed {
		rc.r.summary("commitment: the ledger's packets and salts hash to %s, not to the committed root %s", root, committed)
		return nil
	}
	rc.r.CommitmentRoot = committed
	return nil
}
