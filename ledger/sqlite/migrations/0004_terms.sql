-- 0004: a campaign's terms next to its packets.
--
-- The window, layout and spec of a campaign live in Redis; a copy here
-- (JSON, written at create and replaced by a retried create or a rebuild)
-- lets a campaign Redis lost entirely be rebuilt with its own window
-- rather than a guessed one. NULL for campaigns created before.
ALTER TABLE ledger_packet_sets ADD COLUMN terms TEXT;
