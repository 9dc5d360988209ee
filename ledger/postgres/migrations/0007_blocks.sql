-- 0005: the blocks of a campaign's pools the engine opened (the durable
-- pop frontier).
--
-- The engine records a block here before any of its packets can be
-- popped, so after Redis lost a campaign a rebuild knows which packets
-- were never poppable (back to the pool) and which may have been granted
-- without a record (held out, quarantined). seqs are the block's packet
-- seqs as arithmetic runs "first+step*n", comma-separated.
CREATE TABLE ledger_blocks (
	campaign TEXT NOT NULL,
	id TEXT NOT NULL,
	shard INTEGER NOT NULL,
	seqs TEXT NOT NULL,
	n BIGINT NOT NULL,
	PRIMARY KEY (campaign, id)
);
