import { hostname } from "node:os";
import { clone, create, type MessageInitShape } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient, type CallOptions, type Client as ConnectClient, type Transport } from "@connectrpc/connect";
import { AttemptRefSchema, type AttemptRef } from "../gen/dex/v1/types_pb.js";
import { WorkerService, type Task } from "../gen/dex/v1/workers_pb.js";
import {
  AttemptResultSchema, ErrorType, ModelOutputSchema, ToolAccess, ToolSpecSchema, UsageSchema, type AttemptResult, type HistoryEntry,
  type ModelOutput, type ToolSpec,
} from "../gen/dex/v1/types_pb.js";
import { checkAgentList } from "./agents.js";
import { holderFromEnv, Moments, type Moment } from "./hold.js";
import { Channel, inPartition } from "./channel.js";
import { classifyError, codeOf, messageOf, ModelError, retryAfterMsOf } from "./errors.js";
import { checkModelOutput, kindName } from "./kinds.js";
import { attachLedger, ledgerFromEnv, startLine, type Ledger, type LedgerLine } from "./ledger.js";
import { nopLogger, type Logger } from "./log.js";
import type { TaskOutcome, WorkerMetrics } from "./metrics.js";
import { handlerOf, routeProblem, runsOnModel } from "./route.js";
import { Backoff, PartitionMetadataKey, sleep, transient } from "./retry.js";
import { OutputSender, streamCallTimeoutMs, type OutputStream } from "./stream.js";
import { inTaskSpan } from "./tracing.js";

/** How long a poll waits when a Worker has fewer task slots than partitions. */
const SHARED_SLOT_WAIT_MS = 250;

export { AllMoments, Moments, type Moment } from "./hold.js";

/** What a tool handler is asked to do. */
export interface ToolCall {
  sessionId: string;
  stepId: string;
  callId: string;
  tool: string;
  /** JSON text. */
  arguments: string;
  /** The same in every attempt of a write: pass it to the system the tool changes. */
  idempotencyKey: string;
  attempt: number;
  /** The long-running task to poll (poll handlers only). */
  taskId: string;
  access: ToolAccess;
  /** The dispatch epoch the attempt was started under. */
  epoch: bigint;
  /** The session's agent ("": the default agent). */
  agent: string;
  /** Aborted when the cluster cancels the attempt or the Worker's shutdown grace is over. */
  signal: AbortSignal;
  /**
   * The attempt's place in its turn's trace, a W3C traceparent header
   * ("00-TRACE-SPAN-01"; "" when the turn is not traced): the Worker's span
   * around the handler is its child. For a handler that passes the trace on
   * by hand (through @opentelemetry/api it need not: that span is active
   * while the handler runs). Set by the Worker; absent in a call a test builds.
   */
  traceparent?: string;
  /**
   * Sends text, the next piece of the tool's progress, to the session's
   * watchers as the handler runs (docs/design/streaming.md), as
   * ModelInput.stream does for a model's output; the progress is not the
   * tool's result. It does not wait for the cluster. Set by the Worker for a
   * tool handler (not for a poll handler); absent in a call a test builds.
   */
  stream?: (text: string) => void;
}

/** A tool handler's answer. */
export interface ToolResult {
  content: string;
  /** The tool ran and answered with an error (the call fails; the attempt does not). */
  isError?: boolean;
  /** A long-running tool's start returns the task to poll. */
  taskId?: string;
}

/** A thrown error fails the attempt; the cluster retries by the tool's policy. */
export type ToolHandler = (call: ToolCall) => Promise<ToolResult> | ToolResult;
export type PollHandler = (call: ToolCall) => Promise<{ done: boolean; result?: ToolResult }> | { done: boolean; result?: ToolResult };

export type Access = ToolAccess | "read" | "idempotent_write" | "single_attempt";

/** A tool the Worker serves: its policy and its handlers. */
export interface Tool {
  name: string;
  /** The policy: read (retried), idempotent_write (retried with the same idempotency key) or single_attempt. */
  access: Access;
  description?: string;
  needsApproval?: boolean;
  /** The handler returns a task id, then poll is called every pollIntervalMs until done. */
  longRunning?: boolean;
  pollIntervalMs?: number;
  /** Runs inside RunModel (the model handler runs it); never dispatched as a Step. */
  inline?: boolean;
  /** Attempts of a read or idempotent write (0: the cluster's default, 3). */
  maxAttempts?: number;
  /** How long one attempt may run before the cluster cancels it (0: the cluster's default). */
  runTimeoutMs?: number;
  /** The agents (NAME or NAME@VERSION) whose sessions this Worker serves the tool for; none: every agent. */
  agents?: string[];
  run: ToolHandler;
  /** Required for a long-running tool. */
  poll?: PollHandler;
}

/** What a model handler sees. */
export interface ModelInput {
  sessionId: string;
  stepId: string;
  attempt: number;
  /** History since the last summary. */
  history: HistoryEntry[];
  tools: ToolSpec[];
  /** CompactContext: summarise history. */
  compact: boolean;
  /** The dispatch epoch the attempt was started under. */
  epoch: bigint;
  /** The session's agent, one of WorkerOptions.agents ("": the default agent): a handler that runs several agents picks the model by it. */
  agent: string;
  signal: AbortSignal;
  /** The attempt's W3C traceparent ("" when the turn is not traced), as ToolCall.traceparent. */
  traceparent?: string;
  /**
   * Sends text, the next piece of the model's output, to the session's
   * watchers as the handler produces it (docs/design/streaming.md). It does
   * not wait for the cluster: the Worker keeps the attempt's output and sends
   * it in order, and the handler's result waits up to 2 s for the leader to
   * hold it all. The output the handler returns must be the concatenation of
   * what it streamed (watchers are told when the committed result replaces
   * the stream). Set by the Worker for a RunModel handler; absent in a
   * ModelInput a test builds, and for a compaction.
   */
  stream?: (text: string) => void;
}

/**
 * What one model call used, as its provider reported it (ModelOutput.usage).
 * Counts are whole numbers from 0 to 2^64-1, as numbers or bigints; a field
 * left out is 0.
 */
export interface UsageInit {
  inputTokens?: number | bigint;
  outputTokens?: number | bigint;
  /**
   * The cost in millionths of a currency unit, the Worker's own: Dex adds
   * costs up and never converts them (a price in dollars: Math.round(usd * 1e6)).
   */
  costMicros?: number | bigint;
  /** The model's name, as the provider gave it. */
  model?: string;
}

/** A model output; tool call arguments may be given as an object (sent as JSON). */
export interface ModelOutputInit {
  text?: string;
  toolCalls?: { callId: string; tool: string; arguments?: string | object }[];
  inlineResults?: { callId: string; tool: string; arguments?: string | object; content?: string; isError?: boolean }[];
  /** What the call used; a handler that cannot tell leaves it out. */
  usage?: UsageInit;
}

/**
 * Runs RunModel and CompactContext Steps. A thrown error fails the attempt
 * with the type classifyError gives it: throw a ModelError (or
 * newHttpModelError) to choose it. A rate_limit failure reports the
 * provider's Retry-After (retryAfterMsOf: a ModelError's retryAfterMs, or
 * the response headers a provider SDK's error carries), and the cluster
 * holds the session's provider until then.
 */
export interface ModelHandler {
  run(input: ModelInput): Promise<ModelOutputInit | ModelOutput> | ModelOutputInit | ModelOutput;
  /** Default: the attempt fails ("no compaction function"). */
  compact?(input: ModelInput): Promise<string> | string;
}

export interface WorkerOptions {
  /** Names the Worker; default hostname-pid. */
  id?: string;
  tools?: Tool[];
  /** Makes the Worker run RunModel and CompactContext Steps. */
  model?: ModelHandler;
  /**
   * The agents (NAME or NAME@VERSION, matched exactly) whose model the Worker
   * runs: it gets only their sessions' model Steps. None: the default agent only.
   */
  agents?: string[];
  /** Bounds one RunModel or CompactContext attempt (0: the cluster's default). */
  modelRunTimeoutMs?: number;
  /** Tasks run at once (default 4). */
  concurrency?: number;
  /** How long one PollTask waits for work (default 20 s). */
  pollWaitMs?: number;
  /** Bounds one try of a Worker call (default 10 s); an attempt's calls wait 1-2 s a try. */
  callTimeoutMs?: number;
  /** How long running tasks may go on after run's signal aborts (default 5 s). */
  shutdownGraceMs?: number;
  /**
   * Gets the Worker's log. Without one the Worker writes only the lines that
   * say whether it reached the cluster (why it cannot register, where it
   * registered, that it deregistered) to stderr; nopLogger silences those too.
   */
  logger?: Logger;
  /**
   * Called at the named moments; may wait as long as it likes (heartbeats go
   * on after the claim). Without one, $DEX_HOLD installs the file-based
   * Holder beside $DEX_LEDGER (hold.ts).
   */
  hold?: (moment: Moment, task: Task) => Promise<void> | void;
  /**
   * Counts the tasks by how they ended and times the handlers, under the Go
   * Worker's metric names (metrics.ts); serve its registry with serveMetrics.
   */
  metrics?: WorkerMetrics;
}

const maxUint32 = 0xffffffff;
const builtins = new Set(["ask_user", "sleep", "resume_agent"]);
const minCallTryMs = 1000;
const maxCallTryMs = 2000;
// A Worker that cannot reach the cluster says why at once, then again after
// firstSayGapMs, each later gap doubling up to maxSayGapMs.
const firstSayGapMs = 2000;
const maxSayGapMs = 30_000;
// The one try a stopping Worker gives its deregistration (the TTL
// deregisters it anyway).
const deregisterTryMs = 2000;

/** Spaces repeated lines out: due at once, then after growing gaps. */
export class SayEvery {
  private next = 0;
  private gap = 0;
  due(now: number): boolean {
    if (now < this.next) return false;
    this.gap = this.gap === 0 ? firstSayGapMs : Math.min(2 * this.gap, maxSayGapMs);
    this.next = now + this.gap;
    return true;
  }
}

/** Why a call did not reach the cluster, in a few words: the connect error ("connect ECONNREFUSED …"), or the cluster's answer. */
export function whyNot(err: unknown): string {
  for (let c: unknown = err instanceof ConnectError ? err.cause : undefined; c instanceof Error; c = c.cause) {
    const code = (c as { code?: unknown }).code;
    if (typeof code === "string" && code.startsWith("E") && !code.startsWith("ERR_")) {
      return code === "ECONNREFUSED" ? "connection refused" : c.message;
    }
  }
  return err instanceof ConnectError ? err.rawMessage : messageOf(err);
}

function accessOf(a: Access | undefined, name: string): ToolAccess {
  switch (a) {
    case "read":
    case ToolAccess.READ:
      return ToolAccess.READ;
    case "idempotent_write":
    case ToolAccess.IDEMPOTENT_WRITE:
      return ToolAccess.IDEMPOTENT_WRITE;
    case "single_attempt":
    case ToolAccess.SINGLE_ATTEMPT:
      return ToolAccess.SINGLE_ATTEMPT;
  }
  throw new Error(`tool ${JSON.stringify(name)} has no policy: access must be read, idempotent_write or single_attempt (got ${JSON.stringify(a)})`);
}

function checkMs(v: number | undefined, what: string): number {
  if (v === undefined) return 0;
  if (!Number.isInteger(v) || v < 0 || v > maxUint32) throw new Error(`${what} ${v}: must be a whole number of ms from 0 to ${maxUint32}`);
  return v;
}

/** The ToolSpec a tool registers, checked: a tool without a name, policy or handler is refused. */
export function toolSpec(t: Tool): ToolSpec {
  if (!t || typeof t.name !== "string" || t.name === "") throw new Error("a tool has no name");
  if (builtins.has(t.name)) throw new Error(`tool ${JSON.stringify(t.name)} is a built-in of the cluster`);
  const access = accessOf(t.access, t.name);
  if (typeof t.run !== "function") throw new Error(`tool ${JSON.stringify(t.name)} has no handler`);
  if (t.longRunning && typeof t.poll !== "function") throw new Error(`long-running tool ${JSON.stringify(t.name)} has no poll handler`);
  return create(ToolSpecSchema, {
    name: t.name, access, description: t.description ?? "", needsApproval: !!t.needsApproval, longRunning: !!t.longRunning,
    inline: !!t.inline, maxAttempts: checkMs(t.maxAttempts, `tool ${t.name}: max attempts`),
    pollIntervalMs: checkMs(t.pollIntervalMs, `tool ${t.name}: poll interval`), runTimeoutMs: checkMs(t.runTimeoutMs, `tool ${t.name}: run timeout`),
    agents: checkAgentList(`tool ${JSON.stringify(t.name)} agents`, t.agents),
  });
}

const maxUint64 = (1n << 64n) - 1n;

/** A usage count as the wire's uint64; throws for anything but a whole number from 0 to 2^64-1. */
function usageCount(name: string, v: unknown): bigint {
  if (v === undefined || v === null) return 0n;
  const ok = typeof v === "bigint" ? v >= 0n && v <= maxUint64 : typeof v === "number" && Number.isSafeInteger(v) && v >= 0;
  if (!ok) throw new Error(`usage ${name} must be a whole number from 0 to 2^64-1, not ${typeof v === "string" ? JSON.stringify(v) : String(v)}`);
  return BigInt(v as number | bigint);
}

/** A model output's usage on the wire (undefined: left out); throws for a bad count or model name. */
function toUsage(u: UsageInit | undefined | null): MessageInitShape<typeof UsageSchema> | undefined {
  if (u === undefined || u === null) return undefined;
  if (u.model !== undefined && u.model !== null && typeof u.model !== "string") throw new Error(`usage model must be a string, not a ${typeof u.model}`);
  return {
    inputTokens: usageCount("inputTokens", u.inputTokens), outputTokens: usageCount("outputTokens", u.outputTokens),
    costMicros: usageCount("costMicros", u.costMicros), model: u.model ?? "",
  };
}

/** Turns a model handler's answer into a ModelOutput; throws for a bad usage. */
export function toModelOutput(o: ModelOutputInit | ModelOutput | undefined | null): ModelOutput {
  if (o === undefined || o === null) return create(ModelOutputSchema);
  const args = (a: unknown) => (a === undefined ? "" : typeof a === "string" ? a : JSON.stringify(a));
  return create(ModelOutputSchema, {
    text: o.text ?? "",
    toolCalls: (o.toolCalls ?? []).map((c) => ({ callId: c.callId ?? "", tool: c.tool ?? "", arguments: args(c.arguments) })),
    inlineResults: (o.inlineResults ?? []).map((r) => ({
      callId: r.callId ?? "", tool: r.tool ?? "", arguments: args(r.arguments), content: r.content ?? "", isError: !!r.isError,
    })),
    usage: toUsage(o.usage),
  });
}

/** A handler's result, or its error with the type it fails with (and a rate_limit's Retry-After, 0: none). */
type Outcome = { complete: AttemptResult } | { err: unknown; errType: ErrorType; retryAfterMs?: number };

function failure(errorType: ErrorType, error: string, retryAfterMs = 0): AttemptResult {
  return create(AttemptResultSchema, { outcome: { case: "failure", value: { errorType, error, retryAfterMs: BigInt(retryAfterMs) } } });
}

/** Waits for a promise or an abort, whichever comes first. */
function untilAborted(signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    signal.addEventListener("abort", () => resolve(), { once: true });
  });
}

/**
 * The Worker's task slots (its concurrency), shared by its poll loops. A loop
 * takes free slots before it polls and asks for that many tasks; it gives back
 * those it got no task for, and each task gives its slot back when it ends.
 */
class Slots {
  private waiters: (() => void)[] = [];

  constructor(private free: number, private readonly signal: AbortSignal) {
    signal.addEventListener("abort", () => this.wake(), { once: true });
  }

  /** Waits for a free slot, then takes up to most of the free ones; 0 once signal aborts. */
  async take(most: number): Promise<number> {
    while (this.free <= 0 && !this.signal.aborted) await new Promise<void>((r) => this.waiters.push(r));
    if (this.signal.aborted) return 0;
    const n = Math.min(this.free, most);
    this.free -= n;
    return n;
  }

  give(n: number): void {
    this.free += n;
    if (this.free > 0) this.wake();
  }

  private wake(): void {
    const w = this.waiters;
    this.waiters = [];
    for (const r of w) r();
  }
}

/** Long-polls the cluster for tasks and runs them: see run. */
export class Worker {
  readonly id: string;
  private readonly svc: ConnectClient<typeof WorkerService>;
  private readonly tools = new Map<string, Tool>();
  private readonly specs: ToolSpec[] = [];
  private readonly model: ModelHandler | undefined;
  private readonly agents: string[];
  private readonly log: Logger;
  private readonly o: Required<Pick<WorkerOptions, "concurrency" | "pollWaitMs" | "callTimeoutMs" | "shutdownGraceMs" | "modelRunTimeoutMs">>;
  private readonly holdHook: WorkerOptions["hold"];
  private readonly metrics: WorkerMetrics | undefined;
  private heartbeatIntervalMs = 1000;
  private registered = false;
  /** How many partitions the cluster has (its registration says): one poll loop each. */
  private partitions = 1;
  /** Called when a registration changes partitions. */
  private resized: () => void = () => {};
  /** The live output senders, by the partition its tasks were polled from. */
  private readonly outputSenders = new Map<number, OutputSender>();
  /** No logger given: the registration lines go to stderr. */
  private readonly sayToStderr: boolean;
  private readonly transport: Transport;
  /** The execution ledger, when $DEX_LEDGER names a file (ledger.ts). */
  readonly ledger: Ledger | undefined;

  /** Checks opts (throwing on bad input) and makes a Worker on transport (see dial). */
  constructor(transport: Transport, opts: WorkerOptions) {
    this.id = opts.id || `${hostname()}-${process.pid}`;
    if (Buffer.byteLength(this.id) > 200) throw new Error("a Worker id is at most 200 bytes");
    for (const t of opts.tools ?? []) {
      const spec = toolSpec(t);
      if (this.tools.has(spec.name)) throw new Error(`tool ${JSON.stringify(spec.name)} registered twice`);
      this.tools.set(spec.name, t);
      this.specs.push(spec);
    }
    if (opts.model !== undefined && (opts.model === null || typeof opts.model.run !== "function")) {
      throw new Error("the model handler has no run function");
    }
    this.model = opts.model;
    this.agents = checkAgentList("worker agents", opts.agents);
    if (this.agents.length > 0 && !this.model) {
      throw new Error("agents are listed but the Worker runs no model: list a tool's agents in its agents");
    }
    if (this.tools.size === 0 && !this.model) throw new Error("a Worker needs a tool or a model");
    const positive = (v: number | undefined, d: number, what: string) => {
      if (v === undefined || v === 0) return d;
      if (!Number.isFinite(v) || v < 0) throw new Error(`${what} must be positive (got ${v})`);
      return v;
    };
    this.o = {
      concurrency: Math.floor(positive(opts.concurrency, 4, "concurrency")),
      pollWaitMs: positive(opts.pollWaitMs, 20_000, "poll wait"),
      callTimeoutMs: positive(opts.callTimeoutMs, 10_000, "call timeout"),
      shutdownGraceMs: positive(opts.shutdownGraceMs, 5_000, "shutdown grace"),
      modelRunTimeoutMs: checkMs(opts.modelRunTimeoutMs, "model run timeout"),
    };
    this.log = opts.logger ?? nopLogger;
    this.sayToStderr = opts.logger === undefined;
    this.transport = transport;
    this.holdHook = opts.hold ?? holderFromEnv()?.hold;
    this.metrics = opts.metrics;
    this.svc = createClient(WorkerService, transport);
    this.ledger = ledgerFromEnv();
  }

  /**
   * Registers the Worker (retrying until the cluster answers), then long-polls
   * and runs up to concurrency tasks at once until signal aborts: one poll loop
   * per partition of the cluster, sharing the concurrency. Then it stops
   * polling, lets running tasks finish for shutdownGraceMs, aborts what is left,
   * deregisters and resolves: at once when no task runs. It rejects only if
   * the cluster refuses the registration.
   */
  async run(signal: AbortSignal = new AbortController().signal): Promise<void> {
    const tasks = new AbortController(); // tasks outlive signal by the grace
    try {
      await this.register(signal);
    } catch (e) {
      if (signal.aborted) return;
      throw e;
    }
    const running = new Set<Promise<void>>();
    await this.pollPartitions(signal, tasks.signal, running);
    const all = Promise.all(running);
    // The grace's timers end with the tasks: a pending one would keep the
    // process alive after run resolves.
    const timers = new AbortController();
    try {
      const graceOver = await Promise.race([all.then(() => false), sleep(this.o.shutdownGraceMs, timers.signal).then(() => true)]);
      if (graceOver) {
        this.log.warn("shutdown grace over; cancelling running tasks");
        tasks.abort(new Error("the Worker is shutting down"));
        const stuck = await Promise.race([all.then(() => false), sleep(2000, timers.signal).then(() => true)]);
        if (stuck) this.log.warn("tasks still running at exit");
      }
    } finally {
      timers.abort();
    }
    await this.deregister();
  }

  /**
   * Runs a poll loop per partition until signal aborts, following the
   * partition count each registration gives; the loops share the
   * concurrency's slots. A loop's unexpected error stops every loop, then
   * rejects.
   */
  private async pollPartitions(signal: AbortSignal, taskSignal: AbortSignal, running: Set<Promise<void>>): Promise<void> {
    const polling = new AbortController();
    const onAbort = () => polling.abort();
    signal.addEventListener("abort", onAbort, { once: true });
    if (signal.aborted) polling.abort();
    const slots = new Slots(this.o.concurrency, polling.signal);
    const loops = new Map<number, Promise<number>>();
    try {
      while (!polling.signal.aborted) {
        for (let k = 0; k < this.partitions; k++) {
          if (!loops.has(k)) loops.set(k, this.pollLoop(k, polling.signal, taskSignal, slots, running).then(() => k));
        }
        const resized = new Promise<number>((r) => (this.resized = () => r(-1)));
        const ended = await Promise.race([...loops.values(), resized, untilAborted(polling.signal).then(() => -1)]);
        loops.delete(ended);
      }
    } finally {
      polling.abort();
      signal.removeEventListener("abort", onAbort);
      this.resized = () => {};
      await Promise.allSettled(loops.values());
    }
  }

  /**
   * Partition k's poll loop, while the cluster has more than k partitions and
   * signal has not aborted: takes free slots, polls for that many tasks and
   * runs them.
   */
  private async pollLoop(k: number, signal: AbortSignal, taskSignal: AbortSignal, slots: Slots, running: Set<Promise<void>>): Promise<void> {
    while (!signal.aborted && k < this.partitions) {
      // With several partitions a loop asks for its share at most, so that a
      // long poll of an idle partition does not hold every slot while another
      // partition has work.
      const n = await slots.take(Math.max(1, Math.floor(this.o.concurrency / this.partitions)));
      if (n === 0) return;
      const got = await this.poll(signal, n, k);
      slots.give(n - got.length);
      for (const t of got) {
        const p = this.runTask(taskSignal, t, k).catch((e) => this.log.error("task crashed", { error: e }))
          .finally(() => {
            running.delete(p);
            slots.give(1);
          });
        running.add(p);
      }
    }
  }

  /** Follows the partition count a registration gave (0: one): the poll loops change from their next poll. */
  private setPartitions(first: boolean, count: number): void {
    const was = this.partitions;
    const n = Math.max(count, 1);
    if (n === was) return;
    this.partitions = n;
    if (first) this.log.info("polling every partition", { worker: this.id, partitions: n });
    else this.log.info("the cluster's partition count changed; polling the new count from the next poll", { worker: this.id, was, partitions: n });
    if (n > this.o.concurrency) {
      this.log.warn("fewer task slots than partitions: a partition is polled only while a slot is free",
        { worker: this.id, concurrency: this.o.concurrency, partitions: n });
    }
    this.resized();
  }

  /** One line about the Worker's registration: to its logger, or to stderr when it was given none. */
  private say(level: "info" | "warn" | "error", msg: string, fields?: Record<string, unknown>): void {
    if (this.sayToStderr) {
      process.stderr.write(`dex worker ${this.id}: ${msg}\n`);
      return;
    }
    this.log[level](msg, { worker: this.id, ...fields });
  }

  /** The addresses the Worker dials, for its lines. */
  private where(): string {
    return this.transport instanceof Channel ? this.transport.addrs.join(",") : "the cluster";
  }

  /** Tells the cluster, as the Worker stops, that it is gone, so that it does not look alive until its TTL runs out. */
  private async deregister(): Promise<void> {
    if (!this.registered) return;
    try {
      await this.svc.deregisterWorker({ workerId: this.id }, { timeoutMs: Math.min(deregisterTryMs, this.o.callTimeoutMs) });
    } catch (e) {
      if (codeOf(e) === Code.Unimplemented) {
        this.log.debug("the cluster cannot deregister a Worker; it drops it after its TTL");
        return;
      }
      this.say("warn", `could not deregister from ${this.where()}: ${whyNot(e)}; the cluster drops the Worker after its TTL`, { error: e });
      return;
    }
    this.registered = false;
    this.say("info", "deregistered");
  }

  private async register(signal: AbortSignal): Promise<void> {
    const req = { workerId: this.id, tools: this.specs, runsModel: !!this.model, modelRunTimeoutMs: this.o.modelRunTimeoutMs, agents: this.agents };
    const b = new Backoff(50, 250);
    const says = new SayEvery();
    const start = Date.now();
    let failed = false;
    for (;;) {
      try {
        const resp = await this.svc.registerWorker(req, { signal, timeoutMs: this.o.callTimeoutMs });
        if (resp.heartbeatIntervalMs > 0) this.heartbeatIntervalMs = resp.heartbeatIntervalMs;
        const first = !this.registered;
        this.registered = true;
        let line = resp.nodeId !== "" ? `registered with leader ${resp.nodeId} at ${resp.nodeAddress}` : `registered with the cluster at ${this.where()}`;
        if (failed) line += ` after ${Math.round((Date.now() - start) / 1000)}s`;
        this.say("info", line, {
          leader: resp.nodeId, leader_address: resp.nodeAddress, tools: this.specs.length, runs_model: !!this.model,
          heartbeat_interval_ms: resp.heartbeatIntervalMs, heartbeat_timeout_ms: resp.heartbeatTimeoutMs,
        });
        this.setPartitions(first, resp.partitions);
        return;
      } catch (e) {
        if (signal.aborted) throw e;
        if (!transient(e, signal)) {
          const err = new Error(`register worker ${this.id} with ${this.where()}: ${messageOf(e)}`, { cause: e });
          this.say("error", err.message);
          throw err;
        }
        if (says.due(Date.now())) {
          let line = `cannot register with ${this.where()}: ${whyNot(e)}; retrying`;
          if (failed) line += ` (for ${Math.round((Date.now() - start) / 1000)}s now)`;
          this.say("warn", line, { error: e });
        } else {
          this.log.debug("register: cluster not ready", { error: e });
        }
        failed = true;
        await sleep(b.next(), signal);
      }
    }
  }

  /**
   * Long-polls partition k once for up to n tasks; [] on a timeout, an error
   * (after a backoff), an abort, or once the cluster has no partition k.
   */
  private async poll(signal: AbortSignal, n: number, k = 0): Promise<Task[]> {
    const b = new Backoff(50, 250);
    while (!signal.aborted && k < this.partitions) {
      // A cluster of one partition gets no partition metadata.
      const partitioned = this.partitions > 1;
      const headers = partitioned ? { [PartitionMetadataKey]: String(k) } : undefined;
      const log = partitioned ? withFields(this.log, { partition: k }) : this.log;
      try {
        // A poll holds its slot while it waits: with fewer slots than
        // partitions the loops poll briefly in turn, so no partition waits
        // a whole poll wait behind an idle one.
        const waitMs = this.partitions > this.o.concurrency ? Math.min(this.o.pollWaitMs, SHARED_SLOT_WAIT_MS) : this.o.pollWaitMs;
        const resp = await this.svc.pollTask({ workerId: this.id, waitMs: Math.floor(waitMs), maxTasks: n },
          { signal, timeoutMs: waitMs + this.o.callTimeoutMs, headers, ...inPartition(k) });
        return resp.tasks;
      } catch (e) {
        if (signal.aborted) return [];
        const code = codeOf(e);
        if (code === Code.NotFound || code === Code.FailedPrecondition) {
          // The cluster does not know this Worker (any more): register again.
          log.warn("poll refused; registering again", { error: e });
          try {
            await this.register(signal);
          } catch (re) {
            if (!signal.aborted) log.error("register again", { error: re });
          }
        } else if (transient(e, signal)) {
          log.debug("poll: cluster not reachable", { error: e });
        } else {
          log.error("poll", { error: e });
        }
        await sleep(b.next(), signal);
      }
    }
    return [];
  }

  private async hold(moment: Moment, t: Task): Promise<void> {
    if (this.holdHook) await this.holdHook(moment, t);
  }

  /** How long one try of an attempt's call waits: the heartbeat interval within 1-2 s, at most callTimeoutMs. */
  private callTry(t: Task): number {
    const interval = t.heartbeatIntervalMs > 0 ? t.heartbeatIntervalMs : this.heartbeatIntervalMs;
    return Math.min(Math.max(interval, minCallTryMs), maxCallTryMs, this.o.callTimeoutMs);
  }

  /**
   * Runs one logged Worker call of a task polled from partition k, repeating
   * the same request across transient errors until the cluster answers or
   * signal aborts; the first repeat goes at once, later ones back off.
   * Returns the cluster's definite refusal, or undefined on success.
   */
  private async send(log: Logger, what: string, k: number, tryMs: number, signal: AbortSignal,
    f: (o: CallOptions) => Promise<unknown>): Promise<unknown> {
    const b = new Backoff(50, 250);
    for (let tries = 1; ; tries++) {
      try {
        await f({ signal, timeoutMs: tryMs, ...inPartition(k) });
        if (tries > 1) log.info(`${what} went through after retries`, { tries });
        return undefined;
      } catch (e) {
        if (signal.aborted || !transient(e, signal)) return e;
        if (codeOf(e) === Code.DeadlineExceeded) {
          // A node that took the whole try may be alive but slow: each
          // timed-out try doubles the next, up to callTimeoutMs.
          tryMs = Math.min(2 * tryMs, Math.max(this.o.callTimeoutMs, tryMs));
        }
        if (tries === 1) {
          log.warn(`${what}: cluster not reachable; retrying the same call`, { error: e });
          continue;
        }
        if (!(await sleep(b.next(), signal))) return e;
      }
    }
  }

  private report(log: Logger, what: string, k: number, tryMs: number, signal: AbortSignal, ref: AttemptRef, result: AttemptResult): Promise<unknown> {
    return this.send(log, what, k, tryMs, signal, (o) => this.svc.reportTask({ ref, result }, o));
  }

  private cannotRun(t: Task): string {
    const why = routeProblem(t);
    if (why !== "") return `worker ${this.id} cannot run a ${kindName(t.kind)} Step: ${why}`;
    if (runsOnModel(t)) return this.model ? "" : `worker ${this.id} runs no model`;
    return this.tools.has(t.tool) ? "" : `worker ${this.id} has no tool ${JSON.stringify(t.tool)}`;
  }

  /** Runs task t, polled from partition k, and counts how it ended. */
  private async runTask(signal: AbortSignal, t: Task, k: number): Promise<void> {
    const ended: { outcome: TaskOutcome } = { outcome: "report_refused" }; // unless the task says otherwise
    try {
      await this.runTaskOnce(signal, t, k, ended);
    } finally {
      this.metrics?.task(t.kind, ended.outcome);
    }
  }

  /** Runs task t, polled from partition k: its calls go to that partition's leader (inPartition); sets how it ended. */
  private async runTaskOnce(signal: AbortSignal, t: Task, k: number, ended: { outcome: TaskOutcome }): Promise<void> {
    const ref: AttemptRef = t.ref ? clone(AttemptRefSchema, t.ref) : create(AttemptRefSchema);
    const log = withFields(this.log, { session: t.sessionId, step: ref.stepId, attempt: ref.attempt, kind: kindName(t.kind), tool: t.tool });
    log.info("task received");

    // A task this Worker cannot run fails unclaimed: the call did not run.
    const why = this.cannotRun(t);
    if (why !== "") {
      ref.seq = 1n;
      const err = await this.report(log, "fail", k, this.callTry(t), signal, ref, failure(ErrorType.UNSPECIFIED, why));
      log.error("cannot run task", { reason: why, error: err });
      ended.outcome = "cannot_run";
      return;
    }

    await this.hold(Moments.beforeClaim, t);
    ref.seq = 1n;
    const claimErr = await this.send(log, "claim", k, this.callTry(t), signal, (o) => this.svc.claimTask({ ref }, o));
    if (claimErr !== undefined) {
      log.warn("claim refused; dropping the task", { error: claimErr });
      ended.outcome = "claim_refused";
      return;
    }
    log.debug("claimed");

    // The handler's signal: aborted when the cluster cancels the attempt or
    // the shutdown grace is over.
    const handler = new AbortController();
    const onStop = () => handler.abort(signal.reason);
    signal.addEventListener("abort", onStop, { once: true });
    let handlerDone = false;
    let cancelled = "";
    const hb = new AbortController();
    const hbDone = this.heartbeat(hb.signal, log, t, k, ref, (reason) => {
      if (!handlerDone && cancelled === "") {
        cancelled = reason || "the attempt was cancelled";
        handler.abort(new ModelError(ErrorType.UNSPECIFIED, `attempt cancelled by the cluster: ${cancelled}`));
      }
    });
    const stopHeartbeats = async () => {
      hb.abort();
      await hbDone;
    };
    try {
      await this.hold(Moments.afterClaim, t);
      const started = performance.now();
      let out = await this.invoke(handler.signal, signal, t, ref.attempt, k);
      this.metrics?.handled(t.kind, "complete" in out, (performance.now() - started) / 1000);
      handlerDone = true;
      if (!("err" in out && out.err instanceof LedgerStartError)) await this.hold(Moments.beforeResult, t);
      if (cancelled !== "") {
        log.warn("attempt cancelled by the cluster; dropped", { reason: cancelled });
        ended.outcome = "cancelled";
        return;
      }
      // Shutting down: report what we have, briefly.
      const rsignal = signal.aborted ? AbortSignal.timeout(2000) : signal;
      ref.seq = 2n;
      if ("complete" in out) {
        const err = await this.report(log, "complete", k, this.callTry(t), rsignal, ref, out.complete);
        if (err === undefined) {
          await stopHeartbeats();
          log.info("task completed");
          ended.outcome = "completed";
          await this.hold(Moments.afterResultSent, t);
          return;
        }
        const code = codeOf(err);
        if (code === Code.InvalidArgument || code === Code.ResourceExhausted) {
          // The result itself was refused and nothing was logged: fail the
          // attempt with the reason, under the same seq.
          log.error("result refused; failing the attempt", { error: err });
          out = { err: new Error(`result refused by the cluster: ${messageOf(err)}`), errType: ErrorType.UNSPECIFIED };
        } else {
          log.warn("complete refused; dropping the task", { error: err });
          return;
        }
      }
      const msg = out.err instanceof Error ? out.err.message : String(out.err);
      const retryAfterMs = out.retryAfterMs ?? 0;
      const err = await this.report(log, "fail", k, this.callTry(t), rsignal, ref, failure(out.errType, msg, retryAfterMs));
      if (err !== undefined) {
        log.warn("fail refused; dropping the task", { error: err });
        return;
      }
      await stopHeartbeats();
      ended.outcome = "failed";
      log.info("task failed", { error: msg, error_type: `ERROR_TYPE_${ErrorType[out.errType]}`, ...(retryAfterMs > 0 ? { retry_after_ms: retryAfterMs } : {}) });
    } finally {
      signal.removeEventListener("abort", onStop);
      await stopHeartbeats();
    }
  }

  /**
   * Runs the handler for t, between its start and end lines in the execution
   * ledger if there is one. A start line that cannot be written fails the
   * attempt without running the handler: the run would go uncounted.
   */
  private async invoke(hsignal: AbortSignal, taskSignal: AbortSignal, t: Task, attempt: number, k: number): Promise<Outcome> {
    if (this.ledger === undefined) return this.invokeHandler(hsignal, taskSignal, t, attempt, k);
    const line = startLine(t, this.id);
    const out = await this.invokeHandler(hsignal, taskSignal, t, attempt, k, line);
    if ("err" in out && out.err instanceof LedgerStartError) return out;
    const outcome = "complete" in out ? "ok" : hsignal.aborted ? "cancelled" : "error";
    try {
      this.ledger.append({ ...line, phase: "end", outcome });
    } catch (e) {
      this.log.error("ledger end line not written", { step: line.step, error: e });
    }
    return out;
  }

  /** Writes the start line right before a handler (after its hold). */
  private ledgerStart(line: LedgerLine | undefined): void {
    if (line === undefined || this.ledger === undefined) return;
    try {
      this.ledger.append(line);
    } catch (e) {
      throw new LedgerStartError(`the handler did not run: its ledger start line was not written: ${(e as Error).message}`);
    }
  }

  /** The live output of t's attempt, polled from partition k, sent by that partition's sender. */
  private outputStream(t: Task, k: number): OutputStream {
    return this.outputSender(k).open({ stepId: t.ref?.stepId ?? "", attempt: t.ref?.attempt ?? 0, token: t.ref?.token ?? "" });
  }

  /**
   * The sender of the live output of partition k's attempts, made on first
   * use. Its AppendOutputs calls carry the partition's metadata, as the
   * partition's polls do (none in a cluster of one partition), and go to
   * its leader.
   */
  private outputSender(k: number): OutputSender {
    let s = this.outputSenders.get(k);
    if (s === undefined) {
      s = new OutputSender(async (appends) => {
        const headers = this.partitions > 1 ? { [PartitionMetadataKey]: String(k) } : undefined;
        const resp = await this.svc.appendOutputs({ appends },
          { timeoutMs: Math.min(streamCallTimeoutMs, this.o.callTimeoutMs), headers, ...inPartition(k) });
        return resp.answers;
      });
      this.outputSenders.set(k, s);
    }
    return s;
  }

  /** Runs the handler for t, polled from partition k; a throw becomes a failure with its error type. */
  private async invokeHandler(hsignal: AbortSignal, taskSignal: AbortSignal, t: Task, attempt: number, k: number, line?: LedgerLine): Promise<Outcome> {
    const h = handlerOf(t);
    // The attempt's live output: sent from the handler's first write, stopped when the attempt ends here.
    const live = h === "model" || h === "tool" ? this.outputStream(t, k) : undefined;
    try {
      const mi = t.modelInput;
      const input = (stream?: OutputStream): ModelInput => ({
        sessionId: t.sessionId, stepId: t.ref?.stepId ?? "", attempt, history: mi?.history ?? [], tools: mi?.tools ?? [],
        compact: mi?.compact ?? false, epoch: t.epoch, agent: t.agent, signal: hsignal, traceparent: t.traceparent,
        ...(stream ? { stream: (text: string) => stream.write(text) } : {}),
      });
      const call: ToolCall = {
        sessionId: t.sessionId, stepId: t.ref?.stepId ?? "", callId: t.callId, tool: t.tool, arguments: t.arguments,
        idempotencyKey: t.idempotencyKey, attempt, taskId: t.taskId, access: t.access, epoch: t.epoch, agent: t.agent,
        signal: hsignal, traceparent: t.traceparent,
      };
      if (line !== undefined && this.ledger !== undefined) attachLedger(call, this.ledger, line);
      switch (h) {
        case "model": {
          await this.hold(Moments.beforeModel, t);
          this.ledgerStart(line);
          const mo = await inTaskSpan(t, async () => toModelOutput(await this.model!.run(input(live))));
          await live!.finish();
          // The cluster refuses such an output; fail the attempt with the
          // reason instead of sending it (unknown: another try may do better).
          const bad = checkModelOutput(mo);
          if (bad !== "") throw new ModelError(ErrorType.UNKNOWN, `the model handler's output was not sent: ${bad}`);
          return { complete: create(AttemptResultSchema, { outcome: { case: "modelOutput", value: mo } }) };
        }
        case "compact": {
          await this.hold(Moments.duringCompaction, t);
          if (!this.model!.compact) throw new Error("no compaction function");
          this.ledgerStart(line);
          const s = await inTaskSpan(t, () => this.model!.compact!(input()));
          return { complete: create(AttemptResultSchema, { outcome: { case: "summary", value: s } }) };
        }
        case "poll": {
          const tool = this.tools.get(t.tool)!;
          if (!tool.poll) throw new Error(`tool ${JSON.stringify(t.tool)} has no poll handler`);
          await this.hold(Moments.duringPoll, t);
          this.ledgerStart(line);
          const r = await inTaskSpan(t, () => tool.poll!(call));
          const value: MessageInitShape<typeof AttemptResultSchema> = {
            outcome: { case: "pollResult", value: { done: !!r.done, result: r.done ? toolResultInit(r.result) : undefined } },
          };
          return { complete: create(AttemptResultSchema, value) };
        }
        case "tool": {
          const tool = this.tools.get(t.tool)!;
          await this.hold(Moments.toolRunning, t);
          this.ledgerStart(line);
          call.stream = (text: string) => live!.write(text);
          const r = await inTaskSpan(t, () => tool.run(call));
          await live!.finish();
          return { complete: create(AttemptResultSchema, { outcome: { case: "toolResult", value: toolResultInit(r) } }) };
        }
        default:
          throw new Error(`no handler ${t.handler}`); // cannotRun refused it first
      }
    } catch (err) {
      const errType = handlerErrorType(runsOnModel(t), err, taskSignal);
      return { err, errType, retryAfterMs: errType === ErrorType.RATE_LIMIT ? retryAfterMsOf(err) : 0 };
    } finally {
      live?.stop();
    }
  }

  /** Keeps the attempt alive until signal aborts; cancel is called when the cluster says it is no longer current. */
  private async heartbeat(signal: AbortSignal, log: Logger, t: Task, k: number, ref: AttemptRef, cancel: (reason: string) => void): Promise<void> {
    const interval = t.heartbeatIntervalMs > 0 ? t.heartbeatIntervalMs : this.heartbeatIntervalMs;
    // Heartbeats carry the seq of the last logged call (the claim).
    const hbRef = create(AttemptRefSchema, { stepId: ref.stepId, attempt: ref.attempt, token: ref.token, seq: 1n });
    let failing = false;
    while (await sleep(interval, signal)) {
      try {
        const resp = await this.svc.heartbeat({ ref: hbRef }, { signal, timeoutMs: this.callTry(t), ...inPartition(k) });
        if (signal.aborted) return;
        if (resp.cancelled) {
          cancel(resp.reason);
          return;
        }
        if (failing) {
          log.info("heartbeats reach the cluster again");
          failing = false;
        }
      } catch (e) {
        if (signal.aborted) return;
        const code = codeOf(e);
        if (code === Code.FailedPrecondition || code === Code.NotFound) {
          cancel(messageOf(e));
          return;
        }
        if (!failing) {
          log.warn("heartbeat failed; going on", { error: e });
          failing = true;
        }
      }
    }
  }
}

/** The handler did not run: its ledger start line was not written. */
class LedgerStartError extends Error {}

function toolResultInit(r: ToolResult | undefined) {
  return { content: r?.content ?? "", isError: !!r?.isError, taskId: r?.taskId ?? "" };
}

/**
 * The error type a handler's error is reported with: a model handler's is
 * classified (a plain error is unknown, never untyped) unless the Worker
 * itself aborted it at shutdown (untyped, as a crash); a tool handler's has a
 * type only if it is a ModelError.
 */
function handlerErrorType(onModel: boolean, err: unknown, taskSignal: AbortSignal): ErrorType {
  if (!onModel) return err instanceof ModelError ? err.type : ErrorType.UNSPECIFIED;
  if (!(err instanceof ModelError) && taskSignal.aborted) return ErrorType.UNSPECIFIED;
  return classifyError(err);
}

function withFields(log: Logger, f: Record<string, unknown>): Logger {
  return {
    debug: (m, x) => log.debug(m, { ...f, ...x }),
    info: (m, x) => log.info(m, { ...f, ...x }),
    warn: (m, x) => log.warn(m, { ...f, ...x }),
    error: (m, x) => log.error(m, { ...f, ...x }),
  };
}

export { ConnectError };
