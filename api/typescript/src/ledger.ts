// The execution ledger (docs/ledger.md): when $DEX_LEDGER names a file, a
// Worker appends one JSON line per handler start and end, and sideEffect one
// per side effect a tool reports. Each line is fsynced before the handler
// starts (or the hook returns), so it survives a SIGKILL right after it; the
// file is opened for appending, so several Worker processes can share it.
import { closeSync, fsyncSync, openSync, writeSync } from "node:fs";
import type { Task } from "../gen/dex/v1/workers_pb.js";
import { handlerOf } from "./route.js";

export const LedgerEnv = "DEX_LEDGER";

/** One ledger line before pid and time are filled in. */
export type LedgerLine = Record<string, string | number>;

/** Appends fsynced lines to a file opened with O_APPEND. */
export class Ledger {
  private readonly fd: number;

  constructor(readonly path: string) {
    this.fd = openSync(path, "a", 0o644);
  }

  append(line: LedgerLine): void {
    const data = JSON.stringify({ ...line, pid: process.pid, time: new Date().toISOString() }) + "\n";
    writeSync(this.fd, data);
    fsyncSync(this.fd);
  }

  close(): void {
    closeSync(this.fd);
  }
}

/**
 * Opens $DEX_LEDGER, or returns undefined when it is unset. A ledger that
 * cannot be opened stops the Worker from starting (it throws): an uncounted
 * run would void the count.
 */
export function ledgerFromEnv(): Ledger | undefined {
  const path = process.env[LedgerEnv] ?? "";
  if (path === "") return undefined;
  try {
    return new Ledger(path);
  } catch (e) {
    throw new Error(`${LedgerEnv}: open ledger ${path}: ${(e as Error).message}`);
  }
}

/** The start line of task t run by worker. */
export function startLine(t: Task, worker: string): LedgerLine {
  return {
    session: t.sessionId, step: t.ref?.stepId ?? "", attempt: t.ref?.attempt ?? 0, kind: handlerOf(t), tool: t.tool,
    call_id: t.callId, idempotency_key: t.idempotencyKey, task_id: t.taskId, epoch: Number(t.epoch), worker, phase: "start",
  };
}

// The ledger and line of each running tool call, for sideEffect.
const calls = new WeakMap<object, { ledger: Ledger; line: LedgerLine }>();

/** Lets sideEffect(call, …) find the ledger of a running handler. */
export function attachLedger(call: object, ledger: Ledger, line: LedgerLine): void {
  calls.set(call, { ledger, line });
}

/**
 * Records, in the execution ledger, that the running tool handler of call
 * (its ToolCall) made the side effect name with the idempotency key key (the
 * key the tool really used; "" for none). A tool that reports its side
 * effects is counted by them instead of by its handler runs. Without a
 * ledger it does nothing; a throw means the line was not written.
 */
export function sideEffect(call: object, name: string, key = ""): void {
  const at = calls.get(call);
  if (at === undefined) return;
  at.ledger.append({ ...at.line, phase: "effect", effect: name, effect_key: key });
}
