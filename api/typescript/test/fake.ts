// A fake Dex node on 127.0.0.1 (connect-node's server speaking gRPC) whose
// WorkerService and health answers a test scripts.
import http2 from "node:http2";
import type { AddressInfo } from "node:net";
import { create } from "@bufbuild/protobuf";
import { Code, ConnectError, type HandlerContext, type ServiceImpl } from "@connectrpc/connect";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import { WorkerService, TaskHandler, TaskRunner, TaskSchema, type Task } from "../gen/dex/v1/workers_pb.js";
import type { AttemptRef } from "../gen/dex/v1/types_pb.js";
import type { AppendOutputRequest } from "../gen/dex/v1/workers_pb.js";
import type { AttemptFailure, AttemptResult, ModelOutput, ToolSpec } from "../gen/dex/v1/types_pb.js";
import { StepKind } from "../gen/dex/v1/types_pb.js";
import { Health, HealthCheckResponse_ServingStatus } from "../gen/grpc/health/v1/health_pb.js";
import { dial } from "../src/channel.js";
import { Worker, type ModelHandler } from "../src/worker.js";

export interface Call {
  method: string;
  ref?: AttemptRef;
  result?: AttemptResult;
  /** The call's dex-partition metadata (null: none). */
  partition: string | null;
}

export class FakeNode {
  addr = "";
  calls: Call[] = [];
  registered: { tools: ToolSpec[]; runsModel: boolean; workerId: string; agents: string[]; authorization: string | null }[] = [];
  /** Partition 0's tasks: a poll without partition metadata gets these. */
  tasks: Task[] = [];
  /** The partition count each registration answers, in order, the last one again after (none: unset). */
  partitions: number[] = [];
  /** The tasks of partitions 1, 2, ...: a poll gets those of the partition its metadata names. */
  partitionTasks: Record<number, Task[]> = {};
  /** Partitions whose polls answer Unavailable (their leader is down). */
  down = new Set<number>();
  /** Each poll's partition metadata (null: none). */
  polled: (string | null)[] = [];
  /**
   * The most tasks the Worker could hold at once, as seen here: those handed
   * out and not yet reported, plus those asked for by the polls being answered.
   */
  mostHeld = 0;
  private outstanding = 0;
  private asked = 0;
  serving = true;
  /** Refusals to answer, in order, before the method's next call goes through. */
  refuse: Record<string, ConnectError[]> = {};
  deregistered: string[] = [];
  /** Heartbeats answer cancelled from this many on (0: never). */
  cancelAfterHeartbeats = 0;
  /** The trailers each call is answered with (its refusal's too), by method, dex-partition metadata and Step. */
  trailers?: (method: string, partition: string | null, ref?: AttemptRef) => Record<string, string>;
  /** Each AppendOutputs call as it came: its appends' Steps and its dex-partition metadata. */
  appendCalls: { steps: string[]; partition: string | null }[] = [];
  /** Each append of those calls, in order, with its call's dex-partition metadata (also in calls, as "append"). */
  appended: { stepId: string; attempt: number; offset: bigint; text: string; partition: string | null }[] = [];
  /**
   * What the leader holds of each attempt's output (by "stepId/attempt"): an
   * append is taken only at its end, as the hub takes it. Clear it to play a
   * new leader, which wants offset 0.
   */
  output = new Map<string, string>();
  /** Answers every append stop from the first (the attempt over its limit). */
  stopOutput = false;
  /** How long each AppendOutputs call waits before it answers. */
  appendDelayMs = 0;
  private server?: http2.Http2Server;

  private take(ctx: HandlerContext, method: string, ref?: AttemptRef, result?: AttemptResult): void {
    const partition = ctx.requestHeader.get("dex-partition");
    this.calls.push({ method, ref, result, partition });
    for (const [k, v] of Object.entries(this.trailers?.(method, partition, ref) ?? {})) ctx.responseTrailer.set(k, v);
    const e = this.refuse[method]?.shift();
    if (e) throw e;
  }

  /** An AppendOutputs call: each append taken as the hub takes it (a refusal of "appendOutputs" refuses the call whole). */
  private async appendOutputs(appends: AppendOutputRequest[], ctx: HandlerContext): Promise<{ answers: { nextOffset: bigint; stop?: boolean }[] }> {
    const partition = ctx.requestHeader.get("dex-partition");
    this.take(ctx, "appendOutputs");
    this.appendCalls.push({ steps: appends.map((a) => a.ref?.stepId ?? ""), partition });
    if (this.appendDelayMs > 0) await new Promise((r) => setTimeout(r, this.appendDelayMs));
    const answers = [];
    for (const a of appends) {
      this.calls.push({ method: "append", ref: a.ref, partition });
      this.appended.push({ stepId: a.ref?.stepId ?? "", attempt: a.ref?.attempt ?? 0, offset: a.offset, text: a.text, partition });
      if (this.stopOutput) {
        answers.push({ nextOffset: a.offset, stop: true });
        continue;
      }
      const k = `${a.ref?.stepId}/${a.ref?.attempt}`;
      const held = this.output.get(k) ?? "";
      const heldBytes = BigInt(Buffer.byteLength(held, "utf8"));
      if (a.offset !== heldBytes) {
        answers.push({ nextOffset: heldBytes });
        continue;
      }
      this.output.set(k, held + a.text);
      answers.push({ nextOffset: heldBytes + BigInt(Buffer.byteLength(a.text, "utf8")) });
    }
    return { answers };
  }

  async start(): Promise<this> {
    const worker: ServiceImpl<typeof WorkerService> = {
      registerWorker: (req, ctx) => {
        this.take(ctx, "register");
        this.registered.push({ tools: req.tools, runsModel: req.runsModel, workerId: req.workerId, agents: req.agents, authorization: ctx.requestHeader.get("authorization") });
        const partitions = this.partitions[Math.min(this.registered.length - 1, this.partitions.length - 1)] ?? 0;
        return { heartbeatIntervalMs: 100, heartbeatTimeoutMs: 1000, nodeId: "n1", nodeAddress: this.addr, partitions };
      },
      deregisterWorker: (req, ctx) => {
        this.take(ctx, "deregister");
        this.deregistered.push(req.workerId);
        return {};
      },
      pollTask: async (req, ctx) => {
        const partition = ctx.requestHeader.get("dex-partition");
        this.polled.push(partition);
        this.take(ctx, "poll");
        const k = partition === null ? 0 : Number(partition);
        if (this.down.has(k)) throw new ConnectError(`partition ${k} has no leader`, Code.Unavailable);
        this.asked += req.maxTasks;
        this.mostHeld = Math.max(this.mostHeld, this.outstanding + this.asked);
        try {
          const queue = k === 0 ? this.tasks : (this.partitionTasks[k] ?? []);
          const t = queue.splice(0, req.maxTasks || 1);
          this.outstanding += t.length;
          if (t.length === 0) await new Promise((r) => setTimeout(r, 50));
          return { tasks: t };
        } finally {
          this.asked -= req.maxTasks;
        }
      },
      claimTask: (req, ctx) => {
        this.take(ctx, "claim", req.ref);
        return {};
      },
      heartbeat: (req, ctx) => {
        this.take(ctx, "heartbeat", req.ref);
        const n = this.calls.filter((c) => c.method === "heartbeat").length;
        if (this.cancelAfterHeartbeats > 0 && n >= this.cancelAfterHeartbeats) return { cancelled: true, reason: "the session was cancelled" };
        return {};
      },
      reportTask: (req, ctx) => {
        this.take(ctx, "report", req.ref, req.result);
        this.outstanding--;
        return {};
      },
      completeTask: () => ({}),
      failTask: () => ({}),
      // The single form, which this library no longer sends: as a call of one append.
      appendOutput: async (req, ctx) => (await this.appendOutputs([req], ctx)).answers[0],
      appendOutputs: (req, ctx) => this.appendOutputs(req.appends, ctx),
    };
    const health: ServiceImpl<typeof Health> = {
      check: () => ({ status: this.serving ? HealthCheckResponse_ServingStatus.SERVING : HealthCheckResponse_ServingStatus.NOT_SERVING }),
      // eslint-disable-next-line require-yield
      async *watch() {
        throw new ConnectError("not here", Code.Unimplemented);
      },
    };
    this.server = http2.createServer(connectNodeAdapter({
      grpc: true, connect: false, grpcWeb: false,
      routes: (r) => {
        r.service(WorkerService, worker);
        r.service(Health, health);
      },
    }));
    await new Promise<void>((res) => this.server!.listen(0, "127.0.0.1", () => res()));
    this.addr = `127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this;
  }

  of(method: string): Call[] {
    return this.calls.filter((c) => c.method === method);
  }

  async stop(): Promise<void> {
    await new Promise<void>((res) => {
      this.server?.close(() => res());
      // Open sessions would keep close waiting.
      setTimeout(res, 200);
    });
  }
}

/** A dispatched task of kind, runner and handler (a tool call by default). */
export function task(init: Partial<{ kind: StepKind; runner: TaskRunner; handler: TaskHandler; tool: string; callId: string; arguments: string; idempotencyKey: string; stepId: string; attempt: number; agent: string; epoch: bigint }> = {}): Task {
  return create(TaskSchema, {
    ref: { stepId: init.stepId ?? "step-1", attempt: init.attempt ?? 1, token: "tok-1" }, sessionId: "s1",
    kind: init.kind ?? StepKind.CALL_TOOL, runner: init.runner ?? TaskRunner.TOOL, handler: init.handler ?? TaskHandler.TOOL, tool: init.tool ?? "", callId: init.callId ?? "call-1-1", arguments: init.arguments ?? "{}",
    idempotencyKey: init.idempotencyKey ?? "dex:s1:call-1-1", heartbeatIntervalMs: 100, heartbeatTimeoutMs: 1000,
    agent: init.agent ?? "", epoch: init.epoch ?? 0n,
    modelInput: { history: [{ seq: 1n, kind: 1, text: "hi" }] },
  });
}

/** What a Worker reported for one RunModel task: its model output, or its failure. */
export interface ModelReport {
  output?: ModelOutput;
  failure?: AttemptFailure;
}

/**
 * Runs model on one RunModel task per step id against a fake node, with a
 * Worker that stops once every task is reported; the reports by step id.
 */
export async function runModelTasks(model: ModelHandler, steps: string[]): Promise<Map<string, ModelReport>> {
  const node = await new FakeNode().start();
  for (const stepId of steps) node.tasks.push(task({ kind: StepKind.RUN_MODEL, runner: TaskRunner.MODEL, handler: TaskHandler.MODEL, stepId }));
  const ch = dial(node.addr, { token: "" });
  const w = new Worker(ch, { id: "w-model", pollWaitMs: 100, shutdownGraceMs: 500, model });
  const stop = new AbortController();
  const running = w.run(stop.signal);
  try {
    const deadline = Date.now() + 10_000;
    while (node.of("report").length < steps.length) {
      if (Date.now() > deadline) throw new Error("timed out: calls " + JSON.stringify(node.calls.map((c) => c.method)));
      await new Promise((r) => setTimeout(r, 10));
    }
  } finally {
    stop.abort();
    await running;
    ch.close();
    await node.stop();
  }
  const out = new Map<string, ModelReport>();
  for (const r of node.of("report")) {
    const o = r.result?.outcome;
    out.set(r.ref!.stepId, o?.case === "modelOutput" ? { output: o.value } : o?.case === "failure" ? { failure: o.value } : {});
  }
  return out;
}
