import { create } from "@bufbuild/protobuf";
import { type Client, type Interceptor, type Transport, createClient } from "@connectrpc/connect";
import { Http2SessionManager, createConnectTransport, createGrpcTransport } from "@connectrpc/connect-node";
import {
  type CancelResponse,
  type ConfirmResponse,
  DiscountService,
  type ReserveResponse,
  ReserveRequestSchema,
} from "./gen/hongbao/v1/discount_pb";
import { GrabService, type GrabResponse, type GrabResult } from "./gen/hongbao/v1/grab_pb";
import { GrabStream } from "./stream";
import { type RetryOptions, retryDefaults, withRetry } from "./retry";

/**
 * Protocol is how the client speaks to hongbao: "connect", the Connect
 * protocol over HTTP/1.1 (the default; any proxy passes it), or "grpc",
 * gRPC over HTTP/2 (h2c with prior knowledge on an http:// URL, TLS on an
 * https:// one). A gateway's stream needs HTTP/2 whatever the choice: with
 * "connect" it speaks the Connect protocol over HTTP/2.
 */
export type Protocol = "connect" | "grpc";

/** ClientOptions configure a HongbaoClient. */
export interface ClientOptions {
  /** The service's base URL, e.g. "http://127.0.0.1:8080". */
  baseUrl: string;
  /**
   * The bearer credential sent with every call: a user's token (grab), a
   * gateway key (grabBatch, streams) or the payment key (reserve,
   * confirm, cancel).
   */
  credential: string;
  /** Default "connect". */
  protocol?: Protocol;
  /** The deadline of each try of a unary call. Default 10000 ms. */
  timeoutMs?: number;
  /** The retries of the calls answered `unavailable`. */
  retry?: RetryOptions;
  /** Headers sent with every call besides the credential. */
  headers?: Record<string, string>;
}

/** CallOptions apply to one call. */
export interface CallOptions {
  /** Aborts the call and its retries. */
  signal?: AbortSignal;
  /** The deadline of each try; default the client's timeoutMs. */
  timeoutMs?: number;
  /** Headers for this call only. */
  headers?: Record<string, string>;
}

/** ReserveInput is a reservation of a discount for one order. */
export interface ReserveInput {
  campaignId: string;
  userId: string;
  /** 1 to 64 of A-Z a-z 0-9 _ . : - */
  orderId: string;
  /** The order's amount in cents; give this or orderAmount. */
  orderAmountCents?: bigint | number;
  /** The order's amount as a decimal string ("12.34"); give this or orderAmountCents. */
  orderAmount?: string;
}

/**
 * HongbaoClient calls hongbao's GrabService and DiscountService. Every
 * call is idempotent on the server (a grab by user, a batch by its users,
 * a reservation by user and order), so the client retries each one
 * answered `unavailable` (busy, outcome_unknown, a lost connection) with
 * backoff, waiting at least the Retry-After the server asked; a retried
 * grab answers ALREADY_GRANTED with the same packet. Any other failure is
 * thrown at once as a HongbaoError.
 */
export class HongbaoClient {
  private readonly opts: ClientOptions;
  private readonly retry: Required<RetryOptions>;
  private readonly grabs: Client<typeof GrabService>;
  private readonly discounts: Client<typeof DiscountService>;
  private readonly sessions: Http2SessionManager[] = [];
  private streamClient: Client<typeof GrabService> | undefined;
  private readonly streams = new Map<string, GrabStream>();

  constructor(opts: ClientOptions) {
    if (!opts.baseUrl) {
      throw new TypeError("baseUrl is required");
    }
    if (!opts.credential) {
      throw new TypeError("credential is required");
    }
    this.opts = { ...opts };
    this.retry = retryDefaults(opts.retry);
    const transport = this.transport(opts.protocol ?? "connect");
    this.grabs = createClient(GrabService, transport);
    this.discounts = createClient(DiscountService, transport);
    if (opts.protocol === "grpc") {
      this.streamClient = this.grabs;
    }
  }

  /**
   * grab grabs a packet of campaignId for the user of the credential (a
   * user token): GRANTED with the packet, ALREADY_GRANTED with the same
   * packet on every later call, or SOLD_OUT, NOT_OPEN, CLOSED, PAUSED,
   * BLOCKED without one.
   */
  grab(campaignId: string, call?: CallOptions): Promise<GrabResponse> {
    return this.unary(call, (o) => this.grabs.grab({ campaignId }, o));
  }

  /**
   * grabBatch grabs a packet for each of 1 to 1000 users under a gateway
   * key: one result per user id, in their order, a repeated user answered
   * ALREADY_GRANTED with the same packet. A result's `error` names a user
   * that was not grabbed ("rate_limited").
   */
  async grabBatch(campaignId: string, userIds: readonly string[], call?: CallOptions): Promise<GrabResult[]> {
    const res = await this.unary(call, (o) => this.grabs.grabBatch({ campaignId, userIds: [...userIds] }, o));
    return res.results;
  }

  /**
   * stream is the client's gateway stream of campaignId, opened on first
   * use and opened again once it ended or failed: one stream per campaign
   * however many callers grab on it.
   */
  stream(campaignId: string): GrabStream {
    let s = this.streams.get(campaignId);
    if (!s || !s.open) {
      s = this.openStream(campaignId);
      this.streams.set(campaignId, s);
    }
    return s;
  }

  /**
   * openStream opens a new gateway stream of campaignId, apart from the
   * one stream() keeps; its owner closes it.
   */
  openStream(campaignId: string, call?: Omit<CallOptions, "timeoutMs">): GrabStream {
    this.streamClient ??= createClient(GrabService, this.transport("connect", true));
    const client = this.streamClient;
    const headers = call?.headers;
    return new GrabStream(
      campaignId,
      (requests, signal) => client.grabStream(requests, { signal, headers }),
      this.retry,
      call?.signal,
    );
  }

  /**
   * reserve reserves a discount for an order under the payment key:
   * RESERVED with the amount and when the hold ends, ALREADY with the
   * same for the same order, or EXHAUSTED, LIMIT, NOT_OPEN, CLOSED,
   * PAUSED, BLOCKED without one.
   */
  reserve(r: ReserveInput, call?: CallOptions): Promise<ReserveResponse> {
    if ((r.orderAmountCents === undefined) === (r.orderAmount === undefined)) {
      throw new TypeError("give exactly one of orderAmountCents and orderAmount");
    }
    const req = create(ReserveRequestSchema, {
      campaignId: r.campaignId,
      userId: r.userId,
      orderId: r.orderId,
      orderAmount:
        r.orderAmount !== undefined
          ? { case: "orderAmountDecimal", value: r.orderAmount }
          : { case: "orderAmountCents", value: BigInt(r.orderAmountCents as bigint | number) },
    });
    return this.unary(call, (o) => this.discounts.reserve(req, o));
  }

  /** confirm confirms an order's discount: ORDER_STATE_CONFIRMED, also when repeated. */
  confirm(campaignId: string, userId: string, orderId: string, call?: CallOptions): Promise<ConfirmResponse> {
    return this.unary(call, (o) => this.discounts.confirm({ campaignId, userId, orderId }, o));
  }

  /** cancel gives an order's discount back: ORDER_STATE_CANCELLED (also when repeated) or _EXPIRED. */
  cancel(campaignId: string, userId: string, orderId: string, call?: CallOptions): Promise<CancelResponse> {
    return this.unary(call, (o) => this.discounts.cancel({ campaignId, userId, orderId }, o));
  }

  /** close aborts the open streams and closes the HTTP/2 connections. */
  close(): void {
    for (const s of this.streams.values()) {
      s.abort();
    }
    this.streams.clear();
    for (const m of this.sessions) {
      m.abort();
    }
  }

  private unary<T>(call: CallOptions | undefined, run: (o: { signal?: AbortSignal; timeoutMs: number; headers?: Record<string, string> }) => Promise<T>): Promise<T> {
    const o = { signal: call?.signal, timeoutMs: call?.timeoutMs ?? this.opts.timeoutMs ?? 10_000, headers: call?.headers };
    return withRetry(() => run(o), this.retry, call?.signal);
  }

  /** transport makes a transport of protocol; http2 asks HTTP/2 of the Connect protocol. */
  private transport(protocol: Protocol, http2 = false): Transport {
    const auth: Interceptor = (next) => (req) => {
      for (const [k, v] of Object.entries(this.opts.headers ?? {})) {
        req.header.set(k, v);
      }
      req.header.set("Authorization", `Bearer ${this.opts.credential}`);
      return next(req);
    };
    const baseUrl = this.opts.baseUrl;
    if (protocol === "grpc" || http2) {
      const sessionManager = new Http2SessionManager(baseUrl);
      this.sessions.push(sessionManager);
      const common = { baseUrl, httpVersion: "2" as const, sessionManager, interceptors: [auth] };
      return protocol === "grpc" ? createGrpcTransport(common) : createConnectTransport(common);
    }
    return createConnectTransport({ baseUrl, httpVersion: "1.1", interceptors: [auth] });
  }
}
