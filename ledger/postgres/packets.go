package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/hongbao/hongbao/ledger/internal/batch"
	"github.com/hongbao/hongbao/ledger/internal/query"
)

// campaignLockClass is the first key of the per-campaign advisory lock
// ("hbCp") that Fund and WritePackets take: each checks the other's row
// (total against packets), and under READ COMMITTED two transactions that
// each insert one row and check for the other could both pass. The second
// key hashes the schema with the campaign id; a collision only makes two
// campaigns' creates wait for each other.
const campaignLockClass = 0x68624370

func lockCampaign(ctx context.Context, tx pgx.Tx, campaign string) error {
	_, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1, hashtext(coalesce(current_schema(), '') || '/' || $2))`,
		campaignLockClass, campaign)
	return err
}

// packetSetStatements are WritePackets' reads of the rows it checks and
// its insert of the new set's row.
var packetSetStatements = query.PacketSetStatements{
	Stored:    `SELECT count, cents, digest FROM ledger_packet_sets WHERE id = $1`,
	FundTotal: `SELECT total FROM ledger_campaigns WHERE id = $1`,
	Insert: `INSERT INTO ledger_packet_sets (id, count, cents, digest) VALUES ($1, $2, $3, $4)
			RETURNING num`,
}

// WritePackets implements ledger.Ledger. Under the campaign's advisory
// lock it compares with a stored set (replay or conflict) and with the
// fund entry; a new set gets its ledger_packet_sets row and then its
// packets by COPY, straight into ledger_packets: the new row's num is
// fresh, so no stored packet can collide and no staging table is needed.
func (l *Ledger) WritePackets(ctx context.Context, campaign string, cents []int64) error {
	set, err := batch.CheckPackets(campaign, cents)
	if err != nil {
		return err
	}
	return wrap("write packets", l.tx(ctx, func(tx pgx.Tx) error {
		if err := lockCampaign(ctx, tx, campaign); err != nil {
			return err
		}
		num, replay, err := query.WritePacketSet(campaign, set, query.RowOf(ctx, tx.QueryRow), packetSetStatements)
		if err != nil || replay {
			return err
		}
		n, err := tx.CopyFrom(ctx, pgx.Identifier{"ledger_packets"}, []string{"campaign", "seq", "cents"},
			&packetSource{num: num, cents: cents, i: -1})
		if err == nil && n != set.Count {
			err = fmt.Errorf("copied %d packets of %d", n, set.Count)
		}
		return err
	}))
}

// packetSource feeds COPY one packet at a time from the caller's slice,
// reusing one row, so the copy needs no memory per packet.
type packetSource struct {
	num   int64
	cents []int64
	i     int
	row   [3]any
}

func (s *packetSource) Next() bool { s.i++; return s.i < len(s.cents) }

func (s *packetSource) Values() ([]any, error) {
	s.row[0], s.row[1], s.row[2] = s.num, int64(s.i+1), s.cents[s.i]
	return s.row[:], nil
}

func (s *packetSource) Err() error { return nil }
