-- 0010: the fencing tokens of leases (ledger.Ledger.RaiseLease).
--
-- One row per lease (package leader's, named by its Redis keys' prefix and
-- name: "hb:lease:{scheduler}", "hb:lease:{scheduler:part:3}"): the largest
-- fencing token a holder proved itself with, raised once per election
-- before settlement starts, never lowered. A holder whose token is not
-- above it was handed the lease under a token already used (a counter
-- lost in Redis and a clock behind), and settles nothing under it.
CREATE TABLE ledger_leases (
    name      TEXT    PRIMARY KEY,
    token     INTEGER NOT NULL CHECK (token > 0),
    raised_at TEXT    NOT NULL DEFAULT CURRENT_TIMESTAMP
) STRICT;
