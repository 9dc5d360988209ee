package batch

import (
	"bytes"
	"encoding/hex"
	"fmt"

	"github.com/hongbao/hongbao/ledger"
)

// CheckCommitment checks a commitment and its salts before any write.
func CheckCommitment(c ledger.Commitment, salts []byte) error {
	switch {
	case c.Campaign == "":
		return fmt.Errorf("%w: empty campaign id", ledger.ErrInvalid)
	case c.Count <= 0 || c.Cents <= 0:
		return fmt.Errorf("%w: commitment of %d packets, %d cents", ledger.ErrInvalid, c.Count, c.Cents)
	case int64(len(salts)) != ledger.SaltSize*c.Count:
		return fmt.Errorf("%w: %d bytes of salts for %d packets", ledger.ErrInvalid, len(salts), c.Count)
	case len(c.HolderKey) != 32:
		return fmt.Errorf("%w: holder key of %d bytes", ledger.ErrInvalid, len(c.HolderKey))
	case len(c.Body) == 0:
		return fmt.Errorf("%w: empty commitment body", ledger.ErrInvalid)
	}
	return nil
}

// CommitmentAgrees compares a new commitment with the packet set (count,
// cents) and with a stored root (nil for none): nil to write, replay true
// for the same root, an error otherwise.
func CommitmentAgrees(c ledger.Commitment, count, cents int64, stored []byte) (replay bool, err error) {
	if count != c.Count || cents != c.Cents {
		return false, &ledger.ConflictError{Entry: "commitment", Campaign: c.Campaign,
			Existing: fmt.Sprintf("packets: %d, %d cents", count, cents),
			Attempt:  fmt.Sprintf("commitment of %d packets, %d cents", c.Count, c.Cents)}
	}
	if stored == nil {
		return false, nil
	}
	if bytes.Equal(stored, c.Root[:]) {
		return true, nil
	}
	return false, &ledger.ConflictError{Entry: "commitment", Campaign: c.Campaign,
		Existing: "root " + hex.EncodeToString(stored), Attempt: "root " + hex.EncodeToString(c.Root[:])}
}

// SaltChunks splits salts into the stored chunks.
func SaltChunks(salts []byte, fn func(chunk int64, b []byte) error) error {
	const size = ledger.SaltSize * ledger.SaltsPerChunk
	for k := 0; k*size < len(salts); k++ {
		if err := fn(int64(k), salts[k*size:min((k+1)*size, len(salts))]); err != nil {
			return err
		}
	}
	return nil
}
