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
    num        INTEGER PRIMARY KEY,                             -- the rowid; short key for ledger_packets
    id         TEXT    NOT NULL UNIQUE,                         -- the campaign id
    count      INTEGER NOT NULL CHECK (count > 0),              -- packets, seq 1..count
    cents      INTEGER NOT NULL CHECK (cents > 0),              -- their sum
    digest     BLOB    NOT NULL CHECK (length(digest) = 32),    -- SHA-256 of the amounts in seq order
    created_at TEXT    NOT NULL DEFAULT CURRENT_TIMESTAMP
) STRICT;

-- Narrow on purpose: a campaign may have ten million packets. The primary
-- key serves the reads in seq order and the anti-join with ledger_grants,
-- whose primary key has the same shape.
CREATE TABLE ledger_packets (
    campaign INTEGER NOT NULL, -- ledger_packet_sets.num
    seq      INTEGER NOT NULL,
    cents    INTEGER NOT NULL CHECK (cents > 0),
    PRIMARY KEY (campaign, seq)
) STRICT, WITHOUT ROWID;
