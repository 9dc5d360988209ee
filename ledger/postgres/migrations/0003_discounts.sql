-- 0003: the confirmed discounts of discount campaigns.
--
-- A discount campaign is funded, refunded and counted in ledger_campaigns
-- under the id discount:<id> (ledger.DiscountCampaign), like a red packet
-- campaign; each confirmed discount is the entry escrow:discount:<id> ->
-- user:<user_id> for one order. Its key is (campaign, user, order): a
-- replay of a confirmation is a no-op. Its unit of quota (seq) is
-- confirmed once, so (campaign, seq) is unique too; a second order on the
-- same unit is a conflict, an incident to report.

CREATE TABLE ledger_discounts (
    campaign   BIGINT NOT NULL, -- ledger_campaigns.num
    user_id    TEXT   NOT NULL,
    order_id   TEXT   NOT NULL,
    seq        BIGINT NOT NULL,
    cents      BIGINT NOT NULL CHECK (cents > 0),
    created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (campaign, user_id, order_id),
    UNIQUE (campaign, seq)
);

CREATE OR REPLACE VIEW ledger_journal AS
    SELECT e.kind, e.campaign, NULL::bigint AS seq, e.from_account, e.to_account, e.cents, e.created_at
    FROM ledger_entries e
    UNION ALL
    SELECT 'grant', c.id, g.seq, 'escrow:' || c.id, 'user:' || g.user_id, g.cents, g.created_at
    FROM ledger_grants g JOIN ledger_campaigns c ON c.num = g.campaign
    UNION ALL
    SELECT 'discount', c.id, d.seq, 'escrow:' || c.id, 'user:' || d.user_id, d.cents, d.created_at
    FROM ledger_discounts d JOIN ledger_campaigns c ON c.num = d.campaign;
