// A Worker's spans: one around each handler run, a child of the attempt's
// span that the cluster's leader exports, so a turn is one trace from the
// client through the leader to the Worker's model and tool calls
// (docs/tracing.md). Through @opentelemetry/api: with no SDK registered
// every call here is a no-op.
import {
  context, ROOT_CONTEXT, SpanKind, SpanStatusCode, trace, type Attributes, type Context, type SpanContext,
} from "@opentelemetry/api";
import type { Task } from "../gen/dex/v1/workers_pb.js";
import { kindName } from "./kinds.js";
import { handlerOf } from "./route.js";

/** The name of the tracer the Worker's spans come from. */
export const TracerName = "dex.worker";

// W3C Trace Context: version-traceid-parentid-flags, lowercase hex; a later
// version may add fields after a "-".
const traceparentRe = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$/;

/**
 * The remote span a W3C traceparent header names, or undefined when it is
 * empty or malformed (version ff, a version 00 with more fields, an all-zero
 * trace or span id).
 */
export function parseTraceparent(tp: string): SpanContext | undefined {
  const m = traceparentRe.exec(tp);
  if (m === null || m[1] === "ff" || (m[1] === "00" && m[5] !== undefined)) return undefined;
  const sc: SpanContext = { traceId: m[2], spanId: m[3], traceFlags: parseInt(m[4], 16), isRemote: true };
  return trace.isSpanContextValid(sc) ? sc : undefined;
}

/** The span's name: "dex.model" for a model or compact handler, "dex.tool NAME" for a tool's run or poll handler. */
export function taskSpanName(t: Task): string {
  const h = handlerOf(t);
  return h === "model" || h === "compact" ? "dex.model" : `dex.tool ${t.tool}`;
}

/** What the span says of the task: its session, Step, attempt, kind, and tool when it names one. */
export function taskSpanAttributes(t: Task): Attributes {
  const a: Attributes = {
    "dex.session": t.sessionId, "dex.step": t.ref?.stepId ?? "", "dex.attempt": t.ref?.attempt ?? 0, "dex.kind": kindName(t.kind),
  };
  if (t.tool !== "") a["dex.tool"] = t.tool;
  return a;
}

/**
 * Runs fn, a handler's run for task t, inside a span: the child of the
 * task's traceparent, or a root span when the task has none (the turn is not
 * traced) or a malformed one; never a child of whatever was active when the
 * Worker started. The span is the active context while fn runs, so the
 * handler's own spans nest under it. An error fn throws is recorded on the
 * span and thrown on.
 */
export async function inTaskSpan<T>(t: Task, fn: () => Promise<T> | T): Promise<T> {
  const parent = parseTraceparent(t.traceparent);
  const base: Context = parent ? trace.setSpanContext(ROOT_CONTEXT, parent) : ROOT_CONTEXT;
  const span = trace.getTracer(TracerName).startSpan(taskSpanName(t), { kind: SpanKind.INTERNAL, attributes: taskSpanAttributes(t) }, base);
  try {
    return await context.with(trace.setSpan(base, span), fn);
  } catch (err) {
    const e = err instanceof Error ? err : String(err);
    span.recordException(e);
    span.setStatus({ code: SpanStatusCode.ERROR, message: typeof e === "string" ? e : e.message });
    throw err;
  } finally {
    span.end();
  }
}
