-- 0009: the ledger's identity (ledger.Ledger.Identity).
--
-- One row: an id that this migration's Go step draws from crypto/rand
-- ("ledger-" and 32 lower-case hex digits) and inserts in this migration's
-- transaction, so a ledger at this version has exactly one, and keeps it
-- for as long as the file lives; and when it was drawn. A campaign
-- records the identity of the ledger it settles into, and a settlement
-- write carrying another one is refused, so deployments sharing one Redis
-- never settle each other's campaigns. A ledger created before this
-- version gets its identity when it migrates to it.
CREATE TABLE ledger_identity (
    only_row   INTEGER PRIMARY KEY DEFAULT 1 CHECK (only_row = 1),
    id         TEXT    NOT NULL CHECK (length(id) = 39 AND substr(id, 1, 7) = 'ledger-'
                                       AND substr(id, 8) NOT GLOB '*[^0-9a-f]*'),
    created_at TEXT    NOT NULL DEFAULT CURRENT_TIMESTAMP
) STRICT;
