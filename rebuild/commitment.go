package rebuild

import (
	"context"
	"errors"

	"github.com/hongbao/hongbao"
)

// checkCommitment checks the ledger's packets and salts against the root
// the campaign committed to at create, before anything is restored from
// them: a rebuild never puts back a pool other than the one committed
// (a *hongbao.CommitmentError refuses it). The salts live in the ledger
// only, never in Redis, so there is nothing of them to restore: proofs
// and the draw log read them where they always were.
func (r *run) checkCommitment(ctx context.Context) error {
	root, err := hongbao.CheckLedgerCommitment(ctx, r.cfg.Ledger, r.id)
	switch {
	case errors.Is(err, hongbao.ErrNoCommitment):
		r.rep.Notes = append(r.rep.Notes, "the ledger records no commitment for this campaign (created before commitments, or without a ledger that keeps them)")
		return nil
	case errors.Is(err, hongbao.ErrDrawLogExpired):
		r.rep.Notes = append(r.rep.Notes, "the campaign's draw data (salts) was deleted after its retention: its committed root is kept and cannot be checked again")
		return nil
	case err != nil:
		return err
	}
	r.rep.CommitmentRoot = root
	return nil
}
