-- 0011: each campaign's fairness commitment (package fairness).
--
-- A campaign commits at create, before it can open, to a Merkle tree over
-- its packets, each with a 32-byte salt from crypto/rand. The root and
-- the published commitment (body, byte for byte as served) are written
-- once, after the packets and before the campaign goes live, and never
-- change; a retried create finds them and reuses the salts. The salts
-- live here only, never in Redis: a rebuild that restores the packets
-- leaves them as they are, and a proof or the draw log reads them here.
-- holder_key keys the draw log's pseudonyms of the holders; it is never
-- published.
CREATE TABLE ledger_commitments (
    id           TEXT    PRIMARY KEY,                              -- the campaign id
    root         BLOB    NOT NULL CHECK (length(root) = 32),
    count        INTEGER NOT NULL CHECK (count > 0),
    cents        INTEGER NOT NULL CHECK (cents > 0),
    body         TEXT    NOT NULL,
    holder_key   BLOB    NOT NULL CHECK (length(holder_key) = 32),
    committed_at TEXT    NOT NULL DEFAULT CURRENT_TIMESTAMP
) STRICT, WITHOUT ROWID;

-- The salts in chunks of 4096 packets (128 KiB), chunk k holding seq
-- 4096k+1 onwards: ten million packets are 2,442 rows, not one blob.
CREATE TABLE ledger_salts (
    campaign TEXT    NOT NULL,
    chunk    INTEGER NOT NULL CHECK (chunk >= 0),
    salts    BLOB    NOT NULL CHECK (length(salts) > 0 AND length(salts) % 32 = 0),
    PRIMARY KEY (campaign, chunk)
) STRICT, WITHOUT ROWID;
