import { Code, ConnectError } from "@connectrpc/connect";
import { ErrorSchema } from "./gen/hongbao/v1/outcome_pb";

/**
 * The error codes that hongbao answers with the status `unavailable`:
 * the grab queue was full (`busy`), the answer was lost
 * (`outcome_unknown`), a call ran out of time or the store took no
 * writes (`unavailable`), or the instance is stopping (`not_ready`).
 * Nothing was done twice by retrying any of them: every call of the
 * client is idempotent (a grab by user, a reservation by user and order).
 * This is the `unavailable` rows of the error table of docs/service.md;
 * the client's tests hold the two together.
 */
export const UNAVAILABLE_CODES: readonly string[] = Object.freeze([
  "busy",
  "not_ready",
  "outcome_unknown",
  "unavailable",
]);

/**
 * HongbaoError is every failure the client reports: a refusal of the
 * server, a failed transport, or one user's error in a batch or a stream.
 */
export class HongbaoError extends Error {
  /**
   * The code of the JSON API's error shape (`unauthorized`, `not_found`,
   * `rate_limited`, `busy`, `expired`, ...), from the `hongbao.v1.Error`
   * detail. When no server answered (a refused connection, a deadline,
   * an abort) it is the status code in snake case (`unavailable`,
   * `deadline_exceeded`, `canceled`).
   */
  readonly code: string;
  /**
   * The Connect / gRPC status code of the call; undefined for one user's
   * error in a stream's results.
   */
  readonly rpcCode: Code | undefined;
  /**
   * How long the server asked to wait before a retry, in milliseconds
   * (the detail's `retry_after_ms`, else the `Retry-After` header or
   * trailer); 0 when it asked no wait.
   */
  readonly retryAfterMs: number;
  /** The user whose grab failed, for an error of a batch or a stream. */
  readonly userId: string | undefined;

  constructor(
    message: string,
    code: string,
    opts: { rpcCode?: Code; retryAfterMs?: number; userId?: string; cause?: unknown } = {},
  ) {
    super(message, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.name = "HongbaoError";
    this.code = code;
    this.rpcCode = opts.rpcCode;
    this.retryAfterMs = opts.retryAfterMs ?? 0;
    this.userId = opts.userId;
  }

  /**
   * Whether the same call may be sent again: the status is `unavailable`
   * (or, for a stream's result, its code is one of UNAVAILABLE_CODES).
   */
  get retryable(): boolean {
    if (this.rpcCode !== undefined) {
      return this.rpcCode === Code.Unavailable;
    }
    return UNAVAILABLE_CODES.includes(this.code);
  }

  /** from turns any error a call threw into a HongbaoError. */
  static from(err: unknown): HongbaoError {
    if (err instanceof HongbaoError) {
      return err;
    }
    const ce = ConnectError.from(err);
    const detail = ce.findDetails(ErrorSchema)[0];
    const code = detail?.code || snake(Code[ce.code] ?? "unknown");
    let wait = detail ? Number(detail.retryAfterMs) : 0;
    if (wait <= 0) {
      const secs = Number(ce.metadata.get("retry-after") ?? "");
      wait = Number.isFinite(secs) && secs > 0 ? secs * 1000 : 0;
    }
    return new HongbaoError(ce.rawMessage || ce.message, code, { rpcCode: ce.code, retryAfterMs: wait, cause: err });
  }
}

/** snake spells a status code's name as the JSON codes are spelled. */
function snake(name: string): string {
  return name.replace(/[A-Z]/g, (c, i: number) => (i > 0 ? "_" : "") + c.toLowerCase());
}
