-- 0002: every packet of a campaign, from its creation on.
--
-- Redis holds the pool; when Redis loses a campaign, the ledger's packets,
-- minus its grants, minus the grants still in Redis's stream, are the pool
-- to restore. WritePackets stores all packets of a campaign in one
-- transaction, with one ledger_packet_sets row that sums them up (count,
-- cents, digest), so a retried create is recognised from that row alone.
-- A campaign's packets never change once written.
--
-- Packets are recorded before the campaign goes live and need no fund
-- entry, so they have their own short key instead of ledger_campaigns.num.

CREATE TABLE ledger_packet_sets (
    num        BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, -- short key for ledger_packets
    id         TEXT   NOT NULL UNIQUE,                          -- the campaign id
    count      BIGINT NOT NULL CHECK (count > 0),               -- packets, seq 1..count
    cents      BIGINT NOT NULL CHECK (cents > 0),               -- their sum
    digest     BYTEA  NOT NULL CHECK (length(digest) = 32),     -- SHA-256 of the amounts in seq order
    created_at TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- Narrow on purpose: a campaign may have ten million packets. The primary
-- key serves the reads in seq order and the anti-join with ledger_grants,
-- whose primary key has the same shape. No foreign key, as for
-- ledger_grants: rows are written only in the transaction that creates
-- their ledger_packet_sets row.
CREATE TABLE ledger_packets (
    campaign BIGINT NOT NULL, -- ledger_packet_sets.num
    seq      BIGINT NOT NULL,
    cents    BIGINT NOT NULL CHECK (cents > 0),
    PRIMARY KEY (campaign, seq)
);
