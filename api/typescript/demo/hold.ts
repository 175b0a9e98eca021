import { existsSync, rmSync, writeFileSync } from "node:fs";
import { AllMoments, kindName, type Moment } from "../src/index.js";
import type { Task } from "../gen/dex/v1/workers_pb.js";

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
 * "held MOMENT step=STEP pid=PID" to stderr and the file <ledger>.held, then
 * waits for SIGUSR1 or the file <ledger>.release (which it removes). One hold
 * at a time; each moment is held once unless all (cmd/dexworker/hold.go).
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

  /** SIGUSR1's handler: releases the current hold. */
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
