-- 0005: no escrow below zero, whatever writes it.
--
-- The ledger checks every grant, discount and refund against its
-- campaign's escrow inside the transaction and refuses what would
-- overdraw it (ledger.ErrRefused). These triggers are the database's own
-- backstop behind that check: a path that forgot it, or a hand-run
-- UPDATE, fails instead of leaving a negative escrow, which would be money
-- granted that was never funded. SQLite cannot add a CHECK constraint to
-- a table without rebuilding it, hence triggers; an upsert's DO UPDATE
-- runs the UPDATE trigger. Funding accounts go negative by design and
-- user accounts only ever receive, so the rule is on escrows alone.
-- Rows already stored are not checked now; a later write of one is.
CREATE TRIGGER ledger_escrow_not_negative_update
BEFORE UPDATE OF balance ON ledger_accounts
WHEN NEW.balance < 0 AND substr(NEW.id, 1, 7) = 'escrow:'
BEGIN
    SELECT RAISE(ABORT, 'ledger_escrow_not_negative');
END;

CREATE TRIGGER ledger_escrow_not_negative_insert
BEFORE INSERT ON ledger_accounts
WHEN NEW.balance < 0 AND substr(NEW.id, 1, 7) = 'escrow:'
BEGIN
    SELECT RAISE(ABORT, 'ledger_escrow_not_negative');
END;
