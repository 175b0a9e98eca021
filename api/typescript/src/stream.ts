// Live output (docs/design/streaming.md): a model handler streams its output
// with input.stream while it runs; the Worker sends it to the leader, which
// relays it to the session's watchers. The Worker keeps the attempt's whole
// output until the attempt ends, so that a new leader can ask for it again
// from any offset. One sender per partition carries the pending output of
// every attempt the Worker runs there, one AppendOutputs call at a time:
// what is streamed while a call is in flight goes in the next one, so the
// calls grow with the Workers, not with the deltas.
import { sleep } from "./retry.js";

/** Bounds the text of one attempt in one AppendOutputs call, in bytes. */
export const maxAppendBytes = 64 << 10;
/** Bounds the text of one call, in bytes. */
export const maxBatchBytes = 1 << 20;
/** Bounds the appends of one call (the cluster takes at most 1,024). */
export const maxBatchAppends = 256;
/** The pause before a call that failed is tried again. */
export const streamRetryMs = 100;
/** Bounds one call. */
export const streamCallTimeoutMs = 10_000;
/** Bounds how long a finished handler's result waits for its streamed output to reach the leader. */
export const streamFlushMs = 2000;
/**
 * The least time between the starts of two calls when output is waiting as
 * a call returns: the next call carries what a few milliseconds more
 * brought, and the leader's sends of it to the watchers share writes. An
 * idle sender sends at once.
 */
export const streamSpacingMs = 10;

/** The attempt an append is for, as its heartbeat names it (seq unused). */
export interface OutputRef {
  stepId: string;
  attempt: number;
  token: string;
}

/** One attempt's text from offset, as AppendOutputRequest carries it. */
export interface OutputAppend {
  ref: OutputRef;
  offset: bigint;
  text: string;
}

/** The leader's answer to an append. */
export interface OutputAnswer {
  nextOffset: bigint;
  stop: boolean;
}

/** One AppendOutputs call: the leader's answer to each append, in order, or a throw (tried again after streamRetryMs). */
export type AppendOutputs = (appends: OutputAppend[]) => Promise<OutputAnswer[]>;

/**
 * Where to cut b at most n bytes in so that no character is cut in two (a
 * delta is a protobuf string: valid UTF-8); 0 when the first character is
 * longer than n.
 */
export function runeCut(b: Uint8Array, n: number): number {
  if (n >= b.length) return b.length;
  for (let i = n; i >= 0 && i > n - 4; i--) {
    if ((b[i] & 0xc0) !== 0x80) return i;
  }
  return 0;
}

/**
 * Sends the live output of a Worker's attempts of one partition. Its loop
 * runs while some attempt has output the leader does not hold.
 */
export class OutputSender {
  /** The streams with output the leader does not hold, in the order a call takes them. */
  private readonly pending = new Set<OutputStream>();
  private running = false;
  /** streamSpacingMs (a test's own). */
  spacingMs = streamSpacingMs;

  constructor(private readonly send: AppendOutputs) {}

  /** The live output of the attempt ref names. */
  open(ref: OutputRef): OutputStream {
    return new OutputStream(this, { stepId: ref.stepId, attempt: ref.attempt, token: ref.token });
  }

  /** Whether a call is in flight or due. */
  get busy(): boolean {
    return this.running;
  }

  /** @internal A stream has new text (add) or is over (drop). */
  mark(o: OutputStream, add: boolean): void {
    if (!add) {
      this.pending.delete(o);
      return;
    }
    this.pending.add(o);
    if (!this.running) {
      this.running = true;
      void this.run();
    }
  }

  /**
   * Sends what the leader does not hold, one call at a time, until nothing
   * is pending; a call that follows another at once waits until the spacing
   * has passed since the other started.
   */
  private async run(): Promise<void> {
    let last: number | undefined;
    try {
      for (;;) {
        if (last !== undefined && this.pending.size > 0) {
          const wait = last + this.spacingMs - performance.now();
          if (wait > 0) await sleep(wait);
        }
        const batch = this.batch();
        if (batch.length === 0) return;
        last = performance.now();
        let answers: OutputAnswer[];
        try {
          answers = await this.send(batch.map((b) => b.append));
          if (answers.length !== batch.length) throw new Error(`the cluster answered ${answers.length} appends of ${batch.length}`);
        } catch {
          // A failed or refused call (a takeover, a lost node): try again.
          await sleep(streamRetryMs);
          continue;
        }
        batch.forEach((b, i) => b.stream.took(answers[i]));
      }
    } finally {
      this.running = false;
    }
  }

  /**
   * The next call: each pending attempt's output from the offset the leader
   * holds, within the call's bounds. It forgets the attempts that stopped or
   * are held whole, and moves those it takes to the back, so that a Worker
   * with more attempts than a call carries takes turns.
   */
  private batch(): { stream: OutputStream; append: OutputAppend }[] {
    const batch: { stream: OutputStream; append: OutputAppend }[] = [];
    let size = 0;
    for (const o of [...this.pending]) {
      const rest = o.unheld();
      if (rest === undefined) {
        this.pending.delete(o);
        continue;
      }
      if (batch.length === maxBatchAppends || size >= maxBatchBytes) break;
      const chunk = rest.bytes.subarray(0, runeCut(rest.bytes, Math.min(maxAppendBytes, maxBatchBytes - size)));
      if (chunk.length === 0) break; // the call has no room for the next character
      batch.push({ stream: o, append: { ref: o.ref, offset: BigInt(rest.from), text: Buffer.from(chunk).toString("utf8") } });
      size += chunk.length;
    }
    for (const b of batch) {
      this.pending.delete(b.stream);
      this.pending.add(b.stream);
    }
    return batch;
  }
}

/**
 * One attempt's live output on its way to the leader, sent by its
 * partition's sender from wherever the leader asks (0 from a new leader)
 * until the leader says stop or the stream is stopped.
 */
export class OutputStream {
  private buf = new Uint8Array(0);
  private len = 0; // bytes streamed so far: buf[0, len)
  private held = 0; // what the leader holds (its next offset)
  private stopped = false; // the leader takes no more of it, or the attempt is over
  private synced = signal(); // held or stopped changed

  constructor(private readonly sender: OutputSender, readonly ref: OutputRef) {}

  /** How many bytes were streamed, and how many of them the leader holds. */
  get progress(): { written: number; held: number; stopped: boolean } {
    return { written: this.len, held: this.held, stopped: this.stopped };
  }

  /** Adds text to the output for the sender to pick up. It does not wait; text written once the stream stopped is dropped. */
  write(text: string): void {
    if (typeof text !== "string" || text === "" || this.stopped) return;
    this.push(Buffer.from(text, "utf8"));
    this.sender.mark(this, true);
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

  /** @internal What the leader does not hold, from its offset (undefined: nothing to send). */
  unheld(): { from: number; bytes: Uint8Array } | undefined {
    const from = Math.min(this.held, this.len);
    if (this.stopped || from === this.len) return undefined;
    return { from, bytes: this.buf.subarray(from, this.len) };
  }

  /** @internal Applies the leader's answer to an append. */
  took(a: OutputAnswer): void {
    this.held = Math.min(Number(a.nextOffset), this.len);
    this.stopped ||= a.stop;
    if (this.stopped || this.held === this.len) this.sender.mark(this, false);
    this.synced.fire();
  }

  /**
   * Waits, up to waitMs, until the leader holds all the output (or takes no
   * more of it), then stops the stream.
   */
  async finish(waitMs: number = streamFlushMs): Promise<void> {
    const deadline = new AbortController();
    const timer = setTimeout(() => deadline.abort(), waitMs);
    try {
      while (!this.stopped && this.held < this.len && !deadline.signal.aborted) await this.synced.wait(deadline.signal);
    } finally {
      clearTimeout(timer);
    }
    this.stop();
  }

  /** Ends the attempt's output without waiting for the leader (again: nothing). A call in flight may still carry it; no later one does. */
  stop(): void {
    this.stopped = true;
    this.sender.mark(this, false);
    this.synced.fire();
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
