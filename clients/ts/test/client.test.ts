// The client against a real hongbao server. The Go test of this package
// (ts_test.go) starts the server, creates the campaigns, mints the
// tokens and hands them over in HONGBAO_TS_FIXTURE; this file writes what
// it was answered to fixture.out, and the Go test checks that against
// what the engine holds.
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { isMessage } from "@bufbuild/protobuf";
import { timestampDate } from "@bufbuild/protobuf/wkt";
import {
  CancelResponseSchema,
  Code,
  ConfirmResponseSchema,
  GrabOutcome,
  GrabResponseSchema,
  type GrabResult,
  GrabResultSchema,
  HongbaoClient,
  HongbaoError,
  OrderState,
  type Protocol,
  ReserveOutcome,
  ReserveResponseSchema,
  UNAVAILABLE_CODES,
} from "../src/index";

interface Campaigns {
  grab: string;
  grabTotalCents: number;
  batch: string;
  batchTotalCents: number;
  stream: string;
  streamCount: number;
  streamTotalCents: number;
  discount: string;
}

interface Fixture {
  url: string;
  gatewayKey: string;
  paymentKey: string;
  tokens: Record<string, string>;
  loseHeader: string;
  retryAfterMs: number;
  protocols: Record<Protocol, Campaigns>;
  out: string;
}

const raw = process.env.HONGBAO_TS_FIXTURE;
if (!raw) {
  throw new Error("HONGBAO_TS_FIXTURE is not set: run these tests through go test ./clients/ts/ (it starts the server)");
}
const fx = JSON.parse(raw) as Fixture;

/** What the Go test compares with the engine. */
interface Grant {
  protocol: Protocol;
  campaignId: string;
  userId: string;
  packetId: string;
  amountCents: string;
  amount: string;
}
const grants: Grant[] = [];
const discounts: { protocol: Protocol; campaignId: string; userId: string; orderId: string; state: string; amountCents: string; amount: string }[] = [];

after(() => {
  writeFileSync(fx.out, JSON.stringify({ unavailableCodes: UNAVAILABLE_CODES, grants, discounts }, null, 1));
});

/** cents as the server spells amounts: "7.10". */
function decimal(cents: bigint): string {
  const frac = (cents % 100n).toString().padStart(2, "0");
  return `${cents / 100n}.${frac}`;
}

/** checkPacket checks the packet fields of a result that carries one. */
function checkPacket(campaignId: string, r: { packetId: string; amountCents: bigint; amount: string }): void {
  assert.equal(typeof r.amountCents, "bigint", "int64 amount_cents is a bigint");
  assert.ok(r.amountCents >= 1n, `amount ${r.amountCents}`);
  assert.equal(r.amount, decimal(r.amountCents));
  assert.match(r.packetId, new RegExp(`^${campaignId}/\\d+$`));
}

function record(protocol: Protocol, campaignId: string, userId: string, r: { packetId: string; amountCents: bigint; amount: string }): void {
  grants.push({ protocol, campaignId, userId, packetId: r.packetId, amountCents: r.amountCents.toString(), amount: r.amount });
}

/** rejects runs call and returns the HongbaoError it threw. */
async function rejects(call: () => Promise<unknown>): Promise<HongbaoError> {
  try {
    await call();
  } catch (err) {
    assert.ok(err instanceof HongbaoError, `not a HongbaoError: ${err}`);
    return err;
  }
  assert.fail("the call succeeded");
}

for (const protocol of ["connect", "grpc"] as const) {
  const c = fx.protocols[protocol];
  const clients: HongbaoClient[] = [];
  const client = (credential: string, extra: Partial<ConstructorParameters<typeof HongbaoClient>[0]> = {}) => {
    const cl = new HongbaoClient({ baseUrl: fx.url, credential, protocol, ...extra });
    clients.push(cl);
    return cl;
  };
  after(() => clients.forEach((cl) => cl.close()));

  describe(`${protocol}: a user's grab`, () => {
    it("grants, answers a retry already_granted with the same packet, retries a lost answer, then sold_out", async () => {
      const ann = client(fx.tokens.ann);
      const first = await ann.grab(c.grab);
      assert.ok(isMessage(first, GrabResponseSchema));
      assert.equal(first.outcome, GrabOutcome.GRANTED);
      assert.equal(first.campaignId, c.grab);
      checkPacket(c.grab, first);
      const again = await ann.grab(c.grab);
      assert.equal(again.outcome, GrabOutcome.ALREADY_GRANTED);
      assert.equal(again.packetId, first.packetId);
      assert.equal(again.amountCents, first.amountCents);
      assert.equal(again.amount, first.amount);
      record(protocol, c.grab, "ann", first);

      let sum = first.amountCents;
      for (const user of ["bob", "cy"]) {
        const r = await client(fx.tokens[user]).grab(c.grab);
        assert.equal(r.outcome, GrabOutcome.GRANTED, user);
        checkPacket(c.grab, r);
        record(protocol, c.grab, user, r);
        sum += r.amountCents;
      }

      // The server granted eve's grab and its answer was lost (the
      // server's test front answers outcome_unknown with a wait): the
      // client waits as asked, retries, and is answered the packet
      // already granted.
      const lose = { [fx.loseHeader]: `${protocol}-eve` };
      const start = Date.now();
      const eve = await client(fx.tokens.eve).grab(c.grab, { headers: lose });
      assert.ok(Date.now() - start >= fx.retryAfterMs, `retried after ${Date.now() - start} ms, asked ${fx.retryAfterMs}`);
      assert.equal(eve.outcome, GrabOutcome.ALREADY_GRANTED);
      checkPacket(c.grab, eve);
      record(protocol, c.grab, "eve", eve);
      sum += eve.amountCents;

      // Without retries the lost answer is the typed error.
      const fay = client(fx.tokens.fay, { retry: { attempts: 1 } });
      const e = await rejects(() => fay.grab(c.grab, { headers: { [fx.loseHeader]: `${protocol}-fay` } }));
      assert.equal(e.code, "outcome_unknown");
      assert.equal(e.rpcCode, Code.Unavailable);
      assert.equal(e.retryAfterMs, fx.retryAfterMs);
      assert.ok(e.retryable);
      const fayAgain = await fay.grab(c.grab);
      assert.equal(fayAgain.outcome, GrabOutcome.ALREADY_GRANTED, "the lost grant is fay's");
      checkPacket(c.grab, fayAgain);
      record(protocol, c.grab, "fay", fayAgain);
      sum += fayAgain.amountCents;
      assert.equal(sum, BigInt(c.grabTotalCents), "five packets, the whole total");

      const late = await client(fx.tokens.dee).grab(c.grab);
      assert.equal(late.outcome, GrabOutcome.SOLD_OUT);
      assert.equal(late.packetId, "");
      assert.equal(late.amountCents, 0n);
      assert.equal(late.amount, "");
    });

    it("refuses a bad credential or campaign with the typed error", async () => {
      const wrong = client("not-a-token-0123456789abcdefghijklmnop");
      const start = Date.now();
      let e = await rejects(() => wrong.grab(c.grab));
      assert.equal(e.code, "unauthorized");
      assert.equal(e.rpcCode, Code.Unauthenticated);
      assert.equal(e.retryable, false);
      assert.ok(Date.now() - start < 2000, "not retried");

      // A gateway key is not a user's token.
      e = await rejects(() => client(fx.gatewayKey).grab(c.grab));
      assert.equal(e.code, "unauthorized");

      e = await rejects(() => client(fx.tokens.ann).grab("no-such-campaign"));
      assert.equal(e.code, "not_found");
      assert.equal(e.rpcCode, Code.NotFound);
      e = await rejects(() => client(fx.tokens.ann).grab("bad id"));
      assert.equal(e.code, "invalid_id");
      assert.equal(e.rpcCode, Code.InvalidArgument);
    });
  });

  describe(`${protocol}: a gateway's batch`, () => {
    it("answers in order, a repeat with the same packet, the same again on a retry", async () => {
      const gw = client(fx.gatewayKey);
      const users = ["g-1", "g-2", "g-3", "g-4", "g-2", "g-5"];
      const res = await gw.grabBatch(c.batch, users);
      assert.equal(res.length, users.length);
      res.forEach((r, i) => {
        assert.ok(isMessage(r, GrabResultSchema));
        assert.equal(r.userId, users[i], `result ${i}`);
        assert.equal(r.ref, 0n);
        assert.equal(r.error, "");
      });
      // Three of the five users get the three packets (which three is the
      // engine's choice), the others sold_out; g-2 named again is
      // answered its packet already_granted, or sold_out again.
      const firsts = res.filter((_, i) => i !== 4);
      const granted = firsts.filter((r) => r.outcome === GrabOutcome.GRANTED);
      assert.equal(granted.length, 3, "three packets");
      assert.equal(firsts.filter((r) => r.outcome === GrabOutcome.SOLD_OUT).length, 2);
      assert.equal(new Set(granted.map((r) => r.userId)).size, 3, "one packet per user");
      if (res[1].outcome === GrabOutcome.GRANTED) {
        assert.equal(res[4].outcome, GrabOutcome.ALREADY_GRANTED);
        assert.equal(res[4].packetId, res[1].packetId);
        assert.equal(res[4].amountCents, res[1].amountCents);
      } else {
        assert.equal(res[4].outcome, GrabOutcome.SOLD_OUT);
        assert.equal(res[4].packetId, "");
      }
      for (const r of granted) {
        checkPacket(c.batch, r);
        record(protocol, c.batch, r.userId, r);
      }
      assert.equal(granted.reduce((s, r) => s + r.amountCents, 0n), BigInt(c.batchTotalCents));
      assert.equal(new Set(granted.map((r) => r.packetId)).size, 3, "one user per packet");

      const retry = await gw.grabBatch(c.batch, users);
      retry.forEach((r, i) => {
        if (res[i].packetId) {
          assert.equal(r.outcome, GrabOutcome.ALREADY_GRANTED, users[i]);
          assert.equal(r.packetId, res[i].packetId);
          assert.equal(r.amountCents, res[i].amountCents);
        } else {
          assert.equal(r.outcome, GrabOutcome.SOLD_OUT, users[i]);
        }
      });
    });

    it("refuses a user's token (forbidden) and a wrong key (unauthorized)", async () => {
      let e = await rejects(() => client(fx.tokens.ann).grabBatch(c.batch, ["x"]));
      assert.equal(e.code, "forbidden");
      assert.equal(e.rpcCode, Code.PermissionDenied);
      e = await rejects(() => client("wrong-gateway-key-0123456789abcdefghijkl").grabBatch(c.batch, ["x"]));
      assert.equal(e.code, "unauthorized");
      e = await rejects(() => client(fx.gatewayKey).grabBatch(c.batch, ["bad user id"]));
      assert.equal(e.code, "invalid_request");
    });
  });

  describe(`${protocol}: a gateway's stream`, () => {
    it("answers every grab once, by its ref, and the amounts sum to the total", async () => {
      const gw = client(fx.gatewayKey);
      const stream = gw.stream(c.stream);
      assert.equal(gw.stream(c.stream), stream, "one stream per campaign");
      const users = Array.from({ length: c.streamCount + 40 }, (_, i) => `s-${i}`);
      const results = await Promise.all(users.map((u) => stream.grab(u)));
      results.forEach((r, i) => {
        assert.ok(isMessage(r, GrabResultSchema));
        assert.equal(r.userId, users[i]);
        assert.equal(r.error, "");
      });
      const granted = results.filter((r) => r.outcome === GrabOutcome.GRANTED);
      assert.equal(granted.length, c.streamCount);
      assert.equal(results.filter((r) => r.outcome === GrabOutcome.SOLD_OUT).length, 40);
      assert.equal(new Set(granted.map((r) => r.packetId)).size, c.streamCount, "one user per packet");
      for (const r of granted) {
        checkPacket(c.stream, r);
        record(protocol, c.stream, r.userId, r);
      }
      assert.equal(granted.reduce((s, r) => s + r.amountCents, 0n), BigInt(c.streamTotalCents));

      // Users named again, on the same stream and at once: each answered
      // its own packet again, or sold_out again.
      const again = await Promise.all(users.slice(0, 60).map((u) => stream.grab(u)));
      again.forEach((r: GrabResult, i) => {
        const first = results[i];
        if (first.packetId) {
          assert.equal(r.outcome, GrabOutcome.ALREADY_GRANTED, users[i]);
          assert.equal(r.packetId, first.packetId);
          assert.equal(r.amountCents, first.amountCents);
        } else {
          assert.equal(r.outcome, GrabOutcome.SOLD_OUT, users[i]);
        }
      });
      assert.equal(stream.pending, 0);
      assert.equal(stream.strays, 0, "no ref answered twice, none unknown");
      assert.equal(stream.answered, users.length + 60, "every ref answered");
      await stream.close();
      await assert.rejects(stream.grab("s-0"), (e: unknown) => e instanceof HongbaoError && e.code === "canceled");
      assert.notEqual(gw.stream(c.stream), stream, "a closed stream is opened again");
    });

    it("rejects the grabs of a stream with a wrong key with the typed error", async () => {
      const stream = client("wrong-gateway-key-0123456789abcdefghijkl").openStream(c.stream);
      const e = await rejects(() => stream.grab("s-0"));
      assert.equal(e.code, "unauthorized");
      assert.equal(e.rpcCode, Code.Unauthenticated);
      const next = await rejects(() => stream.grab("s-1"));
      assert.equal(next, e, "a failed stream takes no more grabs");
      await stream.close();
    });
  });

  describe(`${protocol}: the payment system's discounts`, () => {
    it("reserves, confirms and cancels, each idempotent", async () => {
      const pay = client(fx.paymentKey);
      const user = `buyer-${protocol}`;
      const r = await pay.reserve({ campaignId: c.discount, userId: user, orderId: "o-1", orderAmountCents: 5000 });
      assert.ok(isMessage(r, ReserveResponseSchema));
      assert.equal(r.outcome, ReserveOutcome.RESERVED);
      assert.equal(r.orderId, "o-1");
      assert.ok(r.amountCents >= 1n && r.amountCents <= 5000n, `${r.amountCents}`);
      assert.equal(r.amount, decimal(r.amountCents));
      assert.ok(r.expiresAt && timestampDate(r.expiresAt).getTime() > Date.now(), "the hold ends later");
      const again = await pay.reserve({ campaignId: c.discount, userId: user, orderId: "o-1", orderAmount: "50.00" });
      assert.equal(again.outcome, ReserveOutcome.ALREADY);
      assert.equal(again.amountCents, r.amountCents);

      const conf = await pay.confirm(c.discount, user, "o-1");
      assert.ok(isMessage(conf, ConfirmResponseSchema));
      assert.equal(conf.state, OrderState.CONFIRMED);
      assert.equal(conf.amountCents, r.amountCents);
      assert.equal(conf.amount, r.amount);
      assert.equal((await pay.confirm(c.discount, user, "o-1")).state, OrderState.CONFIRMED);
      discounts.push({ protocol, campaignId: c.discount, userId: user, orderId: "o-1", state: "confirmed", amountCents: conf.amountCents.toString(), amount: conf.amount });

      const r2 = await pay.reserve({ campaignId: c.discount, userId: user, orderId: "o-2", orderAmount: "12.34" });
      assert.equal(r2.outcome, ReserveOutcome.RESERVED);
      assert.ok(r2.amountCents <= 1234n);
      const canc = await pay.cancel(c.discount, user, "o-2");
      assert.ok(isMessage(canc, CancelResponseSchema));
      assert.equal(canc.state, OrderState.CANCELLED);
      assert.equal((await pay.cancel(c.discount, user, "o-2")).state, OrderState.CANCELLED);
      discounts.push({ protocol, campaignId: c.discount, userId: user, orderId: "o-2", state: "cancelled", amountCents: "0", amount: "" });

      let e = await rejects(() => pay.confirm(c.discount, user, "o-2"));
      assert.equal(e.code, "cancelled");
      assert.equal(e.rpcCode, Code.FailedPrecondition);
      e = await rejects(() => pay.cancel(c.discount, user, "o-1"));
      assert.equal(e.code, "confirmed");
      e = await rejects(() => pay.confirm(c.discount, user, "o-none"));
      assert.equal(e.code, "no_reservation");
      assert.equal(e.rpcCode, Code.NotFound);
    });

    it("refuses a user's token and a gateway key", async () => {
      let e = await rejects(() => client(fx.tokens.ann).reserve({ campaignId: c.discount, userId: "ann", orderId: "o-9", orderAmountCents: 100n }));
      assert.equal(e.code, "forbidden");
      assert.equal(e.rpcCode, Code.PermissionDenied);
      e = await rejects(() => client(fx.gatewayKey).confirm(c.discount, "ann", "o-9"));
      assert.equal(e.code, "unauthorized");
    });
  });
}

describe("the client's own checks", () => {
  it("refuses a reservation without exactly one amount, and bad options", () => {
    const cl = new HongbaoClient({ baseUrl: fx.url, credential: fx.paymentKey });
    assert.throws(() => cl.reserve({ campaignId: "x", userId: "u", orderId: "o" }), TypeError);
    assert.throws(() => cl.reserve({ campaignId: "x", userId: "u", orderId: "o", orderAmount: "1.00", orderAmountCents: 100 }), TypeError);
    assert.throws(() => new HongbaoClient({ baseUrl: fx.url, credential: "" }), TypeError);
    assert.throws(() => new HongbaoClient({ baseUrl: fx.url, credential: "k", retry: { attempts: 0 } }), RangeError);
    cl.close();
  });

  it("retries a refused connection, then reports it unavailable", async () => {
    // A port nothing listens on: the server's, once closed, is not
    // known here, so take one of the reserved range.
    // The backoffs of two retries: at least 50 + 100 ms (half of each
    // doubled base); a refused connection fails at once.
    const cl = new HongbaoClient({ baseUrl: "http://127.0.0.1:9", credential: fx.tokens.ann, retry: { attempts: 3, baseDelayMs: 100 } });
    const start = Date.now();
    const e = await rejects(() => cl.grab("any"));
    assert.ok(Date.now() - start >= 150, `gave up after ${Date.now() - start} ms`);
    assert.equal(e.code, "unavailable");
    assert.equal(e.rpcCode, Code.Unavailable);
    assert.ok(e.retryable);
    cl.close();

    // One try: no wait.
    const once = new HongbaoClient({ baseUrl: "http://127.0.0.1:9", credential: fx.tokens.ann, retry: { attempts: 1, baseDelayMs: 1000 } });
    const t0 = Date.now();
    await rejects(() => once.grab("any"));
    assert.ok(Date.now() - t0 < 500, "not retried");
    once.close();
  });
});
