export { Channel, dial, parseTarget, Scheme, HealthService, ProbeIntervalMs, ProbeTimeoutMs } from "./channel.js";
export type { DialOptions, TlsOptions } from "./channel.js";
export { partitionOf } from "./partitions.js";
export { LiveOffsets } from "./live.js";
export { Client, newSessionId, newIdempotencyKey, maxPriority, maxFairnessWeight, maxFairnessKeyBytes } from "./client.js";
export type { BudgetInit, CallOptions, CreateScheduleInit, CreateSessionInit, ForkSessionInit } from "./client.js";
export type { SessionFilter, SessionOrderName, SessionPageRequest, SessionStatusName, TimeBound } from "./list.js";
export { bulkActions, newBulkJobId } from "./bulk.js";
export type { BulkActionName, BulkFilterInit, StartBulkActionInit, WaitBulkJobOptions } from "./bulk.js";
export { BulkAction, BulkJobStatus } from "../gen/dex/v1/sessions_pb.js";
export type { ListSessionsResponse, SessionSummary } from "../gen/dex/v1/sessions_pb.js";
export type { BulkFilter, BulkJob, BulkSkip } from "../gen/dex/v1/sessions_pb.js";
export type { CancelSessionResponse, EditHistoryResponse, GetSessionResponse } from "../gen/dex/v1/sessions_pb.js";
export {
  toolCallNotRunErrorPrefix, ToolCallNotRunErrorPrefix, ModelError, newHttpModelError, errorTypeForHttpStatus, isContextLengthMessage, classifyError, codeOf,
  messageOf, retryAfterMsOf, retryAfterMsFromHeaders, maxRetryAfterMs,
} from "./errors.js";
export type { HeadersLike, ModelErrorOptions } from "./errors.js";
export { checkAgentList } from "./agents.js";
export { checkModelOutput, kindName } from "./kinds.js";
export { Ledger, LedgerEnv, sideEffect } from "./ledger.js";
export { Holder, holderFromEnv, HoldAllEnv, HoldEnv, parseMoments } from "./hold.js";
export { jsonLogger, nopLogger } from "./log.js";
export { WorkerMetrics, serveMetrics, kindLabel, handlerBuckets, promClient, TasksMetric, HandlerDurationMetric, splitHostPort } from "./metrics.js";
export type { MetricsServer, TaskOutcome } from "./metrics.js";
export type { Logger } from "./log.js";
export { LeaderMetadataKey, PartitionMetadataKey, transient } from "./retry.js";
export { TokenEnv, tokenFrom } from "./token.js";
export { parseTraceparent, TracerName } from "./tracing.js";
export { Worker, Moments, AllMoments, toolSpec, toModelOutput } from "./worker.js";
export type {
  Access, Moment, ModelHandler, ModelInput, ModelOutputInit, PollHandler, Tool, ToolCall, ToolHandler, ToolResult, UsageInit, WorkerOptions,
} from "./worker.js";
export * from "../gen/dex/v1/types_pb.js";
// How a task runs (Task.runner, Task.handler), for hold hooks that read it.
export { TaskHandler, TaskRunner } from "../gen/dex/v1/workers_pb.js";
export { Code, ConnectError } from "@connectrpc/connect";
