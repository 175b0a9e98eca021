// A Worker's Prometheus metrics: the Go Worker's names and labels, each task
// counted once by how it ended (against a fake node whose answers depend on
// the step), served at /metrics on the port it chose.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import http2 from "node:http2";
import { createServer } from "node:net";
import type { AddressInfo } from "node:net";
import { create } from "@bufbuild/protobuf";
import { Code, ConnectError, type ServiceImpl } from "@connectrpc/connect";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import { StepKind } from "../gen/dex/v1/types_pb.js";
import { TaskHandler, TaskRunner, TaskSchema, WorkerService, type Task } from "../gen/dex/v1/workers_pb.js";
import { dial, handlerBuckets, kindLabel, nopLogger, serveMetrics, splitHostPort, Worker, WorkerMetrics } from "../src/index.js";

function task(stepId: string, tool: string, kind = StepKind.CALL_TOOL, runner = TaskRunner.TOOL, handler = TaskHandler.TOOL): Task {
  return create(TaskSchema, {
    ref: { stepId, attempt: 1, token: `t-${stepId}` }, sessionId: "s", kind, runner, handler, tool, heartbeatIntervalMs: 100,
    modelInput: { history: [{ seq: 1n, kind: 1, text: "hi" }] },
  });
}

/**
 * A node that hands out its tasks at the first poll; refuses the claim of step
 * "claim-refused" and the report of "report-refused", and cancels
 * "cancelled" at its first heartbeat.
 */
async function startNode(tasks: Task[]): Promise<{ addr: string; stop: () => Promise<void> }> {
  const notCurrent = () => new ConnectError("the attempt is not current", Code.FailedPrecondition);
  const impl: Partial<ServiceImpl<typeof WorkerService>> = {
    registerWorker: () => ({ heartbeatIntervalMs: 100, heartbeatTimeoutMs: 3000, nodeId: "n1" }),
    deregisterWorker: () => ({}),
    pollTask: async () => {
      if (tasks.length > 0) return { tasks: tasks.splice(0) };
      await new Promise((r) => setTimeout(r, 50));
      return { tasks: [] };
    },
    claimTask: (req) => {
      if (req.ref?.stepId === "claim-refused") throw notCurrent();
      return {};
    },
    heartbeat: (req) => ({ cancelled: req.ref?.stepId === "cancelled", reason: "session cancelled" }),
    reportTask: (req) => {
      if (req.ref?.stepId === "report-refused") throw notCurrent();
      return {};
    },
    appendOutputs: (req) => ({ answers: req.appends.map((a) => ({ nextOffset: a.offset + BigInt(Buffer.byteLength(a.text)) })) }),
  };
  const server = http2.createServer(connectNodeAdapter({ grpc: true, connect: false, grpcWeb: false, routes: (r) => r.service(WorkerService, impl) }));
  await new Promise<void>((res) => server.listen(0, "127.0.0.1", () => res()));
  return {
    addr: `127.0.0.1:${(server.address() as AddressInfo).port}`,
    stop: () => new Promise<void>((res) => {
      server.close(() => res());
      setTimeout(res, 200); // open sessions would keep close waiting
    }),
  };
}

/** The value of the sample of name with exactly these labels, from the registry's text (0: none). */
async function sample(m: WorkerMetrics, name: string, labels: Record<string, string>): Promise<number> {
  const want = Object.entries(labels).map(([k, v]) => `${k}="${v}"`).join(",");
  for (const line of (await m.registry.metrics()).split("\n")) {
    const sp = line.lastIndexOf(" ");
    if (line.slice(0, sp) === `${name}{${want}}`) return Number(line.slice(sp + 1));
  }
  return 0;
}

describe("a Worker's metrics", () => {
  it("count each task once by how it ended, with the Go Worker's names and labels", async () => {
    const tasks = [
      task("completed", "lookup"), task("failed", "broken"), task("cannot-run", "no_such_tool"), task("claim-refused", "lookup"),
      task("report-refused", "lookup"), task("cancelled", "slow"),
      task("model", "", StepKind.RUN_MODEL, TaskRunner.MODEL, TaskHandler.MODEL),
    ];
    const n = tasks.length;
    const node = await startNode(tasks);
    const m = new WorkerMetrics();
    const ch = dial(node.addr, { token: "" });
    const w = new Worker(ch, {
      id: "w-metrics", pollWaitMs: 200, shutdownGraceMs: 1000, metrics: m, logger: nopLogger,
      tools: [
        { name: "lookup", access: "read", run: () => ({ content: "found" }) },
        { name: "broken", access: "read", run: () => { throw new Error("the tool broke"); } },
        { name: "slow", access: "read", run: (call) => new Promise((_, rej) => call.signal.addEventListener("abort", () => rej(call.signal.reason))) },
      ],
      model: { run: () => ({ text: "hello" }) },
    });
    const stop = new AbortController();
    const running = w.run(stop.signal);
    try {
      const deadline = Date.now() + 10_000;
      for (;;) {
        const counted = (await m.registry.getSingleMetric("dex_worker_tasks_total")!.get()).values.reduce((a, v) => a + v.value, 0);
        if (counted >= n) break;
        assert.ok(Date.now() < deadline, `only ${counted} of ${n} tasks counted`);
        await new Promise((r) => setTimeout(r, 25));
      }
    } finally {
      stop.abort();
      await running;
      ch.close();
      await node.stop();
    }
    const byOutcome: Record<string, number> = {};
    for (const o of ["completed", "failed", "cannot_run", "claim_refused", "report_refused", "cancelled"]) {
      byOutcome[o] = await sample(m, "dex_worker_tasks_total", { kind: "call_tool", outcome: o });
    }
    assert.deepEqual(byOutcome, { completed: 1, failed: 1, cannot_run: 1, claim_refused: 1, report_refused: 1, cancelled: 1 });
    assert.equal(await sample(m, "dex_worker_tasks_total", { kind: "run_model", outcome: "completed" }), 1);
    // Handlers ran for completed, report-refused and the model (ok), failed and cancelled (error).
    assert.equal(await sample(m, "dex_worker_handler_duration_seconds_count", { kind: "call_tool", outcome: "ok" }), 2);
    assert.equal(await sample(m, "dex_worker_handler_duration_seconds_count", { kind: "call_tool", outcome: "error" }), 2);
    assert.equal(await sample(m, "dex_worker_handler_duration_seconds_count", { kind: "run_model", outcome: "ok" }), 1);
  });

  it("label kinds and bucket durations as the Go Worker does", () => {
    assert.equal(kindLabel(StepKind.CALL_SINGLE_ATTEMPT_TOOL), "call_single_attempt_tool");
    assert.equal(kindLabel(99 as StepKind), "99");
    // prometheus.ExponentialBuckets(0.005, 3, 12)
    assert.equal(handlerBuckets.length, 12);
    assert.equal(handlerBuckets[0], 0.005);
    assert.ok(Math.abs(handlerBuckets[11] - 885.735) < 1e-9);
  });
});

describe("serveMetrics", () => {
  it("answers GET /metrics on the port it chose, and nothing else", async () => {
    const m = new WorkerMetrics();
    m.task(StepKind.CALL_TOOL, "completed");
    const s = await serveMetrics("127.0.0.1:0", m.registry);
    try {
      const { host, port } = splitHostPort(s.address);
      assert.equal(host, "127.0.0.1");
      assert.ok(port > 0);
      const r = await fetch(`http://${s.address}/metrics`);
      assert.equal(r.status, 200);
      const body = await r.text();
      assert.match(body, /^dex_worker_tasks_total\{kind="call_tool",outcome="completed"\} 1$/m);
      assert.match(body, /^# TYPE dex_worker_handler_duration_seconds histogram$/m);
      assert.equal((await fetch(`http://${s.address}/`)).status, 404);
    } finally {
      await s.close();
    }
  });

  it("refuses a busy port and an address that is not HOST:PORT", async () => {
    const busy = createServer();
    await new Promise<void>((res) => busy.listen(0, "127.0.0.1", () => res()));
    const addr = `127.0.0.1:${(busy.address() as AddressInfo).port}`;
    try {
      await assert.rejects(serveMetrics(addr, new WorkerMetrics().registry), new RegExp(`listen on ${addr}: EADDRINUSE`));
    } finally {
      busy.close();
    }
    await assert.rejects(serveMetrics("localhost", new WorkerMetrics().registry), /not HOST:PORT/);
  });
});
