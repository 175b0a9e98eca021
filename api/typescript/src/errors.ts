import { Code, ConnectError } from "@connectrpc/connect";
import { ErrorType } from "../gen/dex/v1/types_pb.js";

/**
 * Begins the result of a tool call that never ran (docs/attempts.md): no
 * attempt of it was ever claimed by a Worker, so the tool had no side effect
 * and it is safe to call it again. Test a failed call's result with
 * `content.startsWith(toolCallNotRunErrorPrefix)`.
 */
export const toolCallNotRunErrorPrefix = "the tool did not run, so it is safe to call again";

/** The same prefix under the library's earlier name, kept for existing code. */
export const ToolCallNotRunErrorPrefix = toolCallNotRunErrorPrefix;

/** A handler error with a Dex error type (docs/model-errors.md): the attempt fails with that type. */
export class ModelError extends Error {
  readonly type: ErrorType;
  constructor(type: ErrorType, message?: string) {
    super(message || `ERROR_TYPE_${ErrorType[type] ?? type}`);
    this.name = "ModelError";
    this.type = type;
  }
}

/** A model handler's error for a provider's HTTP answer, typed by errorTypeForHttpStatus. */
export function newHttpModelError(status: number, message: string): ModelError {
  return new ModelError(errorTypeForHttpStatus(status, message), message);
}

/**
 * Maps a provider's HTTP error status and message to Dex's error type:
 * 400/404/413/422 invalid_request (context_length when the message says the
 * prompt does not fit), 408/504 timeout, 429 rate_limit, 529 and an
 * "overloaded" 503 overloaded, other 5xx server_error, else unknown.
 */
export function errorTypeForHttpStatus(status: number, message: string): ErrorType {
  if (status === 400 || status === 404 || status === 413 || status === 422) {
    return isContextLengthMessage(message) ? ErrorType.CONTEXT_LENGTH : ErrorType.INVALID_REQUEST;
  }
  if (status === 408 || status === 504) return ErrorType.TIMEOUT;
  if (status === 429) return ErrorType.RATE_LIMIT;
  if (status === 529 || (status === 503 && message.toLowerCase().includes("overloaded"))) return ErrorType.OVERLOADED;
  if (status >= 500 && status <= 599) return ErrorType.SERVER_ERROR;
  return ErrorType.UNKNOWN;
}

const contextLengthPhrases = [
  "context_length_exceeded",
  "context length",
  "context window",
  "maximum context",
  "prompt is too long",
  "input is too long",
  "too many tokens",
  "maximum number of tokens",
];

/** Whether a provider's error message says the request does not fit the model's context window. */
export function isContextLengthMessage(message: string): boolean {
  const m = message.toLowerCase();
  return contextLengthPhrases.some((p) => m.includes(p));
}

const networkCodes = new Set([
  "ECONNREFUSED", "ECONNRESET", "ECONNABORTED", "EPIPE", "ENETUNREACH", "EHOSTUNREACH",
  "ENOTFOUND", "EAI_AGAIN", "UND_ERR_SOCKET", "UND_ERR_CONNECT_TIMEOUT",
]);

function causes(err: unknown): unknown[] {
  const chain: unknown[] = [];
  while (err !== undefined && err !== null && !chain.includes(err)) {
    chain.push(err);
    if (err instanceof AggregateError) {
      chain.push(...err.errors.flatMap(causes));
    }
    err = (err as { cause?: unknown }).cause;
  }
  return chain;
}

/** The HTTP status an error exposes the way provider SDKs do (status, statusCode, status_code), or 0. */
function httpStatusOf(err: unknown): number {
  for (const e of causes(err)) {
    if (typeof e !== "object" || e === null) continue;
    for (const k of ["status", "statusCode", "status_code"]) {
      const v = (e as Record<string, unknown>)[k];
      if (typeof v === "number" && v >= 100 && v <= 599) return v;
    }
  }
  return 0;
}

/**
 * The error type a model handler's error is reported with: a ModelError's
 * type; an HTTP status the error (or its cause) exposes; a timeout (an
 * AbortSignal.timeout's TimeoutError, ETIMEDOUT) is timeout; a failed
 * connection (ECONNREFUSED, ECONNRESET, ..., fetch's "fetch failed") is
 * network; anything else unknown. undefined/null has no type.
 */
export function classifyError(err: unknown): ErrorType {
  if (err === undefined || err === null) return ErrorType.UNSPECIFIED;
  const chain = causes(err);
  for (const e of chain) {
    if (e instanceof ModelError) return e.type;
  }
  const status = httpStatusOf(err);
  if (status > 0) return errorTypeForHttpStatus(status, err instanceof Error ? err.message : String(err));
  for (const e of chain) {
    const name = (e as { name?: unknown }).name;
    const code = (e as { code?: unknown }).code;
    if (name === "TimeoutError" || code === "ETIMEDOUT" || code === "UND_ERR_HEADERS_TIMEOUT") return ErrorType.TIMEOUT;
  }
  for (const e of chain) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === "string" && networkCodes.has(code)) return ErrorType.NETWORK;
    if (e instanceof TypeError && e.message === "fetch failed") return ErrorType.NETWORK;
  }
  return ErrorType.UNKNOWN;
}

/** The gRPC code of an error of a Dex call (Code.Unknown for anything else). */
export function codeOf(err: unknown): Code {
  return err instanceof ConnectError ? err.code : Code.Unknown;
}

/** The message of an error of a Dex call, without connect's "[code]" prefix. */
export function messageOf(err: unknown): string {
  if (err instanceof ConnectError) return err.rawMessage;
  return err instanceof Error ? err.message : String(err);
}
