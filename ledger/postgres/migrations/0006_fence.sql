-- 0006: the fence a rebuild raises (ledger.Ledger.Fence).
--
-- A settlement batch carries the fence it was read under (the campaign's
-- "ledger_fence" in Redis); a grant, discount or refund prepared under an
-- older one than this column is refused, so a batch read from a stream
-- before Redis lost the campaign cannot commit after the rebuild read the
-- ledger. 0 until a rebuild fences the campaign.
ALTER TABLE ledger_campaigns ADD COLUMN fence BIGINT NOT NULL DEFAULT 0;
