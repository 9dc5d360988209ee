package batch

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/hongbao/hongbao/ledger"
)

// CheckBlock validates block b of a campaign of count packets and
// returns its packets encoded (EncodeSeqs) for storage.
func CheckBlock(campaign string, b ledger.Block, count int64) (string, error) {
	if campaign == "" || b.ID == "" || len(b.Seqs) == 0 || b.Shard < 0 {
		return "", fmt.Errorf("%w: block %q of campaign %q with %d packets", ledger.ErrInvalid, b.ID, campaign, len(b.Seqs))
	}
	for _, s := range b.Seqs {
		if s < 1 || s > count {
			return "", fmt.Errorf("%w: block %q holds packet %d, outside 1..%d", ledger.ErrInvalid, b.ID, s, count)
		}
	}
	return EncodeSeqs(b.Seqs), nil
}

// BlockConflict is the error of a block stored with other packets.
func BlockConflict(campaign, id, stored, attempt string) error {
	return &ledger.ConflictError{Entry: "block", Campaign: campaign, Existing: id + " " + stored, Attempt: id + " " + attempt}
}

// EncodeSeqs writes seqs, sorted, as arithmetic runs "first+step*n"
// joined by commas: a block dealt round S shards is one run of step S,
// a contiguous one a run of step 1, so a block of 10,000 packets is
// usually a few bytes.
func EncodeSeqs(seqs []int64) string {
	s := slices.Clone(seqs)
	slices.Sort(s)
	s = slices.Compact(s)
	var b strings.Builder
	for i := 0; i < len(s); {
		j, step := i+1, int64(1)
		if j < len(s) {
			step = s[j] - s[i]
			for j < len(s) && s[j]-s[j-1] == step {
				j++
			}
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%d+%d*%d", s[i], step, j-i)
		i = j
	}
	return b.String()
}

// DecodeSeqs reads what EncodeSeqs wrote.
func DecodeSeqs(v string) ([]int64, error) {
	var out []int64
	for _, run := range strings.Split(v, ",") {
		first, rest, ok1 := strings.Cut(run, "+")
		step, n, ok2 := strings.Cut(rest, "*")
		f, e1 := strconv.ParseInt(first, 10, 64)
		st, e2 := strconv.ParseInt(step, 10, 64)
		c, e3 := strconv.ParseInt(n, 10, 64)
		if !ok1 || !ok2 || e1 != nil || e2 != nil || e3 != nil || c < 1 || c > 1<<24 {
			return nil, fmt.Errorf("ledger: stored block packets %q unreadable", run)
		}
		for i := int64(0); i < c; i++ {
			out = append(out, f+i*st)
		}
	}
	return out, nil
}
