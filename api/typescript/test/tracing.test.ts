import { after, beforeEach, describe, it } from "node:test";
import assert from "node:assert/strict";
import { context, SpanStatusCode, trace } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from "@opentelemetry/sdk-trace-base";
import type { Task } from "../gen/dex/v1/workers_pb.js";
import {
  dial, ErrorType, ModelError, parseTraceparent, StepKind, TaskHandler, TaskRunner, TracerName, Worker, type ModelInput, type ToolCall, type WorkerOptions,
} from "../src/index.js";
import { FakeNode, task } from "./fake.js";

// The SDK a program would register (NodeSDK does both): a tracer provider and
// the async context manager that carries the active span across awaits.
const exporter = new InMemorySpanExporter();
const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
trace.setGlobalTracerProvider(provider);
const contextManager = new AsyncLocalStorageContextManager().enable();
context.setGlobalContextManager(contextManager);
after(async () => {
  await provider.shutdown();
  contextManager.disable();
});

const traceId = "4bf92f3577b34da6a3ce929d0e0e4736";
const attemptSpanId = "00f067aa0ba902b7";
const traceparent = `00-${traceId}-${attemptSpanId}-01`;

function withTraceparent(t: Task, tp: string): Task {
  t.traceparent = tp;
  return t;
}

/** Runs a Worker on tasks until each is reported; the reports' outcomes by step id. */
async function runTasks(opts: WorkerOptions, tasks: Task[]): Promise<Map<string, string | undefined>> {
  const node = await new FakeNode().start();
  node.tasks.push(...tasks);
  const ch = dial(node.addr, { token: "" });
  const w = new Worker(ch, { id: "w-trace", pollWaitMs: 100, shutdownGraceMs: 500, ...opts });
  const stop = new AbortController();
  const running = w.run(stop.signal);
  try {
    const deadline = Date.now() + 10_000;
    while (node.of("report").length < tasks.length) {
      if (Date.now() > deadline) throw new Error("timed out: calls " + JSON.stringify(node.calls.map((c) => c.method)));
      await new Promise((r) => setTimeout(r, 10));
    }
  } finally {
    stop.abort();
    await running;
    ch.close();
    await node.stop();
  }
  return new Map(node.of("report").map((r) => [r.ref!.stepId, r.result?.outcome.case]));
}

function spansNamed(name: string): ReadableSpan[] {
  return exporter.getFinishedSpans().filter((s) => s.name === name);
}

function only(name: string): ReadableSpan {
  const s = spansNamed(name);
  assert.equal(s.length, 1, `spans named ${name}: ${exporter.getFinishedSpans().map((x) => x.name).join(", ")}`);
  return s[0];
}

describe("a Worker's spans", () => {
  beforeEach(() => exporter.reset());

  it("runs a tool handler in a child of the task's traceparent, with the handler's own spans under it", async () => {
    const seen: ToolCall[] = [];
    const outcomes = await runTasks({
      tools: [{
        name: "search", access: "read",
        run: (c) => {
          seen.push(c);
          trace.getTracer("handler").startActiveSpan("search.backend", (s) => s.end());
          return { content: "found" };
        },
      }],
    }, [withTraceparent(task({ tool: "search", stepId: "step-7", attempt: 2 }), traceparent)]);
    assert.equal(outcomes.get("step-7"), "toolResult");
    assert.equal(seen[0].traceparent, traceparent);

    const s = only("dex.tool search");
    assert.equal(s.instrumentationScope.name, TracerName);
    assert.equal(s.spanContext().traceId, traceId);
    assert.equal(s.parentSpanContext?.spanId, attemptSpanId);
    assert.equal(s.parentSpanContext?.isRemote, true);
    assert.deepEqual(s.attributes, {
      "dex.session": "s1", "dex.step": "step-7", "dex.attempt": 2, "dex.kind": "STEP_KIND_CALL_TOOL", "dex.tool": "search",
    });
    assert.equal(s.status.code, SpanStatusCode.UNSET);

    const own = only("search.backend");
    assert.equal(own.spanContext().traceId, traceId);
    assert.equal(own.parentSpanContext?.spanId, s.spanContext().spanId);
  });

  it("records a model handler's error on its span, and the attempt still fails with it", async () => {
    const seen: ModelInput[] = [];
    const outcomes = await runTasks({
      model: {
        run: async (input) => {
          seen.push(input);
          await new Promise((r) => setTimeout(r, 5));
          throw new ModelError(ErrorType.RATE_LIMIT, "provider says slow down");
        },
      },
    }, [withTraceparent(task({ kind: StepKind.RUN_MODEL, runner: TaskRunner.MODEL, handler: TaskHandler.MODEL }), traceparent)]);
    assert.equal(outcomes.get("step-1"), "failure");
    assert.equal(seen[0].traceparent, traceparent);

    const s = only("dex.model");
    assert.equal(s.parentSpanContext?.spanId, attemptSpanId);
    assert.deepEqual(s.attributes, { "dex.session": "s1", "dex.step": "step-1", "dex.attempt": 1, "dex.kind": "STEP_KIND_RUN_MODEL" });
    assert.equal(s.status.code, SpanStatusCode.ERROR);
    assert.equal(s.status.message, "provider says slow down");
    const ev = s.events.find((e) => e.name === "exception");
    assert.equal(ev?.attributes?.["exception.message"], "provider says slow down");
  });

  it("records a thrown value that is not an Error by its text", async () => {
    const outcomes = await runTasks({
      tools: [{ name: "flaky", access: "read", run: () => { throw "backend gone"; } }],
    }, [withTraceparent(task({ tool: "flaky" }), traceparent)]);
    assert.equal(outcomes.get("step-1"), "failure");
    const s = only("dex.tool flaky");
    assert.equal(s.status.code, SpanStatusCode.ERROR);
    assert.equal(s.status.message, "backend gone");
    assert.equal(s.events.find((e) => e.name === "exception")?.attributes?.["exception.message"], "backend gone");
  });

  it("names the compact and poll handlers' spans by their runner, with their kind", async () => {
    await runTasks({
      model: { run: () => ({ text: "" }), compact: () => "summary" },
      tools: [{ name: "build", access: "read", longRunning: true, run: () => ({ content: "", taskId: "b1" }), poll: () => ({ done: false }) }],
    }, [
      withTraceparent(task({ kind: StepKind.COMPACT_CONTEXT, runner: TaskRunner.MODEL, handler: TaskHandler.COMPACT, stepId: "c" }), traceparent),
      withTraceparent(task({ kind: StepKind.POLL_TOOL_TASK, runner: TaskRunner.TOOL, handler: TaskHandler.POLL, tool: "build", stepId: "p" }), traceparent),
    ]);
    assert.equal(only("dex.model").attributes["dex.kind"], "STEP_KIND_COMPACT_CONTEXT");
    const poll = only("dex.tool build");
    assert.equal(poll.attributes["dex.kind"], "STEP_KIND_POLL_TOOL_TASK");
    assert.equal(poll.parentSpanContext?.spanId, attemptSpanId);
  });

  it("makes a root span for a task without a traceparent, not a child of what was active when the Worker started", async () => {
    const seen: ToolCall[] = [];
    const outer = trace.getTracer("app").startSpan("app.main");
    await context.with(trace.setSpan(context.active(), outer), () =>
      runTasks({ tools: [{ name: "echo", access: "read", run: (c) => (seen.push(c), { content: "ok" }) }] }, [task({ tool: "echo" })]));
    outer.end();
    assert.equal(seen[0].traceparent, "");
    const s = only("dex.tool echo");
    assert.equal(s.parentSpanContext, undefined);
    assert.notEqual(s.spanContext().traceId, outer.spanContext().traceId);
  });

  it("ignores a malformed traceparent: the handler runs in a root span", async () => {
    const bad = `00-${traceId.toUpperCase()}-${attemptSpanId}-01`;
    const outcomes = await runTasks({ tools: [{ name: "echo", access: "read", run: () => ({ content: "ok" }) }] },
      [withTraceparent(task({ tool: "echo" }), bad)]);
    assert.equal(outcomes.get("step-1"), "toolResult");
    const s = only("dex.tool echo");
    assert.equal(s.parentSpanContext, undefined);
    assert.notEqual(s.spanContext().traceId, traceId);
  });
});

describe("parseTraceparent", () => {
  it("reads a traceparent's trace, span and flags as a remote span", () => {
    assert.deepEqual(parseTraceparent(traceparent), { traceId, spanId: attemptSpanId, traceFlags: 1, isRemote: true });
    assert.deepEqual(parseTraceparent(`00-${traceId}-${attemptSpanId}-00`)?.traceFlags, 0);
    // A later version may add fields.
    assert.equal(parseTraceparent(`01-${traceId}-${attemptSpanId}-01-more`)?.spanId, attemptSpanId);
  });

  it("gives nothing for an empty or malformed one", () => {
    for (const tp of [
      "", "garbage", `00-${traceId}-${attemptSpanId}`, `00-${traceId}-${attemptSpanId}-1`,
      `00-${traceId.toUpperCase()}-${attemptSpanId}-01`, `ff-${traceId}-${attemptSpanId}-01`, `00-${traceId}-${attemptSpanId}-01-more`,
      `00-${"0".repeat(32)}-${attemptSpanId}-01`, `00-${traceId}-${"0".repeat(16)}-01`, ` ${traceparent}`, `00-${traceId}x-${attemptSpanId}-01`,
    ]) {
      assert.equal(parseTraceparent(tp), undefined, JSON.stringify(tp));
    }
  });
});
