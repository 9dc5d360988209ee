// @hongbao/client: a typed client of hongbao's Connect and gRPC
// procedures (proto/hongbao/v1). docs/clients.md shows it at work.
export { HongbaoClient } from "./client";
export type { CallOptions, ClientOptions, Protocol, ReserveInput } from "./client";
export { GrabStream, MAX_STREAM_GRABS } from "./stream";
export { HongbaoError, UNAVAILABLE_CODES } from "./errors";
export type { RetryOptions } from "./retry";
export { Code } from "@connectrpc/connect";
export * from "./gen/hongbao/v1/outcome_pb";
export * from "./gen/hongbao/v1/grab_pb";
export * from "./gen/hongbao/v1/discount_pb";
