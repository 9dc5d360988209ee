// The stream helper's retries, against a GrabService of this file's own
// that answers each user's first grab `busy` with a wait: hongbao answers
// so only under load, which a test cannot order. client.test.ts runs the
// stream against the real server.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import * as http2 from "node:http2";
import type { AddressInfo } from "node:net";
import { create } from "@bufbuild/protobuf";
import type { ConnectRouter } from "@connectrpc/connect";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import {
  GrabOutcome,
  type GrabResult,
  GrabResultSchema,
  GrabService,
  type GrabStreamRequest,
  GrabStreamResponseSchema,
  HongbaoClient,
  HongbaoError,
} from "../src/index";

const WAIT_MS = 150n;

describe("a stream's results that ask a retry", () => {
  const tries = new Map<string, number>();
  let server: http2.Http2Server;
  let baseUrl = "";

  before(async () => {
    const routes = (router: ConnectRouter) =>
      router.service(GrabService, {
        async *grabStream(requests: AsyncIterable<GrabStreamRequest>) {
          let seq = 0;
          for await (const req of requests) {
            const results: GrabResult[] = req.grabs.map((g) => {
              const n = (tries.get(g.userId) ?? 0) + 1;
              tries.set(g.userId, n);
              const base = { userId: g.userId, ref: g.ref };
              if (g.userId.startsWith("limited")) {
                return create(GrabResultSchema, { ...base, error: "rate_limited" });
              }
              if (n === 1 || g.userId.startsWith("always-busy")) {
                return create(GrabResultSchema, { ...base, error: "busy", retryAfterMs: WAIT_MS });
              }
              seq++;
              return create(GrabResultSchema, {
                ...base,
                outcome: n === 2 ? GrabOutcome.GRANTED : GrabOutcome.ALREADY_GRANTED,
                packetId: `c1/${seq}`,
                amountCents: 100n,
                amount: "1.00",
              });
            });
            yield create(GrabStreamResponseSchema, { results });
          }
        },
        grab() {
          throw new Error("not served here");
        },
        grabBatch() {
          throw new Error("not served here");
        },
      });
    server = http2.createServer(connectNodeAdapter({ routes }));
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });

  after(() => new Promise<void>((resolve) => server.close(() => resolve())));

  it("sends a busy grab again after the wait it asked, under a new ref", async () => {
    const client = new HongbaoClient({ baseUrl, credential: "k", retry: { attempts: 3, baseDelayMs: 5 } });
    const stream = client.openStream("c1");
    const start = Date.now();
    const got = await Promise.all(["u-1", "u-2", "u-3"].map((u) => stream.grab(u)));
    assert.ok(Date.now() - start >= Number(WAIT_MS), `answered after ${Date.now() - start} ms`);
    for (const [i, r] of got.entries()) {
      assert.equal(r.userId, `u-${i + 1}`);
      assert.equal(r.outcome, GrabOutcome.GRANTED);
      assert.equal(r.error, "");
      assert.equal(tries.get(r.userId), 2, "tried twice");
    }
    assert.equal(stream.answered, 6, "each grab answered twice: busy, then granted");
    assert.equal(stream.strays, 0);
    await stream.close();
    client.close();
  });

  it("rejects a grab whose retries ran out, and one refused otherwise, with the result's code", async () => {
    const client = new HongbaoClient({ baseUrl, credential: "k", retry: { attempts: 2, baseDelayMs: 5 } });
    const stream = client.openStream("c1");
    const [busy, limited, fine] = await Promise.allSettled([stream.grab("always-busy"), stream.grab("limited"), stream.grab("u-9")]);
    assert.equal(busy.status, "rejected");
    const e = (busy as PromiseRejectedResult).reason;
    assert.ok(e instanceof HongbaoError);
    assert.equal(e.code, "busy");
    assert.equal(e.userId, "always-busy");
    assert.equal(e.retryAfterMs, Number(WAIT_MS));
    assert.equal(e.rpcCode, undefined);
    assert.equal(tries.get("always-busy"), 2, "attempts: 2");
    assert.equal(limited.status, "rejected");
    const l = (limited as PromiseRejectedResult).reason;
    assert.ok(l instanceof HongbaoError);
    assert.equal(l.code, "rate_limited");
    assert.equal(l.retryable, false);
    assert.equal(tries.get("limited"), 1, "not retried");
    assert.equal(fine.status, "fulfilled");
    assert.equal((fine as PromiseFulfilledResult<GrabResult>).value.outcome, GrabOutcome.GRANTED);
    await stream.close();
    client.close();
  });
});
