package batch

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/hongbao/hongbao/ledger"
)

// CheckTerms validates a campaign's terms against its packet set as the
// ledger stores it (count and cents) and returns them as the JSON the
// backends store. Lost is sorted and checked to name packets of the set,
// each once.
func CheckTerms(campaign string, t ledger.Terms, count, cents int64) ([]byte, error) {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: campaign %q: terms: %s", ledger.ErrInvalid, campaign, fmt.Sprintf(format, a...))
	}
	switch {
	case t.Count != count || t.Total != cents:
		return nil, bad("%d packets of %d cents, the recorded packets are %d of %d cents", t.Count, t.Total, count, cents)
	case t.Funding == "":
		return nil, bad("no funding account")
	case t.Shards < 1:
		return nil, bad("%d shards", t.Shards)
	case t.ClosesAt <= t.OpensAt:
		return nil, bad("closes at %d, not after it opens at %d", t.ClosesAt, t.OpensAt)
	}
	t.Lost = slices.Clone(t.Lost)
	slices.Sort(t.Lost)
	for i, seq := range t.Lost {
		if seq < 1 || seq > count || (i > 0 && t.Lost[i-1] == seq) {
			return nil, bad("lost packet %d is no packet of 1..%d, or is listed twice", seq, count)
		}
	}
	b, err := json.Marshal(t)
	if err != nil {
		return nil, bad("%v", err)
	}
	return b, nil
}

// DecodeTerms reads terms stored by CheckTerms; a NULL column (no terms)
// is ErrNoTerms.
func DecodeTerms(campaign string, stored *string) (ledger.Terms, error) {
	if stored == nil {
		return ledger.Terms{}, fmt.Errorf("%w: campaign %q", ledger.ErrNoTerms, campaign)
	}
	var t ledger.Terms
	if err := json.Unmarshal([]byte(*stored), &t); err != nil {
		return ledger.Terms{}, fmt.Errorf("campaign %q: stored terms: %w", campaign, err)
	}
	return t, nil
}
