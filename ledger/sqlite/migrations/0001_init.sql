-- 0001: the double-entry ledger.
--
-- Every movement of money moves cents from one account to another. The
-- fund and refund entries (one of each per campaign at most) live in
-- ledger_entries; the grants, up to hundreds of thousands per campaign,
-- live in the narrow ledger_grants, where each row is the entry
-- escrow:<campaign> -> user:<user_id>. The view ledger_journal shows both
-- as one journal; balances are derivable from it alone, and
-- ledger_accounts keeps them for fast reads, updated in the same
-- transaction as the rows it reflects.
--
-- STRICT tables refuse a REAL or a string in a money column, so no float
-- can ever reach a balance.

CREATE TABLE ledger_campaigns (
    num         INTEGER PRIMARY KEY, -- the rowid; short key for ledger_grants
    id          TEXT    NOT NULL UNIQUE,
    funding     TEXT    NOT NULL,
    total       INTEGER NOT NULL CHECK (total >= 0),
    grant_count INTEGER NOT NULL DEFAULT 0,
    grant_cents INTEGER NOT NULL DEFAULT 0,
    refunded    INTEGER CHECK (refunded >= 0), -- NULL until the refund entry exists
    created_at  TEXT    NOT NULL DEFAULT CURRENT_TIMESTAMP
) STRICT;

CREATE TABLE ledger_accounts (
    id      TEXT PRIMARY KEY, -- user:<id>, escrow:<campaign>, funding:<name>
    balance INTEGER NOT NULL DEFAULT 0
) STRICT, WITHOUT ROWID;

-- Fund (funding -> escrow) and refund (escrow -> funding): once per campaign.
CREATE TABLE ledger_entries (
    campaign     TEXT    NOT NULL,
    kind         TEXT    NOT NULL CHECK (kind IN ('fund', 'refund')),
    from_account TEXT    NOT NULL,
    to_account   TEXT    NOT NULL,
    cents        INTEGER NOT NULL CHECK (cents >= 0),
    created_at   TEXT    NOT NULL DEFAULT CURRENT_TIMESTAMP,
    PRIMARY KEY (campaign, kind)
) STRICT, WITHOUT ROWID;

-- Grants (escrow -> user). The two keys are the idempotency rules: a
-- packet is granted once, a user holds one packet per campaign. Rows are
-- only written under the write lock, after checking the campaign exists.
CREATE TABLE ledger_grants (
    campaign   INTEGER NOT NULL, -- ledger_campaigns.num
    seq        INTEGER NOT NULL,
    user_id    TEXT    NOT NULL,
    cents      INTEGER NOT NULL CHECK (cents > 0),
    created_at TEXT    NOT NULL DEFAULT CURRENT_TIMESTAMP,
    PRIMARY KEY (campaign, seq),
    UNIQUE (campaign, user_id)
) STRICT, WITHOUT ROWID;

CREATE VIEW ledger_journal AS
    SELECT e.kind, e.campaign, NULL AS seq, e.from_account, e.to_account, e.cents, e.created_at
    FROM ledger_entries e
    UNION ALL
    SELECT 'grant', c.id, g.seq, 'escrow:' || c.id, 'user:' || g.user_id, g.cents, g.created_at
    FROM ledger_grants g JOIN ledger_campaigns c ON c.num = g.campaign;
