-- 0008: grant counters in rows of their own, user balances rolled up per
-- campaign.
--
-- A batch adds its count and cents to a counter row of the campaign
-- (ledger_campaign_counts; SQLite has one writer at a time, so slot 0)
-- and no longer to each user's balance: the journal (ledger_grants,
-- ledger_discounts) has every entry, and a campaign's entries are added to
-- ledger_accounts once, per user, in the refund's transaction, which sets
-- rolled_up. Balance answers the stored balance plus the user's entries of
-- campaigns not rolled up yet, in one statement. The schema is the
-- PostgreSQL ledger's, whose batches of one campaign run side by side.
--
-- Existing data carries over exactly: every campaign's counters become its
-- slot 0. A refunded campaign is rolled up already (its users' balances
-- hold its entries). A campaign not refunded yet becomes live: its entries
-- leave the stored balances, and Balance adds them from the journal
-- again, so every balance reads the same before and after, and the
-- campaign's refund rolls all of them up once. New campaigns are written
-- with rolled_up = 0 explicitly (SQLite cannot change a column's default).

CREATE TABLE ledger_campaign_counts (
    campaign INTEGER NOT NULL, -- ledger_campaigns.num
    slot     INTEGER NOT NULL,
    count    INTEGER NOT NULL DEFAULT 0,
    cents    INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (campaign, slot)
) STRICT, WITHOUT ROWID;

INSERT INTO ledger_campaign_counts (campaign, slot, count, cents)
    SELECT num, 0, grant_count, grant_cents FROM ledger_campaigns
    WHERE grant_count <> 0 OR grant_cents <> 0;

ALTER TABLE ledger_campaigns DROP COLUMN grant_count;
ALTER TABLE ledger_campaigns DROP COLUMN grant_cents;

ALTER TABLE ledger_campaigns ADD COLUMN rolled_up INTEGER NOT NULL DEFAULT 1 CHECK (rolled_up IN (0, 1));

UPDATE ledger_accounts SET balance = balance - e.cents
FROM (SELECT 'user:' || x.user_id AS id, sum(x.cents) AS cents FROM (
        SELECT g.user_id, g.cents FROM ledger_grants g JOIN ledger_campaigns c ON c.num = g.campaign
        WHERE c.refunded IS NULL
        UNION ALL
        SELECT d.user_id, d.cents FROM ledger_discounts d JOIN ledger_campaigns c ON c.num = d.campaign
        WHERE c.refunded IS NULL) AS x
    GROUP BY x.user_id) AS e
WHERE ledger_accounts.id = e.id;
UPDATE ledger_campaigns SET rolled_up = 0 WHERE refunded IS NULL;

CREATE INDEX ledger_campaigns_live ON ledger_campaigns (num) WHERE rolled_up = 0;
