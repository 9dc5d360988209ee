-- disc_record.lua: the reservation record of a discount campaign's order, the value of
-- the reservations hash: "<st>|<seq>|<amount>|<cents>|<expires_ms>|<order_cents>", st
-- r (reserved), c (confirmed), x (cancelled) or e (expired); amount is what left the
-- pool, cents the discount.
-- Defines  RECORD, RECORD_FORMAT
-- Errors   none
-- Writes   none
-- A format rather than a function: disc_reserve.lua writes a record per reservation,
-- and a call there would cost more than the formatting.

-- RECORD matches a record and captures its six parts, as strings.
local RECORD = '^(%a)|(%d+)|(%d+)|(%d+)|(%d+)|(%d+)$'

-- RECORD_FORMAT writes a record with string.format from st, seq, amount, cents, expiry
-- and order cents; amount and cents are numbers (printed with %d, exact below 2^53),
-- the other parts strings.
local RECORD_FORMAT = '%s|%s|%d|%d|%s|%s'
