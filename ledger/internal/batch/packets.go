package batch

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"

	"github.com/hongbao/hongbao/ledger"
)

// PacketSet sums up a campaign's packets: the row WritePackets stores next
// to them, and what a replay is compared with, so a retried create is
// recognised without reading millions of packets back.
type PacketSet struct {
	Count int64
	Cents int64
	// Digest is the SHA-256 of the amounts in seq order, each as 8 bytes
	// big-endian. Count and Cents alone would take a reordered split for
	// a replay.
	Digest []byte
}

// Same says whether two sets are the same packets.
func (s PacketSet) Same(o PacketSet) bool {
	return s.Count == o.Count && s.Cents == o.Cents && string(s.Digest) == string(o.Digest)
}

// String is the set as a conflict report shows it.
func (s PacketSet) String() string {
	d := hex.EncodeToString(s.Digest)
	if len(d) > 16 {
		d = d[:16]
	}
	return fmt.Sprintf("%d packets, %d cents, digest %s", s.Count, s.Cents, d)
}

// CheckPackets validates the packets of one campaign (cents[i] is packet
// seq i+1) and returns their set.
func CheckPackets(campaign string, cents []int64) (PacketSet, error) {
	if campaign == "" {
		return PacketSet{}, fmt.Errorf("%w: empty campaign id", ledger.ErrInvalid)
	}
	if len(cents) == 0 {
		return PacketSet{}, fmt.Errorf("%w: campaign %q: no packets", ledger.ErrInvalid, campaign)
	}
	h := sha256.New()
	buf := make([]byte, 0, 8<<10)
	var sum int64
	for i, c := range cents {
		if c <= 0 {
			return PacketSet{}, fmt.Errorf("%w: campaign %q: packet seq %d has %d cents", ledger.ErrInvalid, campaign, i+1, c)
		}
		if sum > math.MaxInt64-c {
			return PacketSet{}, fmt.Errorf("%w: campaign %q: packets sum above %d cents", ledger.ErrInvalid, campaign, int64(math.MaxInt64))
		}
		sum += c
		buf = binary.BigEndian.AppendUint64(buf, uint64(c))
		if len(buf) == cap(buf) {
			h.Write(buf)
			buf = buf[:0]
		}
	}
	h.Write(buf)
	return PacketSet{Count: int64(len(cents)), Cents: sum, Digest: h.Sum(nil)}, nil
}

// PacketsConflict is the error for packets that differ from the stored
// ones.
func PacketsConflict(campaign string, stored, attempt PacketSet) error {
	return &ledger.ConflictError{Entry: "packets", Campaign: campaign, Existing: stored.String(), Attempt: attempt.String()}
}

// PacketsFundConflict is the error for packets whose sum is not the
// total of the campaign's fund entry.
func PacketsFundConflict(campaign string, total int64, attempt PacketSet) error {
	return &ledger.ConflictError{Entry: "packets", Campaign: campaign,
		Existing: fmt.Sprintf("fund entry of %d cents", total), Attempt: attempt.String()}
}

// FundPacketsConflict is the error for a fund entry whose total is not the
// sum of the campaign's packets.
func FundPacketsConflict(c ledger.Campaign, packetCents int64) error {
	return &ledger.ConflictError{Entry: "fund", Campaign: c.ID,
		Existing: fmt.Sprintf("packets summing to %d cents", packetCents),
		Attempt:  fmt.Sprintf("funding %q total %d", c.Funding, c.Total)}
}
