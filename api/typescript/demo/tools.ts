import { createHash } from "node:crypto";
import type { ModelInput, ModelOutputInit, Tool, ToolCall, ToolResult } from "../src/index.js";
import type { Ledger } from "./ledger.js";
import { wait } from "./script.js";

// The demo tools of cmd/dexworker/tools.go, one per policy. Every execution
// appends a ledger line before it does anything else. Arguments every tool
// understands (for tests): "sleep_ms": N (run this long, cancellable),
// "fail_attempts": N (attempts 1..N fail), "error_result": true.

/** How many polls of a build report "running". */
const buildPollsRunning = 2;

interface ToolArgs {
  sleep_ms?: number;
  fail_attempts?: number;
  error_result?: boolean;
}

function testArgs(json: string): ToolArgs {
  try {
    const v = JSON.parse(json);
    if (typeof v !== "object" || v === null) return {};
    return {
      sleep_ms: Number.isInteger(v.sleep_ms) ? v.sleep_ms : 0,
      fail_attempts: Number.isInteger(v.fail_attempts) ? v.fail_attempts : 0,
      error_result: v.error_result === true,
    };
  } catch {
    return {}; // arguments are free-form
  }
}

/** strconv.FormatFloat(x, 'g', -1, 64): the shortest digits, in e-notation when the exponent is below -4 or 6 and above. */
export function goFloat(x: number): string {
  if (Number.isNaN(x)) return "NaN";
  if (!Number.isFinite(x)) return x > 0 ? "+Inf" : "-Inf";
  if (x === 0) return Object.is(x, -0) ? "-0" : "0";
  const e = x.toExponential(); // shortest digits
  const [mant, expS] = e.split("e");
  const exp = Number(expS);
  if (exp < -4 || exp >= 6) {
    const sign = exp < 0 ? "-" : "+";
    const abs = String(Math.abs(exp)).padStart(2, "0");
    return `${mant}e${sign}${abs}`;
  }
  return String(x);
}

export function calculate(args: string): { content: string; isError: boolean } {
  let c: { a?: unknown; b?: unknown; op?: unknown };
  try {
    c = JSON.parse(args);
    if (typeof c !== "object" || c === null || Array.isArray(c)) throw new Error("want an object");
    for (const k of ["a", "b"] as const) {
      if (c[k] !== undefined && c[k] !== null && typeof c[k] !== "number") throw new Error(`field ${k} is not a number`);
    }
    if (c.op !== undefined && c.op !== null && typeof c.op !== "string") throw new Error("field op is not a string");
  } catch (e) {
    return { content: "calc: bad arguments: " + (e as Error).message, isError: true };
  }
  const a = (c.a as number) ?? 0;
  const b = (c.b as number) ?? 0;
  switch (c.op ?? "") {
    case "":
    case "+":
      return { content: goFloat(a + b), isError: false };
    case "-":
      return { content: goFloat(a - b), isError: false };
    case "*":
      return { content: goFloat(a * b), isError: false };
  }
  return { content: `calc: unknown op ${JSON.stringify(c.op)}`, isError: true };
}

export class DemoTools {
  private readonly polls = new Map<string, number>(); // long-running task id → polls so far

  constructor(private readonly ledger: Ledger, private readonly worker: string, private readonly pollIntervalMs = 200,
    private readonly runTimeouts: Map<string, number> = new Map()) {}

  tools(): Tool[] {
    const tools: Tool[] = [
      { name: "lookup", access: "read", description: "Looks something up.", run: this.simple("found") },
      { name: "save_note", access: "idempotent_write", description: "Saves a note.", run: this.simple("saved") },
      { name: "send_email", access: "single_attempt", description: "Sends an email (not idempotent).", run: this.simple("sent") },
      { name: "deploy", access: "idempotent_write", description: "Deploys a service; needs approval.", needsApproval: true, run: this.simple("deployed") },
      {
        name: "build", access: "idempotent_write", description: "Starts a build and returns its task id; polled until done.",
        longRunning: true, pollIntervalMs: this.pollIntervalMs > 0 ? Math.floor(this.pollIntervalMs) : 200, run: this.buildStart, poll: this.buildPoll,
      },
      {
        name: "calc", access: "read", description: "Adds, subtracts or multiplies two numbers; inline: runs inside the model call.",
        inline: true, run: this.calcStep,
      },
    ];
    for (const t of tools) t.runTimeoutMs = Math.floor(this.runTimeouts.get(t.name) ?? 0);
    return tools;
  }

  /** Records the execution and applies the test arguments. */
  private async begin(c: {
    sessionId: string; callId: string; attempt: number; idempotencyKey: string; stepId: string; taskId: string; arguments: string; signal: AbortSignal;
    epoch?: bigint;
  },
    tool: string, kind: string): Promise<ToolArgs> {
    const a = testArgs(c.arguments);
    this.ledger.append({
      session: c.sessionId, call_id: c.callId, tool, attempt: c.attempt, idempotency_key: c.idempotencyKey, step: c.stepId, kind,
      task_id: c.taskId, worker: this.worker, epoch: c.epoch,
    });
    await wait(a.sleep_ms, c.signal);
    if (c.attempt <= (a.fail_attempts ?? 0)) throw new Error(`${tool}: scripted failure of attempt ${c.attempt}`);
    return a;
  }

  private simple(answer: string) {
    return async (c: ToolCall): Promise<ToolResult> => {
      const a = await this.begin(c, c.tool, "tool");
      if (a.error_result) return { content: `${c.tool} failed: scripted error result`, isError: true };
      return { content: `${answer} ${c.arguments}` };
    };
  }

  /** Starts a build: the task id is derived from the idempotency key, so every attempt names the same task. */
  private buildStart = async (c: ToolCall): Promise<ToolResult> => {
    const a = await this.begin(c, c.tool, "tool");
    if (a.error_result) return { content: "build failed to start", isError: true };
    const key = c.idempotencyKey || `${c.sessionId}/${c.callId}`;
    const id = "build-" + createHash("sha256").update(key).digest("hex").slice(0, 12);
    return { content: "build started: " + id, taskId: id };
  };

  /** Reports "running" for the first polls of a task this process has seen, then done. */
  private buildPoll = async (c: ToolCall): Promise<{ done: boolean; result?: ToolResult }> => {
    await this.begin(c, c.tool + ".poll", "poll");
    const n = (this.polls.get(c.taskId) ?? 0) + 1;
    this.polls.set(c.taskId, n);
    if (n <= buildPollsRunning) return { done: false };
    return { done: true, result: { content: `build ${c.taskId} succeeded` } };
  };

  /** A calc call the cluster dispatched as a Step, which it never should: an inline tool runs inside RunModel. */
  private calcStep = async (): Promise<ToolResult> => {
    throw new Error("calc is inline: it runs inside the model call, not as a Step");
  };

  /** Runs the inline calls of a model output inside the RunModel attempt, each with a ledger line (kind "inline"). */
  inline = async (input: ModelInput, calls: NonNullable<ModelOutputInit["inlineResults"]>): Promise<void> => {
    for (const r of calls) {
      const args = typeof r.arguments === "string" ? r.arguments : JSON.stringify(r.arguments ?? {});
      const a = await this.begin({
        sessionId: input.sessionId, callId: r.callId, attempt: input.attempt, idempotencyKey: "", stepId: input.stepId, taskId: "",
        arguments: args, signal: input.signal,
      }, r.tool, "inline");
      const res = calculate(args);
      r.content = res.content;
      r.isError = res.isError;
      if (a.error_result) {
        r.content = `${r.tool} failed: scripted error result`;
        r.isError = true;
      }
    }
  };
}
