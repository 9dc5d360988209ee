import { create } from "@bufbuild/protobuf";
import { HongbaoError } from "./errors";
import { backoffMs, type RetryOptions } from "./retry";
import {
  type GrabResult,
  type GrabStreamRequest,
  GrabStreamRequestSchema,
  type GrabStreamResponse,
  type StreamGrab,
  StreamGrabSchema,
} from "./gen/hongbao/v1/grab_pb";

/** The grabs one message of a stream may carry (the server's limit). */
export const MAX_STREAM_GRABS = 1000;

/** Opens the bidirectional call with the stream's requests. */
export type OpenStream = (requests: AsyncIterable<GrabStreamRequest>, signal: AbortSignal) => AsyncIterable<GrabStreamResponse>;

/** One grab waiting for its result. */
interface Waiter {
  userId: string;
  retries: number;
  resolve: (r: GrabResult) => void;
  reject: (e: HongbaoError) => void;
}

/**
 * GrabStream is a gateway's stream of grabs for one campaign. grab(userId)
 * queues a grab under a fresh ref and returns a promise that the result
 * echoing that ref settles: resolved with the result when it has an
 * outcome (GRANTED, ALREADY_GRANTED, SOLD_OUT, ...), rejected with a
 * HongbaoError carrying the result's error code otherwise. The grabs
 * queued in one turn of the event loop go out as one message (up to
 * MAX_STREAM_GRABS), as the server batches what arrives together.
 *
 * A result whose error is one of UNAVAILABLE_CODES (busy,
 * outcome_unknown, ...) is retried on the stream under a new ref after
 * the wait it asked, as many times as the client's retry options allow:
 * a retried grab answers ALREADY_GRANTED with the packet of a grant whose
 * answer was lost. When the stream itself fails (a refused key, a lost
 * connection) every grab still waiting is rejected with its error, and
 * the stream takes no more grabs.
 */
export class GrabStream {
  readonly campaignId: string;
  private readonly retry: Required<RetryOptions>;
  private readonly controller = new AbortController();
  private readonly waiting = new Map<bigint, Waiter>();
  private outbox: StreamGrab[] = [];
  private nextRef = 1n;
  private retriesScheduled = 0;
  private closing = false;
  private failure: HongbaoError | undefined;
  private wake: (() => void) | undefined;
  private flushScheduled = false;
  private readonly ended: Promise<void>;
  private answeredCount = 0;
  private strayCount = 0;

  constructor(campaignId: string, open: OpenStream, retry: Required<RetryOptions>, signal?: AbortSignal) {
    this.campaignId = campaignId;
    this.retry = retry;
    if (signal) {
      if (signal.aborted) {
        this.controller.abort(signal.reason);
      } else {
        signal.addEventListener("abort", () => this.controller.abort(signal.reason), { once: true });
      }
    }
    this.ended = this.read(open(this.requests(), this.controller.signal));
  }

  /** The grabs sent or queued whose result has not come yet. */
  get pending(): number {
    return this.waiting.size;
  }

  /** The results that settled a grab (a retried grab counts each try). */
  get answered(): number {
    return this.answeredCount;
  }

  /**
   * The results whose ref no grab of this stream waited for: a ref
   * answered twice, or never sent. The server answers each ref once, so
   * anything but 0 is its fault.
   */
  get strays(): number {
    return this.strayCount;
  }

  /** Whether the stream takes grabs: not closing, not failed. */
  get open(): boolean {
    return !this.closing && this.failure === undefined;
  }

  /** grab grabs a packet for userId on the stream; see the class. */
  grab(userId: string): Promise<GrabResult> {
    if (this.failure) {
      return Promise.reject(this.failure);
    }
    if (this.closing) {
      return Promise.reject(new HongbaoError("the stream is closing; open another", "canceled", { userId }));
    }
    return new Promise<GrabResult>((resolve, reject) => {
      this.send({ userId, retries: 0, resolve, reject });
    });
  }

  /**
   * close stops taking grabs, waits for the results of those sent (and
   * their retries), then ends the stream. It resolves once the server
   * ended it; a failure of the stream rejected the grabs, not close.
   */
  async close(): Promise<void> {
    this.closing = true;
    this.poke();
    await this.ended;
  }

  /** abort ends the stream now: the waiting grabs are rejected. */
  abort(reason?: unknown): void {
    this.controller.abort(reason);
  }

  private send(w: Waiter): void {
    const ref = this.nextRef++;
    this.waiting.set(ref, w);
    this.outbox.push(create(StreamGrabSchema, { userId: w.userId, ref }));
    if (!this.flushScheduled) {
      // The grabs of this turn go out together.
      this.flushScheduled = true;
      setImmediate(() => {
        this.flushScheduled = false;
        this.poke();
      });
    }
  }

  private poke(): void {
    const wake = this.wake;
    this.wake = undefined;
    wake?.();
  }

  /** The stream's messages, until it closes with nothing left to answer. */
  private async *requests(): AsyncGenerator<GrabStreamRequest> {
    for (;;) {
      if (this.failure || this.controller.signal.aborted) {
        return;
      }
      if (this.outbox.length > 0 && !this.flushScheduled) {
        const grabs = this.outbox.splice(0, MAX_STREAM_GRABS);
        yield create(GrabStreamRequestSchema, { campaignId: this.campaignId, grabs });
        continue;
      }
      if (this.closing && this.waiting.size === 0 && this.retriesScheduled === 0) {
        return;
      }
      await new Promise<void>((resolve) => {
        this.wake = resolve;
      });
    }
  }

  /** read settles the grabs from the results, until the stream ends. */
  private async read(responses: AsyncIterable<GrabStreamResponse>): Promise<void> {
    try {
      for await (const res of responses) {
        for (const r of res.results) {
          this.settle(r);
        }
        this.poke();
      }
      if (this.waiting.size > 0) {
        this.fail(new HongbaoError("the stream ended before every result came", "unavailable"));
      }
    } catch (err) {
      this.fail(HongbaoError.from(err));
    }
    this.closing = true;
    this.poke();
  }

  private settle(r: GrabResult): void {
    const w = this.waiting.get(r.ref);
    if (!w) {
      this.strayCount++;
      return;
    }
    this.waiting.delete(r.ref);
    this.answeredCount++;
    if (!r.error) {
      w.resolve(r);
      return;
    }
    const wait = Number(r.retryAfterMs);
    const err = new HongbaoError(`the grab of ${r.userId} failed: ${r.error}`, r.error, { retryAfterMs: wait, userId: r.userId });
    if (!err.retryable || w.retries + 1 >= this.retry.attempts || this.controller.signal.aborted) {
      w.reject(err);
      return;
    }
    this.retriesScheduled++;
    const delay = backoffMs(w.retries, this.retry, wait);
    w.retries++;
    setTimeout(() => {
      this.retriesScheduled--;
      if (this.failure) {
        w.reject(this.failure);
        this.poke();
        return;
      }
      this.send(w);
    }, delay);
  }

  private fail(err: HongbaoError): void {
    this.failure ??= err;
    for (const w of this.waiting.values()) {
      w.reject(err);
    }
    this.waiting.clear();
    this.outbox = [];
  }
}
