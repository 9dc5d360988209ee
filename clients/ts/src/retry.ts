import { HongbaoError } from "./errors";

/** RetryOptions says how often and how patiently a call is retried. */
export interface RetryOptions {
  /** Tries of one call in all, the first included. Default 4; 1 never retries. */
  attempts?: number;
  /** The first backoff, doubled at each retry. Default 100 ms. */
  baseDelayMs?: number;
  /** The longest backoff. Default 5000 ms. A server's Retry-After is honored even when longer. */
  maxDelayMs?: number;
}

/** The defaults of RetryOptions, filled in. */
export function retryDefaults(o: RetryOptions | undefined): Required<RetryOptions> {
  const attempts = Math.floor(o?.attempts ?? 4);
  if (!(attempts >= 1)) {
    throw new RangeError("retry.attempts must be at least 1");
  }
  return {
    attempts,
    baseDelayMs: Math.max(0, o?.baseDelayMs ?? 100),
    maxDelayMs: Math.max(0, o?.maxDelayMs ?? 5000),
  };
}

/**
 * backoffMs is the wait before retry number `retry` (0 for the first):
 * the base doubled at each retry and capped, of which the second half is
 * random (so that clients refused together do not come back together,
 * while each still waits at least half), and never less than what the
 * server asked.
 */
export function backoffMs(retry: number, o: Required<RetryOptions>, retryAfterMs: number): number {
  const ceiling = Math.min(o.maxDelayMs, o.baseDelayMs * 2 ** retry);
  return Math.max(retryAfterMs, ceiling / 2 + (Math.random() * ceiling) / 2);
}

/** sleep waits ms, or rejects when signal aborts. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(HongbaoError.from(signal.reason));
      return;
    }
    const onAbort = () => {
      clearTimeout(timer);
      reject(HongbaoError.from(signal?.reason));
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/**
 * withRetry runs call until it succeeds, fails with an error that is not
 * retryable (HongbaoError.retryable), or has been tried o.attempts times;
 * it throws the last error as a HongbaoError. Only idempotent calls go
 * through it.
 */
export async function withRetry<T>(call: () => Promise<T>, o: Required<RetryOptions>, signal?: AbortSignal): Promise<T> {
  for (let n = 0; ; n++) {
    try {
      return await call();
    } catch (err) {
      const e = HongbaoError.from(err);
      if (!e.retryable || n + 1 >= o.attempts || signal?.aborted) {
        throw e;
      }
      await sleep(backoffMs(n, o, e.retryAfterMs), signal);
    }
  }
}
