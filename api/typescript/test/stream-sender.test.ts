// The Worker's live output sender (docs/design/streaming.md) against a
// scripted leader: one AppendOutputs call at a time per partition, what
// attempts stream while it is in flight going whole in the next one; a
// resend from the offset the leader asks (0 from a new leader); stop; failed
// and refused calls tried again without losing or repeating text; the
// call's bounds.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { Code, ConnectError } from "@connectrpc/connect";
import {
  maxAppendBytes, maxBatchAppends, maxBatchBytes, OutputSender, runeCut, streamRetryMs,
  type OutputAnswer, type OutputAppend, type OutputRef,
} from "../src/stream.js";

const bytes = (s: string) => Buffer.byteLength(s, "utf8");
const tick = (ms = 0) => new Promise((r) => setTimeout(r, ms));
const ref = (stepId: string): OutputRef => ({ stepId, attempt: 1, token: "tok" });

/**
 * A leader's AppendOutputs: for each attempt (by Step) it takes text only at
 * the end of what it holds and answers the offset it wants next, and it
 * refuses a malformed call whole, as the cluster does. It can hold calls at
 * a gate, fail the next calls before taking anything, refuse them, or take
 * a call and lose its answer; forget() plays a new leader.
 */
class Leader {
  held = new Map<string, string>();
  calls: OutputAppend[][] = [];
  malformed: string[] = [];
  inFlight = 0;
  mostInFlight = 0;
  failures = 0; // calls failed Unavailable before taking anything
  refusals = 0; // calls refused InvalidArgument, nothing taken
  lostAnswers = 0; // calls taken whose answer is lost (Unavailable)
  stop = new Set<string>(); // Steps answered stop
  private gate?: Promise<void>;
  private open?: () => void;
  private entered: (() => void)[] = [];

  /** Holds the calls that come until release(). */
  hold(): void {
    this.gate = new Promise((r) => (this.open = r));
  }

  release(): void {
    this.gate = undefined;
    this.open?.();
  }

  /** Resolves once a call has come in. */
  called(): Promise<void> {
    return this.calls.length > 0 ? Promise.resolve() : new Promise((r) => this.entered.push(r));
  }

  forget(): void {
    this.held.clear();
  }

  text(step: string): string {
    return this.held.get(step) ?? "";
  }

  appendsOf(step: string): [bigint, string][] {
    return this.calls.flat().filter((a) => a.ref.stepId === step).map((a) => [a.offset, a.text]);
  }

  private check(appends: OutputAppend[]): string {
    if (appends.length < 1 || appends.length > 1024) return `${appends.length} appends`;
    const seen = new Set<string>();
    for (const a of appends) {
      const k = `${a.ref.stepId}/${a.ref.attempt}`;
      if (!a.ref.stepId || !a.ref.attempt || !a.ref.token) return "an append without its attempt";
      if (seen.has(k)) return `attempt ${k} twice`;
      seen.add(k);
      if (bytes(a.text) > maxAppendBytes) return `${bytes(a.text)} bytes for ${k}`;
    }
    if (appends.reduce((n, a) => n + bytes(a.text), 0) > maxBatchBytes) return "over 1 MiB";
    return "";
  }

  send = async (appends: OutputAppend[]): Promise<OutputAnswer[]> => {
    this.calls.push(appends.map((a) => ({ ...a })));
    for (const f of this.entered.splice(0)) f();
    this.inFlight++;
    this.mostInFlight = Math.max(this.mostInFlight, this.inFlight);
    try {
      if (this.gate) await this.gate;
      const why = this.check(appends);
      if (why !== "") {
        this.malformed.push(why);
        throw new ConnectError(why, Code.InvalidArgument);
      }
      if (this.failures > 0) {
        this.failures--;
        throw new ConnectError("no leader", Code.Unavailable);
      }
      if (this.refusals > 0) {
        this.refusals--;
        throw new ConnectError("refused", Code.InvalidArgument);
      }
      const answers = appends.map((a) => {
        const held = this.text(a.ref.stepId);
        if (this.stop.has(a.ref.stepId)) return { nextOffset: BigInt(bytes(held)), stop: true };
        if (a.offset === BigInt(bytes(held))) this.held.set(a.ref.stepId, held + a.text);
        return { nextOffset: BigInt(bytes(this.text(a.ref.stepId))), stop: false };
      });
      if (this.lostAnswers > 0) {
        this.lostAnswers--;
        throw new ConnectError("the answer was lost", Code.Unavailable);
      }
      return answers;
    } finally {
      this.inFlight--;
    }
  };
}

describe("OutputSender", () => {
  it("spaces its calls only while output waits as a call returns; an idle sender sends at once", async () => {
    const leader = new Leader();
    const starts: number[] = [];
    const sender = new OutputSender(async (appends) => {
      starts.push(performance.now());
      return leader.send(appends);
    });
    sender.spacingMs = 300;
    const o = sender.open(ref("st1"));
    leader.hold();
    o.write("a");
    await leader.called();
    o.write("b"); // waits as the first call returns
    leader.release();
    for (const deadline = Date.now() + 5000; leader.text("st1") !== "ab" && Date.now() < deadline;) await tick(5);
    assert.equal(leader.text("st1"), "ab");
    assert.ok(starts[1] - starts[0] >= 300 - 1, `the second call started ${starts[1] - starts[0]} ms after the first`);
    for (const deadline = Date.now() + 5000; sender.busy && Date.now() < deadline;) await tick(5);
    sender.spacingMs = 3_600_000; // an idle sender does not wait it out
    o.write("c");
    await o.finish(5000);
    assert.equal(leader.text("st1"), "abc");
  });

  it("sends an idle Worker's delta at once, then what accumulates during a call, one call at a time", async () => {
    const leader = new Leader();
    const s = new OutputSender(leader.send).open(ref("st1"));
    await tick(20);
    assert.equal(leader.calls.length, 0, "a call before the first write");
    s.write("hello");
    s.write(" wor"); // goes with the next call: one call in flight
    s.write("ld");
    await s.finish();
    assert.equal(leader.text("st1"), "hello world");
    assert.deepEqual(leader.appendsOf("st1"), [[0n, "hello"], [5n, " world"]]);
    assert.deepEqual(leader.calls[0][0].ref, { stepId: "st1", attempt: 1, token: "tok" });
    assert.deepEqual(s.progress, { written: 11, held: 11, stopped: true });
    assert.equal(leader.mostInFlight, 1);
  });

  it("puts what three attempts stream during a call in the next call, each whole", async () => {
    const leader = new Leader();
    const sender = new OutputSender(leader.send);
    const [a, b, c] = ["a", "b", "c"].map((k) => sender.open(ref(k)));
    leader.hold();
    a.write("Hel");
    await leader.called(); // the first call is in flight, held
    a.write("lo");
    b.write("Bon");
    b.write("jour");
    c.write("Hi");
    await tick(20);
    leader.release();
    await Promise.all([a, b, c].map((o) => o.finish(5000)));
    assert.deepEqual(["a", "b", "c"].map((k) => leader.text(k)), ["Hello", "Bonjour", "Hi"]);
    assert.equal(leader.calls.length, 2, `calls: ${JSON.stringify(leader.calls, (_, v) => typeof v === "bigint" ? Number(v) : v)}`);
    const second = leader.calls[1].map((x) => [x.ref.stepId, x.offset, x.text]).sort();
    assert.deepEqual(second, [["a", 3n, "lo"], ["b", 0n, "Bonjour"], ["c", 0n, "Hi"]]);
    assert.equal(leader.mostInFlight, 1);
    assert.deepEqual(leader.malformed, []);
  });

  it("resends each attempt's whole output to a new leader that answers offset 0", async () => {
    const leader = new Leader();
    const sender = new OutputSender(leader.send);
    const a = sender.open(ref("a"));
    const b = sender.open(ref("b"));
    a.write("héllo ");
    b.write("bonjour ");
    while (a.progress.held < 7 || b.progress.held < 8) await tick(5);
    leader.forget();
    a.write("world");
    b.write("monde");
    await Promise.all([a.finish(5000), b.finish(5000)]);
    assert.deepEqual([leader.text("a"), leader.text("b")], ["héllo world", "bonjour monde"]);
    assert.deepEqual(leader.appendsOf("a"), [[0n, "héllo "], [7n, "world"], [0n, "héllo world"]]);
    assert.deepEqual(leader.appendsOf("b").at(-1), [0n, "bonjour monde"]);
  });

  it("resends from the offset the leader asks", async () => {
    const leader = new Leader();
    leader.held.set("st1", "abc"); // it holds more than the Worker thinks (a repeat answered late)
    const s = new OutputSender(leader.send).open(ref("st1"));
    s.write("abcdef");
    await s.finish(5000);
    assert.deepEqual(leader.appendsOf("st1"), [[0n, "abcdef"], [3n, "def"]]);
    assert.equal(leader.text("st1"), "abcdef");
  });

  for (const how of ["failures", "refusals", "lostAnswers"] as const) {
    it(`tries a call again after ${how} without losing or repeating text`, async () => {
      const leader = new Leader();
      const sender = new OutputSender(leader.send);
      const a = sender.open(ref("a"));
      const b = sender.open(ref("b"));
      leader[how] = 2;
      leader.hold();
      const t0 = Date.now();
      a.write("one ");
      await leader.called();
      b.write("uno "); // streamed while the failing call is in flight
      leader.release();
      await tick(30);
      a.write("two "); // and between the tries
      b.write("dos ");
      await Promise.all([a.finish(5000), b.finish(5000)]);
      assert.deepEqual([leader.text("a"), leader.text("b")], ["one two ", "uno dos "]);
      assert.ok(Date.now() - t0 >= 2 * streamRetryMs - 5, `retried too soon: ${Date.now() - t0} ms`);
      assert.ok(leader.calls.length >= 3);
      assert.equal(leader.mostInFlight, 1);
    });
  }

  it("sends no more of an attempt the leader stops, and finishes it at once", async () => {
    const leader = new Leader();
    leader.stop.add("a");
    const sender = new OutputSender(leader.send);
    const a = sender.open(ref("a"));
    const b = sender.open(ref("b"));
    a.write("abc");
    while (!a.progress.stopped) await tick(5); // the leader's stop is applied
    a.write("def");
    b.write("other");
    const t0 = Date.now();
    await a.finish();
    assert.ok(Date.now() - t0 < 100, "finish waited for a stopped stream");
    await b.finish(5000);
    assert.deepEqual(leader.appendsOf("a"), [[0n, "abc"]]);
    assert.equal(leader.text("b"), "other");
    assert.equal(a.progress.written, 3, "text after the stop was kept");
  });

  it("sends no more of an attempt the Worker stopped, beyond the call in flight", async () => {
    const leader = new Leader();
    const sender = new OutputSender(leader.send);
    const a = sender.open(ref("a"));
    const b = sender.open(ref("b"));
    leader.hold();
    a.write("first");
    await leader.called();
    a.write(" never sent"); // pending when the attempt ends
    a.stop();
    a.write(" nor this");
    b.write("b goes on");
    leader.release();
    await b.finish(5000);
    const c = sender.open(ref("c"));
    c.write("later");
    await c.finish(5000);
    assert.deepEqual(leader.appendsOf("a"), [[0n, "first"]]);
    assert.deepEqual([leader.text("b"), leader.text("c")], ["b goes on", "later"]);
  });

  it("gives up the wait at the flush bound, and then sends nothing more", async () => {
    const leader = new Leader();
    leader.failures = Infinity;
    const sender = new OutputSender(leader.send);
    const s = sender.open(ref("st1"));
    s.write("lost");
    const t0 = Date.now();
    await s.finish(300);
    const waited = Date.now() - t0;
    assert.ok(waited >= 290 && waited < 1000, `waited ${waited} ms`);
    while (sender.busy) await tick(5);
    const calls = leader.calls.length;
    s.write("after the end");
    await tick(2 * streamRetryMs);
    assert.equal(leader.calls.length, calls, "the sender went on after finish");
    assert.equal(sender.busy, false);
  });

  it("sends at most 64 KiB of an attempt a call, never cutting a character", async () => {
    const leader = new Leader();
    const s = new OutputSender(leader.send).open(ref("st1"));
    const text = "€".repeat(30_000); // 3 bytes each: 90,000 bytes
    s.write(text);
    await s.finish();
    assert.equal(leader.text("st1"), text);
    assert.ok(leader.calls.length >= 2);
    for (const [, t] of leader.appendsOf("st1")) assert.ok(bytes(t) <= maxAppendBytes);
    assert.equal(bytes(leader.appendsOf("st1")[0][1]), 65_535);
  });

  it("fills a call up to 1 MiB and 256 attempts; the rest take their turn in the next calls", async () => {
    // 15 attempts of 64 KiB and one of 64 KiB - 2 leave 2 bytes of the
    // call's 1 MiB: too few for the next attempt's first character.
    const big = [...Array.from({ length: 15 }, () => "x".repeat(maxAppendBytes)), "y".repeat(maxAppendBytes - 2), "€".repeat(10)];
    const many = Array.from({ length: 300 }, (_, i) => `m${i} `);
    const leader = new Leader();
    const sender = new OutputSender(leader.send);
    leader.hold();
    sender.open(ref("first")).write("go");
    await leader.called();
    const streams = [
      ...big.map((t, i) => ({ s: sender.open(ref(`big${i}`)), t })),
      ...many.map((t, i) => ({ s: sender.open(ref(`many${i}`)), t })),
    ];
    for (const { s, t } of streams) s.write(t);
    leader.release();
    await Promise.all(streams.map(({ s }) => s.finish(5000)));
    assert.deepEqual(leader.malformed, []);
    big.forEach((t, i) => assert.equal(leader.text(`big${i}`), t));
    many.forEach((t, i) => assert.equal(leader.text(`many${i}`), t));
    const second = leader.calls[1];
    assert.deepEqual(second.map((a) => a.ref.stepId), Array.from({ length: 16 }, (_, i) => `big${i}`));
    assert.equal(second.reduce((n, a) => n + bytes(a.text), 0), maxBatchBytes - 2);
    assert.equal(Math.max(...leader.calls.map((c) => c.length)), maxBatchAppends);
  });

  it("cuts on a character's start, never inside one", () => {
    assert.equal(runeCut(Buffer.from("a€"), 2), 1);
    assert.equal(runeCut(Buffer.from("ab"), 5), 2);
    assert.deepEqual([0, 1, 2, 3, 4].map((n) => runeCut(Buffer.from("€€"), n)), [0, 0, 0, 3, 3]);
  });
});
