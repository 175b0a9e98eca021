import { closeSync, fsyncSync, openSync, writeSync } from "node:fs";

/**
 * One line of the side-effect ledger (cmd/dexworker/ledger.go): one tool
 * execution (or model / compaction call), written when the handler starts.
 * The fields and their order are the Go Worker's, so the chaos checks read
 * it unchanged.
 */
export interface LedgerEntry {
  session: string;
  call_id?: string;
  tool: string;
  attempt: number;
  idempotency_key?: string;
  step?: string;
  kind?: string;
  task_id?: string;
  worker?: string;
  /** The dispatch epoch the attempt was handed under (omitted when 0). */
  epoch?: bigint | number;
  /** The session's agent, on model and compaction calls (omitted for the default agent). */
  agent?: string;
}

/** RFC 3339 with sub-second digits, UTC, trailing zeros trimmed (Go's RFC3339Nano). */
export function rfc3339Nano(d: Date): string {
  return d.toISOString().replace(/\.?0+Z$/, "Z").replace(/\.Z$/, "Z");
}

/**
 * Appends entries to a file opened O_APPEND, one JSON line written with one
 * write and fsynced before append returns, so a line survives a SIGKILL
 * right after it. Synchronous on purpose: nothing runs between the write
 * and the fsync.
 */
export class Ledger {
  private readonly fd: number;
  constructor(readonly path: string, private readonly pid = process.pid, private readonly now = () => new Date()) {
    try {
      this.fd = openSync(path, "a", 0o644);
    } catch (e) {
      throw new Error(`open ledger: ${(e as Error).message}`);
    }
  }

  append(e: LedgerEntry): void {
    const line = {
      session: e.session, call_id: e.call_id ?? "", tool: e.tool, attempt: e.attempt, idempotency_key: e.idempotency_key ?? "",
      pid: this.pid, time: rfc3339Nano(this.now()),
      ...(e.step ? { step: e.step } : {}), ...(e.kind ? { kind: e.kind } : {}), ...(e.task_id ? { task_id: e.task_id } : {}),
      ...(e.worker ? { worker: e.worker } : {}), ...(e.epoch ? { epoch: Number(e.epoch) } : {}), ...(e.agent ? { agent: e.agent } : {}),
    };
    const buf = Buffer.from(JSON.stringify(line) + "\n");
    try {
      writeSync(this.fd, buf);
      fsyncSync(this.fd);
    } catch (err) {
      throw new Error(`write ledger: ${(err as Error).message}`);
    }
  }

  close(): void {
    closeSync(this.fd);
  }
}
