-- outcomes.lua: the outcome codes the grab and discount scripts answer, one code
-- space for both kinds: a code means the same in every script that answers it.
-- Defines  OK, ALREADY, RAN_OUT, NOT_OPEN, CLOSED, NO_CAMPAIGN, DRY, LIMIT, CANCELLED,
--          EXPIRED, NOT_FOUND, CONFIRMED, MISMATCH, PAUSED, BLOCKED, SEALED, LOW
-- Errors   none
-- Writes   none
-- The root package's outcome table (outcome.go) names the Lua code of every outcome
-- a caller is answered, and a test holds this file to it; the codes the engine
-- resolves itself (NO_CAMPAIGN, DRY, SEALED, LOW and the discount refusals that
-- become errors) are redisstore's constants, held to this file by the same test.
-- Codes only ever live in one reply: none is stored in Redis, so a process runs
-- the scripts of its own build (loaded by content, by SHA) and decodes their
-- replies with its own constants, whatever another version running beside it uses.

-- OK: done by this call (reserved, confirmed or cancelled now; grab.lua answers
-- a grant with the packet itself, not with this code).
local OK = 1
-- ALREADY: the same answer as before (grab.lua answers it as a one-element array).
local ALREADY = 2
-- RAN_OUT: nothing left, or closed because it ran out: a grab's SOLD_OUT, a
-- reservation's EXHAUSTED.
local RAN_OUT = 3
local NOT_OPEN = 4
local CLOSED = 5
-- NO_CAMPAIGN: no such campaign or shard, or still loading.
local NO_CAMPAIGN = 6
-- DRY: a shard of a sharded campaign is empty while others may not be.
local DRY = 7
-- LIMIT: the user's per-user count or amount is used up (discounts).
local LIMIT = 8
-- CANCELLED, EXPIRED: how the order's reservation ended.
local CANCELLED = 9
local EXPIRED = 10
-- NOT_FOUND: no reservation of the order on this shard.
local NOT_FOUND = 11
-- CONFIRMED: the order's discount is confirmed.
local CONFIRMED = 12
-- MISMATCH: the order holds a reservation made for another order amount.
local MISMATCH = 13
-- PAUSED: an operator paused the campaign while its window is open.
local PAUSED = 14
-- BLOCKED: an operator blocked the user on the campaign.
local BLOCKED = 15
-- SEALED: the opened part of a pool is empty and a sealed part remains.
local SEALED = 16
-- LOW: grab.lua's hint, after the answers, to open the next block ahead of need.
local LOW = 0
