-- 0008: batches of one campaign no longer wait for each other.
--
-- A grant batch used to lock its campaign's row and, under it, add to the
-- row's grant_count and grant_cents and to every user's balance, so two
-- settle processes writing two shards of one campaign ran one after the
-- other. Now a batch reads the campaign row FOR SHARE (batches run side
-- by side; Refund and Fence still wait for all of them) and:
--
-- * adds its count and cents to one of a few counter rows of the campaign
--   (ledger_campaign_counts, slot chosen by the writer's connection), so
--   concurrent writers rarely touch one row; Totals and Refund sum them.
-- * leaves user balances alone: the journal (ledger_grants,
--   ledger_discounts) has every entry, and a campaign's entries are added
--   to ledger_accounts once, per user, in the refund's transaction, which
--   sets rolled_up. Balance answers the stored balance plus the user's
--   entries of campaigns not rolled up yet, in one statement.
--
-- Existing data carries over exactly: every campaign's counters become its
-- slot 0. A refunded campaign is rolled up already (its users' balances
-- hold its entries). A campaign not refunded yet becomes live: its entries
-- leave the stored balances, and Balance adds them from the journal
-- again, so every balance reads the same before and after, and the
-- campaign's refund rolls all of them up once.

CREATE TABLE ledger_campaign_counts (
    campaign BIGINT  NOT NULL, -- ledger_campaigns.num
    slot     INTEGER NOT NULL,
    count    BIGINT  NOT NULL DEFAULT 0,
    cents    BIGINT  NOT NULL DEFAULT 0,
    PRIMARY KEY (campaign, slot)
);

INSERT INTO ledger_campaign_counts (campaign, slot, count, cents)
    SELECT num, 0, grant_count, grant_cents FROM ledger_campaigns
    WHERE grant_count <> 0 OR grant_cents <> 0;

ALTER TABLE ledger_campaigns DROP COLUMN grant_count, DROP COLUMN grant_cents;

-- Metadata only: existing rows read true, new rows get false.
ALTER TABLE ledger_campaigns ADD COLUMN rolled_up BOOLEAN NOT NULL DEFAULT true;
ALTER TABLE ledger_campaigns ALTER COLUMN rolled_up SET DEFAULT false;

-- The campaigns whose entries Balance adds to the stored balances: few,
-- whatever the history.
UPDATE ledger_accounts a SET balance = a.balance - e.cents
FROM (SELECT 'user:' || x.user_id AS id, sum(x.cents) AS cents FROM (
        SELECT g.user_id, g.cents FROM ledger_grants g JOIN ledger_campaigns c ON c.num = g.campaign
        WHERE c.refunded IS NULL
        UNION ALL
        SELECT d.user_id, d.cents FROM ledger_discounts d JOIN ledger_campaigns c ON c.num = d.campaign
        WHERE c.refunded IS NULL) x
    GROUP BY x.user_id) e
WHERE a.id = e.id;
UPDATE ledger_campaigns SET rolled_up = false WHERE refunded IS NULL;

CREATE INDEX ledger_campaigns_live ON ledger_campaigns (num) WHERE NOT rolled_up;
