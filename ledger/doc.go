// Package ledger is the durable record of where every cent of a red packet
// campaign went. Redis decides grabs; settlement workers then write the
// grants here, in batches, and acknowledge them to Redis only after the
// commit. The ledger is the book that must balance when Redis is gone.
//
// # Double entry
//
// Money only moves between accounts, and every movement is one entry with
// a source and a destination, so the balances of all accounts always sum
// to zero and any balance can be recomputed from the entries alone:
//
//	fund    funding:<name> -> escrow:<campaign>   the campaign's total, once
//	grant   escrow:<campaign> -> user:<id>        one per packet
//	refund  escrow:<campaign> -> funding:<name>   what was not granted, once
//
// A funding account therefore goes negative by what its campaigns paid out;
// a settled campaign's escrow is exactly 0 (funded = granted + refunded).
// Account ids carry their kind as a prefix (UserAccount, EscrowAccount,
// FundingAccount), so a user can never share a balance with a campaign.
//
// # Idempotency that cannot hide a fault
//
// Workers retry, streams redeliver, dead consumers' entries are reclaimed:
// the same grant arrives more than once, and that must be a no-op. But a
// grant that only looks like a replay (the same packet to another user,
// the same user with another packet or amount) is a fault in the grab
// path, and treating it as a replay would hide it. So ApplyGrants sorts
// every grant into exactly one of three outcomes: inserted, replayed (the
// identical row is stored) or a Conflict, reported with the stored row it
// disagrees with. Only the inserted rows move money, in the same
// transaction. Fund and Refund are keyed by the campaign and return
// ErrConflict (a *ConflictError) when replayed with other values.
//
// # Refusing the impossible
//
// Some writes cannot be right whatever their values: a new grant or
// discount for a campaign whose refund is recorded, a batch that takes the
// escrow below zero, a refund that does not leave the escrow at exactly
// zero (too large, or too small: grants outstanding). The ledger refuses
// them with ErrRefused (a *RefusedError with the reason) and writes
// nothing, so a fault upstream becomes an incident instead of a silent
// negative balance. The check runs in the transaction: a batch reads
// whether the refund is recorded from the campaign's row, under a lock
// the refund waits for, and takes its cents out of the escrow with one
// conditional update, its last statement, which waits for any other
// batch's update of the escrow and then applies to what that one
// committed; the database guards the escrow balances too
// (ledger_escrow_not_negative, migration 0005).
//
// # Fencing a rebuild
//
// Each campaign has a fence, 0 until a rebuild raises it (Fence) before it
// reads the ledger. Settlement passes the fence it read from Redis with
// its writes (WithFence); a write prepared under an older fence, from a
// Redis the rebuild has replaced since, is ErrFenced and writes nothing.
//
// # An owner per campaign
//
// Deployments may share one Redis, each settling into its own ledger (or
// sink). Each ledger has an identity (Identity): "ledger-" and 32 hex
// digits drawn from crypto/rand once, by migration 0009, and stored in the
// database, so it is the same for every process and every reopening, and
// differs from every other ledger's. A campaign records at create the
// identity of the ledger it settles into, its owner, and the writes of its
// settlement carry it (WithOwner). Fund, ApplyGrants, ApplyDiscounts and
// Refund refuse a write whose owner is not the ledger's identity with a
// *ForeignError (ErrForeign) before their transaction begins, so they
// write nothing; a write carrying no owner (a campaign created before
// owners were recorded, a tool) is not checked. The identity never
// changes, so checking it outside the transaction leaves no window, and
// it is read from the database once and then kept.
//
// # Lease fences
//
// Settlement runs under leases of package leader, whose fencing tokens
// grow with every election; they are drawn in Redis, which can lose the
// counter they come from (a failover to a replica that missed it, a
// restart without persistence). The ledger keeps the durable guard: per
// lease, the largest token a holder proved itself with (RaiseLease, a
// compare-and-set that only raises). Package scheduler raises it once per
// election before its settlement starts; a token not above the recorded
// one is ErrStaleLease, and that holder settles nothing under it.
//
// # Schema
//
// Both backends use the same tables, created by embedded, numbered
// migrations (migrations/NNNN_name.sql in each backend, recorded in
// ledger_migrations) applied by Open:
//
//	ledger_campaigns  one row per funded campaign: id, a short integer key
//	                  (num), funding, total, refunded (NULL until refunded),
//	                  fence, rolled_up. Batches hold its row FOR SHARE,
//	                  Refund, RollUp and Fence lock it exclusively.
//	ledger_campaign_counts
//	                  the campaign's grant count and cents, in a few rows
//	                  (key campaign num, slot) that concurrent writers
//	                  rarely share; Totals and Refund sum them
//	ledger_entries    the fund and refund entries, key (campaign, kind)
//	ledger_grants     the grant entries, key (campaign num, seq), unique
//	                  (campaign num, user_id), with when Redis granted
//	                  each (granted_ms, NULL when unknown); narrow on
//	                  purpose, as it holds nearly all rows
//	ledger_accounts   balances by account id, for fast reads; a user's
//	                  holds the campaigns rolled up (see Balances)
//	ledger_journal    a view of every entry as (kind, campaign, seq,
//	                  from_account, to_account, cents): the double-entry
//	                  journal, from which CheckBalances recomputes
//	                  ledger_accounts
//	ledger_packet_sets
//	                  one row per campaign whose packets are recorded: id,
//	                  a short integer key (num), count, cents and the
//	                  SHA-256 digest of the amounts in seq order, and
//	                  the campaign's terms (JSON, see Terms)
//	ledger_packets    every packet, key (packet set num, seq), and its
//	                  cents; narrow, as a campaign may have ten million
//	ledger_discounts  the confirmed discounts of discount campaigns, key
//	                  (campaign num, user_id, order_id), unique (campaign
//	                  num, seq): each the entry escrow -> user of one order
//	ledger_identity   one row: the ledger's identity and when it was drawn
//	ledger_leases     one row per lease: the largest fencing token recorded
//	                  (RaiseLease) and when
//	ledger_commitments
//	                  one row per committed campaign: the fairness root,
//	                  count, cents, published body and the key of its
//	                  holders' pseudonyms (NULL once purged, purged_at)
//	ledger_salts      the packets' salts, 4096 packets a row; deleted by
//	                  PurgeDrawData after the retention
//
// # Discount campaigns
//
// A discount campaign lives in the same tables under the id
// DiscountCampaign(id), "discount:<id>": its budget is funded into
// "escrow:discount:<id>", every confirmed discount moves escrow -> user
// (ApplyDiscounts, idempotent by campaign, user and order, and counted in
// the campaign's GrantCount and GrantCents), and the leftover is
// refunded once at the end, so escrow ends at exactly 0 as for red
// packets. A discount's unit of quota (seq) is confirmed once: another
// order on it is a conflict (UnitTaken), as is an order stored with
// another unit or amount (OrderDiffers).
//
// Money is BIGINT (PostgreSQL) or INTEGER in STRICT tables (SQLite):
// integer cents, never floats.
//
// Two processes starting at once must not both migrate: PostgreSQL
// migrations run under a session advisory lock (keyed by the search_path,
// so ledgers in separate schemas do not wait for each other); SQLite
// migrations run in one BEGIN IMMEDIATE transaction. A migration may have
// a step in Go, run in its transaction after its SQL (0009's draws the
// identity), so a database at its version has run it.
//
// Open creates and migrates: it is for the processes that write (serve,
// settle), the first of which makes the ledger. A tool that reads a
// ledger others write opens it with the backends' Existing option
// (package open's OpenExisting), which creates and migrates nothing: a
// missing SQLite file or PostgreSQL schema, a schema without the ledger's
// tables, or a ledger behind the build's migrations is ErrNotMigrated,
// so a mistyped DSN fails instead of reading a new, empty ledger. A
// ledger ahead of the build's migrations is ErrSchemaAhead for every
// open.
//
// # Writing a batch
//
// A batch reads its campaign's row (short key, refund recorded, fence),
// inserts the whole batch with one multi-row INSERT ... ON CONFLICT DO
// NOTHING RETURNING, looks up the stored rows for the keys that were not
// inserted to tell replays from conflicts, adds what it inserted to one of
// the campaign's counter rows and, last, takes the cents out of the
// escrow. It moves no user balance (see Balances), so its cost has no
// upsert per grant, and campaigns paying the same users never wait for
// each other.
//
// On PostgreSQL the campaign's row is read FOR SHARE, so batches of one
// campaign, such as the shards two settle processes own, run side by
// side: an insert that meets a key another batch inserted and has not
// committed waits for that commit, then skips the key, and the lookup (a
// statement of its own) finds the committed row, so every skipped grant
// is classified; a grant that finds none is an error that rolls the
// batch back, never a silent skip. The counter row is chosen by the
// connection (16 slots), and the escrow's row is locked only from the
// batch's last statement to its commit. Refund (FOR UPDATE) and Fence
// (UPDATE) wait for every batch in flight, and every later batch waits
// for them and sees what they wrote: a batch also holds the campaign's
// turn, an advisory lock, shared, which Refund and Fence take
// exclusively first, because its queue is fair where the row's is not
// (a share request goes ahead of an update waiting, so batches that keep
// overlapping would hold a refund or a fence off for as long as they
// come). Why no deadlock can form is said at the postgres package's
// shareCampaignRow. SQLite has one writer at a
// time: the write lock, taken at BEGIN IMMEDIATE, and in the process a
// gate that lets OpenBlock (a grab waits for it) go before the
// settlement batches queued.
//
// PostgreSQL first tries COPY under a savepoint, about twice as fast for
// the common batch of new grants; a stored key makes the COPY fail, the
// savepoint undoes it, and the INSERT ... ON CONFLICT path takes over.
//
// # Balances
//
// Every grant and discount is a row of the journal (ledger_grants,
// ledger_discounts); user balances are rolled up per campaign, not per
// batch, and not by the refund either. Once a campaign is refunded (no
// entry can come any more), RollUp, in a transaction of its own, adds
// each user's entries of the campaign to the user's row of
// ledger_accounts (one INSERT ... SELECT ... GROUP BY user ... ON
// CONFLICT DO UPDATE) and sets the campaign's rolled_up. Balance of a
// user answers, in one statement and so from one snapshot, the stored
// balance plus the user's entries of the campaigns not rolled up yet,
// probing each such campaign's (campaign, user_id) key; the campaigns not
// rolled up (live, or refunded and waiting for their roll-up) are few and
// have a partial index. So a balance includes a grant from its batch's
// commit on, the roll-up moves it from the journal to the stored row in
// one commit, and a replay after the roll-up inserts nothing and moves
// nothing. The cost, one row per user of the campaign, once, is off the
// refund's path: the settlement worker rolls campaigns up in the
// background, and PendingRollUps finds the ones a crash between the
// refund and its roll-up left behind. Until then their entries are read
// from the journal, as a live campaign's are; nothing is lost or late.
// Escrow and funding accounts move with every entry, as before.
//
// CheckBalances audits this: in one read snapshot it derives every
// account's balance from the journal, leaves out the user credits of the
// campaigns not rolled up, and reports each stored balance that differs,
// with the double-entry sums (the journal's balances sum to 0, the stored
// ones plus the credits not rolled up too). hongbao reconcile --balances
// runs it.
//
// # Packets
//
// A grant says which packet a user got; the packets say which existed.
// WritePackets records all of a campaign's packets at create, before the
// campaign goes live, so a campaign that Redis lost (an old snapshot, a
// FLUSHALL) can be rebuilt: its pool is UngrantedPackets minus the grants
// still waiting in Redis's stream, and what cannot be known from the two
// is reported, never guessed. A campaign whose packets were never recorded
// answers ErrNoPackets rather than an empty pool.
//
// The set is written whole in one transaction, with a row that sums it up
// (count, cents, digest). A retried create compares with that row only,
// so a replay of ten million packets costs hashing them, not reading them
// back; other packets are a *ConflictError and change nothing.
//
// Packets and the fund entry must agree to the cent: the packets sum to
// the total. Both writes check it against the other's row, whichever
// comes first, so a campaign whose split does not add up to its fund is
// refused before it opens, when nothing has moved yet, instead of being
// found by a reconcile after users were paid. Fund and WritePackets of one
// campaign serialise on a transaction advisory lock in PostgreSQL (each
// inserts one row and checks the other, which READ COMMITTED alone would
// let both pass) and on the write lock in SQLite. Totals reports
// PacketCount and PacketCents beside Funded, and MismatchedGrants lists
// grants whose seq is no packet or whose amount is not the packet's, so a
// reconcile can check both invariants on any ledger, including one edited
// by hand.
//
// # Terms
//
// A rebuild needs more than the packets: the campaign's window, its
// layout over shards and its funding account. WriteTerms stores them next
// to the packet set (one JSON column), written at create before the
// campaign goes live and replaced by a retried create, by an operator's
// close (which the window alone does not explain) and by a rebuild, which
// adds the packets it found gone with no holder it could name (Lost).
//
// # Backends
//
// Package postgres (pgx, pgxpool) is for production; package sqlite
// (modernc.org/sqlite, no cgo) is the embedded default: a file in WAL mode
// with synchronous=FULL (a grant is acknowledged to Redis after the commit,
// so the commit must be durable), a busy timeout, and write transactions
// that take the write lock at BEGIN. Package open picks one from a DSN
// ("sqlite:PATH", "PATH.db", "postgres://...?search_path=SCHEMA"); it is a
// separate package because the backends import this one. Package
// ledgertest is the conformance suite both pass.
//
// # Tests and benchmarks
//
// The PostgreSQL tests use the server at HONGBAO_TEST_POSTGRES (default
// postgres://postgres@127.0.0.1:5432/test?sslmode=disable), one schema per
// test; without a server they start a private cluster from
// /usr/lib/postgresql/*/bin, and without that they skip (fail under
// CI=true). The benchmarks settle 100,000 grants in batches of 500 and
// report grants/s (ApplyGrantsWriters: by one writer, and by two writing
// disjoint halves of the campaign at once, with the refund and its
// roll-up timed apart), and record the packets of a campaign of 1,000,000 and
// report packets/s:
//
//	go test -run XXX -bench ApplyGrants -benchtime 3x ./ledger/...
//	go test -run XXX -bench WritePackets -benchtime 1x ./ledger/...
package ledger
