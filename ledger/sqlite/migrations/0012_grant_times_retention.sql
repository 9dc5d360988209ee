-- 0012: when each packet was granted, and the end of a draw log's data.
--
-- granted_ms is the grant's time by Redis' clock, in ms since the epoch:
-- the time of the settlement stream entry that carried it (its id), the
-- same instant a receipt states. NULL for grants settled before this
-- migration and for grants a rebuild placed without their entry.
ALTER TABLE ledger_grants ADD COLUMN granted_ms INTEGER CHECK (granted_ms > 0);

-- A commitment's draw data (its salts and the key of its holders'
-- pseudonyms) is deleted once the retention after the campaign's refund
-- has passed (the settle worker's sweep); the root, the count, the cents
-- and the published body stay. purged_at says when, NULL while kept.
-- SQLite cannot drop a NOT NULL: the table is made again.
CREATE TABLE ledger_commitments_0012 (
    id           TEXT    PRIMARY KEY,                              -- the campaign id
    root         BLOB    NOT NULL CHECK (length(root) = 32),
    count        INTEGER NOT NULL CHECK (count > 0),
    cents        INTEGER NOT NULL CHECK (cents > 0),
    body         TEXT    NOT NULL,
    holder_key   BLOB    CHECK (holder_key IS NULL OR length(holder_key) = 32),
    committed_at TEXT    NOT NULL DEFAULT CURRENT_TIMESTAMP,
    purged_at    TEXT
) STRICT, WITHOUT ROWID;
INSERT INTO ledger_commitments_0012 (id, root, count, cents, body, holder_key, committed_at)
    SELECT id, root, count, cents, body, holder_key, committed_at FROM ledger_commitments;
DROP TABLE ledger_commitments;
ALTER TABLE ledger_commitments_0012 RENAME TO ledger_commitments;
