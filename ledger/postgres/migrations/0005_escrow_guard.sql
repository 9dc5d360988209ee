-- 0005: no escrow below zero, whatever writes it.
--
-- The ledger checks every grant, discount and refund against its
-- campaign's escrow inside the transaction, under the campaign's lock,
-- and refuses what would overdraw it (ledger.ErrRefused). This constraint
-- is the database's own backstop behind that check: a path that forgot it,
-- or a hand-run UPDATE, fails instead of leaving a negative escrow, which
-- would be money granted that was never funded. Funding accounts go
-- negative by design (they are the source of every escrow) and user
-- accounts only ever receive, so the rule is on escrows alone.
--
-- NOT VALID: rows already stored are not checked now, so a database that
-- holds a negative escrow from before still migrates (reconcile reports
-- it); any later write of such a row must satisfy the rule.
ALTER TABLE ledger_accounts ADD CONSTRAINT ledger_escrow_not_negative
    CHECK (left(id, 7) <> 'escrow:' OR balance >= 0) NOT VALID;
