-- 0012: when each packet was granted, and the end of a draw log's data.
--
-- granted_ms is the grant's time by Redis' clock, in ms since the epoch:
-- the time of the settlement stream entry that carried it (its id), the
-- same instant a receipt states. NULL for grants settled before this
-- migration and for grants a rebuild placed without their entry.
-- Adding a nullable column without a default rewrites nothing.
ALTER TABLE ledger_grants ADD COLUMN granted_ms BIGINT CHECK (granted_ms > 0);

-- A commitment's draw data (its salts and the key of its holders'
-- pseudonyms) is deleted once the retention after the campaign's refund
-- has passed (the settle worker's sweep); the root, the count, the cents
-- and the published body stay. purged_at says when, NULL while kept.
ALTER TABLE ledger_commitments ALTER COLUMN holder_key DROP NOT NULL;
ALTER TABLE ledger_commitments ADD COLUMN purged_at TIMESTAMPTZ;
