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

/** What a ModelError carries beside its type and message. */
export interface ModelErrorOptions {
  /**
   * The provider's Retry-After in milliseconds (0 or left out: none). With
   * the rate_limit type the failure reports it and the cluster holds the
   * session's provider, for every Worker, until then (docs/model-errors.md).
   * A value that is not a number above 0 counts as none; a fraction is
   * rounded up.
   */
  retryAfterMs?: number;
  /** The error it stands for (a provider SDK's); its response headers are read when retryAfterMs is not given. */
  cause?: unknown;
}

/** A handler error with a Dex error type (docs/model-errors.md): the attempt fails with that type. */
export class ModelError extends Error {
  readonly type: ErrorType;
  /** The provider's Retry-After in whole milliseconds (0: none); reported with the rate_limit type only. */
  readonly retryAfterMs: number;
  constructor(type: ErrorType, message?: string, options?: ModelErrorOptions) {
    super(message || `ERROR_TYPE_${ErrorType[type] ?? type}`, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = "ModelError";
    this.type = type;
    this.retryAfterMs = wholeMs(options?.retryAfterMs);
  }
}

/**
 * A model handler's error for a provider's HTTP answer, typed by
 * errorTypeForHttpStatus. Given the answer's headers (a fetch Response's
 * headers, or a plain record), a rate_limit error carries their Retry-After
 * (retryAfterMsFromHeaders).
 */
export function newHttpModelError(status: number, message: string, headers?: HeadersLike): ModelError {
  const type = errorTypeForHttpStatus(status, message);
  const retryAfterMs = type === ErrorType.RATE_LIMIT ? retryAfterMsFromHeaders(headers) : 0;
  return new ModelError(type, message, { retryAfterMs });
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

/** Response headers as provider SDKs expose them: a fetch Headers (or anything with get), or a plain record. */
export type HeadersLike = { get(name: string): string | null } | Record<string, unknown>;

/** The longest Retry-After read (24 hours), so that any value fits; the cluster bounds a provider's hold further. */
export const maxRetryAfterMs = 24 * 60 * 60 * 1000;

/** ms as a Retry-After: whole milliseconds rounded up (the cluster never waits less than asked), at most maxRetryAfterMs; 0 for anything but a number above 0. */
function wholeMs(ms: unknown): number {
  if (typeof ms !== "number" || !(ms > 0)) return 0;
  return Math.min(Math.ceil(ms), maxRetryAfterMs);
}

/** A header's value from headers, its name matched in any case ("" when absent). */
function headerValue(headers: HeadersLike, name: string): string {
  if (typeof (headers as { get?: unknown }).get === "function") {
    const v = (headers as { get(name: string): unknown }).get(name);
    return typeof v === "string" ? v.trim() : "";
  }
  for (const [k, v] of Object.entries(headers)) {
    if (k.toLowerCase() !== name) continue;
    // Node's IncomingHttpHeaders may hold a list; the first value counts.
    const first = Array.isArray(v) ? v[0] : v;
    if (typeof first === "string") return first.trim();
    if (typeof first === "number") return String(first);
  }
  return "";
}

// A decimal number as a header gives one (no hex, Infinity or NaN).
const decimal = /^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/;

/**
 * The Retry-After response headers give, in milliseconds (0: none that can
 * be read): retry-after-ms (milliseconds, as OpenAI sends it) first, then
 * retry-after, in seconds (a fraction allowed) or an HTTP date (from now).
 * A value that is not one of these, or not in the future, is ignored.
 * Whole milliseconds, rounded up, at most maxRetryAfterMs.
 */
export function retryAfterMsFromHeaders(headers: HeadersLike | undefined | null, nowMs = Date.now()): number {
  if (typeof headers !== "object" || headers === null) return 0;
  const ms = headerValue(headers, "retry-after-ms");
  if (decimal.test(ms)) {
    const v = wholeMs(Number(ms));
    if (v > 0) return v;
  }
  const after = headerValue(headers, "retry-after");
  if (after === "") return 0;
  if (decimal.test(after)) return wholeMs(Number(after) * 1000);
  const at = Date.parse(after);
  return Number.isNaN(at) ? 0 : wholeMs(at - nowMs);
}

/** The response headers an error itself exposes: headers (openai, @anthropic-ai/sdk), responseHeaders (the AI SDK's APICallError), response.headers. */
function exposedHeaders(e: unknown): HeadersLike[] {
  if (typeof e !== "object" || e === null) return [];
  const o = e as { headers?: unknown; responseHeaders?: unknown; response?: { headers?: unknown } };
  const response = typeof o.response === "object" && o.response !== null ? o.response.headers : undefined;
  return [o.headers, o.responseHeaders, response].filter((h): h is HeadersLike => typeof h === "object" && h !== null);
}

/**
 * How long the provider asked to wait before its next call, in milliseconds,
 * as a model handler's error says it (0: it does not say). It looks through
 * the error and its causes for a ModelError's retryAfterMs, then for response
 * headers an error exposes (retryAfterMsFromHeaders). The Worker reports it
 * with a rate_limit failure only: the cluster then holds the session's
 * provider until then (docs/model-errors.md).
 */
export function retryAfterMsOf(err: unknown, nowMs = Date.now()): number {
  const chain = causes(err);
  for (const e of chain) {
    if (e instanceof ModelError && e.retryAfterMs > 0) return e.retryAfterMs;
  }
  for (const e of chain) {
    for (const h of exposedHeaders(e)) {
      const ms = retryAfterMsFromHeaders(h, nowMs);
      if (ms > 0) return ms;
    }
  }
  return 0;
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
