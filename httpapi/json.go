package httpapi

import (
	"strconv"
	"time"

	"github.com/hongbao/hongbao"
	"github.com/hongbao/hongbao/settle"
)

// The JSON answers. Amounts come in both forms, a decimal string and
// integer cents; never as floats.

type campaignOut struct {
	ID             string `json:"id"`
	State          string `json:"state"`
	OpensAt        string `json:"opens_at"`
	ClosesAt       string `json:"closes_at"`
	Total          string `json:"total"`
	TotalCents     int64  `json:"total_cents"`
	Count          int    `json:"count"`
	Split          string `json:"split"`
	Min            string `json:"min"`
	MinCents       int64  `json:"min_cents"`
	Max            string `json:"max,omitempty"`
	MaxCents       int64  `json:"max_cents,omitempty"`
	FundingAccount string `json:"funding_account"`
	// Owner is the ledger or wallet the campaign settles into.
	Owner string `json:"owner,omitempty"`
	// Seed is a decimal string: a uint64 does not survive a JavaScript
	// number. Only admins see campaigns, so it is always there.
	Seed string `json:"seed"`
	// Shards is how many groups of Redis keys the campaign is spread over.
	Shards int `json:"shards"`
}

func rfc3339(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

func campaignJSON(c *hongbao.Campaign) campaignOut {
	out := campaignOut{
		ID: c.ID, State: string(c.State), OpensAt: rfc3339(c.OpensAt), ClosesAt: rfc3339(c.ClosesAt),
		Total: hongbao.FormatCents(c.Total), TotalCents: c.Total, Count: c.Count, Split: string(c.Split),
		Min: hongbao.FormatCents(c.Min), MinCents: c.Min, FundingAccount: c.Funding, Owner: c.Owner, Shards: max(c.Shards, 1),
		Seed: strconv.FormatUint(c.Seed, 10),
	}
	if c.Max > 0 {
		out.Max, out.MaxCents = hongbao.FormatCents(c.Max), c.Max
	}
	return out
}

type settlementOut struct {
	// Lag counts grants stream entries not yet delivered to a settlement
	// worker; Pending those delivered and not yet written to the ledger.
	LagEntries     int64 `json:"lag_entries"`
	PendingEntries int64 `json:"pending_entries"`
	DeadEntries    int64 `json:"dead_entries"`
}

type statusOut struct {
	campaignOut
	CloseReason    string        `json:"close_reason,omitempty"`
	GrantedCount   int64         `json:"granted_count"`
	Granted        string        `json:"granted"`
	GrantedCents   int64         `json:"granted_cents"`
	RemainingCount int64         `json:"remaining_count"`
	Remaining      string        `json:"remaining"`
	RemainingCents int64         `json:"remaining_cents"`
	Refunded       string        `json:"refunded"`
	RefundedCents  int64         `json:"refunded_cents"`
	InFlight       int64         `json:"in_flight"`
	Paused         bool          `json:"paused"`
	PausedShards   int           `json:"paused_shards"`
	Overtaken      bool          `json:"overtaken,omitempty"`
	BlockedUsers   int64         `json:"blocked_users"`
	Settlement     settlementOut `json:"settlement"`
	Now            string        `json:"now"`
}

func statusJSON(st *hongbao.Status, b settle.Backlog) statusOut {
	return statusOut{
		campaignOut: campaignJSON(&st.Campaign), CloseReason: st.CloseReason,
		GrantedCount: st.GrantedCount, Granted: hongbao.FormatCents(st.GrantedCents), GrantedCents: st.GrantedCents,
		RemainingCount: st.RemainingCount, Remaining: hongbao.FormatCents(st.RemainingCents), RemainingCents: st.RemainingCents,
		Refunded: hongbao.FormatCents(st.RefundedCents), RefundedCents: st.RefundedCents, InFlight: st.InFlight,
		Paused: st.Paused, PausedShards: st.PausedShards, Overtaken: st.Overtaken, BlockedUsers: st.BlockedUsers,
		Settlement: settlementOut{LagEntries: b.Lag, PendingEntries: b.Pending, DeadEntries: b.Dead},
		Now:        rfc3339(st.Now),
	}
}

// grantOut answers a grab and GET grants/me.
type grantOut struct {
	Campaign    string `json:"campaign"`
	Outcome     string `json:"outcome,omitempty"`
	PacketID    string `json:"packet_id,omitempty"`
	Amount      string `json:"amount,omitempty"`
	AmountCents int64  `json:"amount_cents,omitempty"`
}

// appendGrant appends the JSON of grantJSON(g, outcome), and a newline,
// without reflection: the grab answer is the hot path of the service. Its
// strings need no escaping: campaign ids are A-Z a-z 0-9 _ - (validated
// before any grab), outcomes are our own words, amounts are digits.
// TestAppendGrantMatchesEncodingJSON holds it to encoding/json's output.
func appendGrant(b []byte, g hongbao.Grant, outcome string) []byte {
	b = append(b, `{"campaign":"`...)
	b = append(b, g.Campaign...)
	b = append(b, '"')
	if outcome != "" {
		b = append(b, `,"outcome":"`...)
		b = append(b, outcome...)
		b = append(b, '"')
	}
	if g.Outcome.HasPacket() {
		if g.Seq != 0 {
			b = append(b, `,"packet_id":"`...)
			b = append(b, g.Campaign...)
			b = append(b, '/')
			b = strconv.AppendInt(b, g.Seq, 10)
			b = append(b, '"')
		}
		b = append(b, `,"amount":"`...)
		b = hongbao.AppendCents(b, g.Cents)
		b = append(b, '"')
		if g.Cents != 0 {
			b = append(b, `,"amount_cents":`...)
			b = strconv.AppendInt(b, g.Cents, 10)
		}
	}
	return append(b, "}\n"...)
}

func grantJSON(g hongbao.Grant, outcome string) grantOut {
	out := grantOut{Campaign: g.Campaign, Outcome: outcome}
	if g.Outcome.HasPacket() {
		out.PacketID, out.Amount, out.AmountCents = g.PacketID(), hongbao.FormatCents(g.Cents), g.Cents
	}
	return out
}
