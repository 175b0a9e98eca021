// Holds: the Worker pauses at named moments until a harness releases it.
// Without a hold hook in code, $DEX_HOLD (comma separated moments) installs
// the file-based Holder beside $DEX_LEDGER; $DEX_HOLD_ALL=1 holds every
// occurrence instead of each moment once.
import { existsSync, rmSync, writeFileSync } from "node:fs";
import type { Task } from "../gen/dex/v1/workers_pb.js";
import { kindName } from "./kinds.js";
import { LedgerEnv } from "./ledger.js";

export const HoldEnv = "DEX_HOLD";
export const HoldAllEnv = "DEX_HOLD_ALL";

/** Moments at which WorkerOptions.hold is called. */
export const Moments = {
  /** The Worker holds a task and has not claimed it yet. */
  beforeClaim: "before-claim",
  /** The claim is committed; no handler has started. */
  afterClaim: "after-claim",
  /** Right before a tool handler (CallTool, CallSingleAttemptTool) is invoked. */
  toolRunning: "tool-running",
  /** A handler returned and its ledger end line was written; its result (complete or fail) is not sent yet. */
  beforeResult: "before-result",
  /** ReportTask returned OK for a result. */
  afterResultSent: "after-result-sent",
  /** Right before a poll handler (PollToolTask) is invoked. */
  duringPoll: "during-poll",
  /** Right before the compaction handler is invoked. */
  duringCompaction: "during-compaction",
  /** Right before the model handler (RunModel) is invoked. */
  beforeModel: "before-model",
} as const;
export type Moment = (typeof Moments)[keyof typeof Moments];
export const AllMoments: Moment[] = Object.values(Moments);

/** The moments of a comma separated list; an unknown one throws. */
export function parseMoments(s: string): Set<Moment> {
  const m = new Set<Moment>();
  for (const raw of s.split(",")) {
    const p = raw.trim();
    if (p === "") continue;
    if (!(AllMoments as string[]).includes(p)) throw new Error(`unknown hold moment ${JSON.stringify(p)} (known: ${AllMoments.join(", ")})`);
    m.add(p as Moment);
  }
  return m;
}

/**
 * Pauses the Worker at named moments until a harness releases it: it writes
 * "MOMENT step=… session=… kind=… tool=… attempt=… pid=…" to <ledger>.held and
 * "held MOMENT step=STEP pid=PID" to stderr, then waits for the file
 * <ledger>.release (which it removes) or release(). One hold at a time; each
 * moment is held once unless all.
 */
export class Holder {
  private readonly heldF: string;
  private readonly relF: string;
  private readonly done = new Set<string>();
  private queue: Promise<void> = Promise.resolve();
  private signalled = false;
  private wake: (() => void) | undefined;

  constructor(private readonly moments: Set<Moment>, private readonly all: boolean, ledger: string,
    private readonly out: (s: string) => void = (s) => process.stderr.write(s), private readonly pollMs = 20) {
    this.heldF = ledger + ".held";
    this.relF = ledger + ".release";
  }

  /** Releases the current hold (the demo Worker's SIGUSR1). */
  release(): void {
    this.signalled = true;
    this.wake?.();
  }

  /** The Worker's hold hook. */
  hold = (moment: Moment, t: Task): Promise<void> => {
    if (!this.moments.has(moment)) return Promise.resolve();
    const next = this.queue.then(() => this.holdOne(moment, t));
    this.queue = next.catch(() => {});
    return next;
  };

  private async holdOne(moment: Moment, t: Task): Promise<void> {
    if (this.done.has(moment) && !this.all) return;
    this.done.add(moment);
    // A release left over from before this hold does not count.
    rmSync(this.relF, { force: true });
    this.signalled = false;
    const step = t.ref?.stepId ?? "";
    const desc = `${moment} step=${step} session=${t.sessionId} kind=${kindName(t.kind)} tool=${t.tool} attempt=${t.ref?.attempt ?? 0} pid=${process.pid}`;
    try {
      writeFileSync(this.heldF, desc + "\n");
    } catch (e) {
      this.out(`hold: ${(e as Error).message}\n`);
    }
    this.out(`held ${moment} step=${step} pid=${process.pid}\n`);
    while (!this.signalled) {
      await new Promise<void>((r) => {
        this.wake = r;
        setTimeout(r, this.pollMs);
      });
      this.wake = undefined;
      if (this.signalled) break;
      if (existsSync(this.relF)) {
        rmSync(this.relF, { force: true });
        break;
      }
    }
    this.signalled = false;
    rmSync(this.heldF, { force: true });
    this.out(`released ${moment} step=${step} pid=${process.pid}\n`);
  }
}

/**
 * The Holder $DEX_HOLD asks for, beside $DEX_LEDGER; undefined when DEX_HOLD
 * is unset or empty. An unknown moment, or DEX_HOLD without DEX_LEDGER, throws.
 */
export function holderFromEnv(env: NodeJS.ProcessEnv = process.env): Holder | undefined {
  const spec = env[HoldEnv] ?? "";
  if (spec.trim() === "") return undefined;
  let moments: Set<Moment>;
  try {
    moments = parseMoments(spec);
  } catch (e) {
    throw new Error(`${HoldEnv}: ${(e as Error).message}`);
  }
  if (moments.size === 0) return undefined;
  const ledger = env[LedgerEnv] ?? "";
  if (ledger === "") throw new Error(`${HoldEnv} is set (${JSON.stringify(spec)}) but ${LedgerEnv} is not: the hold files live beside the ledger`);
  return new Holder(moments, env[HoldAllEnv] === "1", ledger);
}
