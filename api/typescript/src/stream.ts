// Live output (docs/design/streaming.md): a model handler streams its output
// with input.stream while it runs; the Worker sends it to the leader, which
// relays it to the session's watchers. The Worker keeps the attempt's whole
// output until the attempt ends, so that a new leader can ask for it again
// from any offset.
import { sleep } from "./retry.js";

/** Bounds the text of one AppendOutput call, in bytes. */
export const maxAppendBytes = 64 << 10;
/** The pause before an append that failed is tried again. */
export const streamRetryMs = 100;
/** Bounds how long a finished handler's result waits for its streamed output to reach the leader. */
export const streamFlushMs = 2000;

/** One AppendOutput call: the leader's answer, or a throw (tried again after streamRetryMs). */
export type AppendOutput = (offset: bigint, text: string, signal: AbortSignal) => Promise<{ nextOffset: bigint; stop: boolean }>;

/**
 * Where to cut b at most n bytes in so that no character is cut in two (a
 * delta is a protobuf string: valid UTF-8).
 */
export function runeCut(b: Uint8Array, n: number): number {
  if (n >= b.length) return b.length;
  for (let i = n; i > 0 && i > n - 4; i--) {
    if ((b[i] & 0xc0) !== 0x80) return i;
  }
  return n;
}

/**
 * One attempt's live output on its way to the leader. The first write starts
 * the sender, which sends what the leader does not hold yet, one call at a
 * time, resending from wherever the leader asks (0 from a new leader) until
 * the leader says stop or the stream is stopped.
 */
export class OutputStream {
  private buf = new Uint8Array(0);
  private len = 0; // bytes streamed so far: buf[0, len)
  private held = 0; // what the leader holds (its next offset)
  private stopped = false; // the leader takes no more of it, or the attempt ended
  private readonly cancel = new AbortController();
  private sender?: Promise<void>; // undefined until the first write
  private wake = signal(); // a write happened
  private synced = signal(); // held or stopped changed

  constructor(private readonly append: AppendOutput) {}

  /** How many bytes were streamed, and how many of them the leader holds. */
  get progress(): { written: number; held: number; stopped: boolean } {
    return { written: this.len, held: this.held, stopped: this.stopped };
  }

  /** Adds text to the output; the sender, started by the first write, picks it up. It does not wait. */
  write(text: string): void {
    if (typeof text !== "string" || text === "" || this.cancel.signal.aborted) return;
    if (!this.stopped) this.push(Buffer.from(text, "utf8"));
    this.sender ??= this.run();
    this.wake.fire();
  }

  private push(b: Uint8Array): void {
    if (this.len + b.length > this.buf.length) {
      const grown = new Uint8Array(Math.max(2 * this.buf.length, this.len + b.length, 1024));
      grown.set(this.buf.subarray(0, this.len));
      this.buf = grown;
    }
    this.buf.set(b, this.len);
    this.len += b.length;
  }

  /** Sends what the leader does not hold yet, one call at a time, until stopped. */
  private async run(): Promise<void> {
    const abort = this.cancel.signal;
    while (!abort.aborted) {
      const from = this.held;
      if (this.stopped || from >= this.len) {
        await this.wake.wait(abort);
        continue;
      }
      const rest = this.buf.subarray(from, this.len);
      const chunk = rest.subarray(0, runeCut(rest, maxAppendBytes));
      let resp;
      try {
        resp = await this.append(BigInt(from), Buffer.from(chunk).toString("utf8"), abort);
      } catch {
        if (!(await sleep(streamRetryMs, abort))) return;
        continue;
      }
      if (abort.aborted) return;
      this.held = Number(resp.nextOffset < BigInt(this.len) ? resp.nextOffset : BigInt(this.len));
      this.stopped ||= resp.stop;
      this.synced.fire();
    }
  }

  /**
   * Waits, up to waitMs, until the leader holds all the output (or takes no
   * more of it), then stops the sender.
   */
  async finish(waitMs: number = streamFlushMs): Promise<void> {
    if (this.sender !== undefined) {
      const deadline = new AbortController();
      const timer = setTimeout(() => deadline.abort(), waitMs);
      try {
        while (!this.stopped && this.held < this.len && !deadline.signal.aborted) await this.synced.wait(deadline.signal);
      } finally {
        clearTimeout(timer);
      }
    }
    await this.stop();
  }

  /** Ends the sender without waiting for the leader (again: nothing). */
  async stop(): Promise<void> {
    this.stopped = true;
    this.cancel.abort();
    this.wake.fire();
    await this.sender;
  }
}

/** Something that happens again and again: wait resolves at its next fire (or at abort). */
function signal(): { fire(): void; wait(abort: AbortSignal): Promise<void> } {
  let waiters: (() => void)[] = [];
  return {
    fire() {
      const w = waiters;
      waiters = [];
      for (const f of w) f();
    },
    wait(abort: AbortSignal) {
      return new Promise<void>((resolve) => {
        if (abort.aborted) return resolve();
        const done = () => {
          abort.removeEventListener("abort", done);
          resolve();
        };
        waiters.push(done);
        abort.addEventListener("abort", done, { once: true });
      });
    },
  };
}
