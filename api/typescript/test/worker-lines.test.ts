// What a person starting a Worker with a logger sees: the registration
// lines go to the logger, name the leader, and say why a deregistration
// failed; repeated lines are spaced out. The Workers run as processes in
// e2e/worker-lines.test.ts.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { dial, Worker, type Logger } from "../src/index.js";
import { SayEvery } from "../src/worker.js";
import { FakeNode } from "./fake.js";

describe("registration lines with a logger", () => {
  it("go to the logger, name the leader, and a stop deregisters", async () => {
    const node = await new FakeNode().start();
    const lines: string[] = [];
    const at = (level: string) => (msg: string) => void lines.push(`${level} ${msg}`);
    const logger: Logger = { debug() {}, info: at("info"), warn: at("warn"), error: at("error") };
    const ch = dial(node.addr);
    try {
      const w = new Worker(ch, { id: "w1", logger, pollWaitMs: 100, tools: [{ name: "lookup", access: "read", run: () => ({ content: "x" }) }] });
      const stop = new AbortController();
      const running = w.run(stop.signal);
      // The fake counts the registration when it answers; the line comes once
      // the Worker has read the answer.
      const registered = `info registered with leader n1 at ${node.addr}`;
      const deadline = Date.now() + 10_000;
      while (!lines.includes(registered) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
      stop.abort();
      await running;
      assert.ok(lines.includes(registered), lines.join("\n"));
      assert.deepEqual(node.deregistered, ["w1"]);
      assert.equal(lines[lines.length - 1], "info deregistered");
    } finally {
      ch.close();
      await node.stop();
    }
  });

  it("say why the deregistration failed", async () => {
    const node = await new FakeNode().start();
    const { Code, ConnectError } = await import("@connectrpc/connect");
    node.refuse.deregister = [new ConnectError("no leader is known yet", Code.FailedPrecondition)];
    const lines: string[] = [];
    const logger: Logger = { debug() {}, info: (m) => void lines.push(m), warn: (m) => void lines.push(m), error: (m) => void lines.push(m) };
    const ch = dial(node.addr);
    try {
      const w = new Worker(ch, { id: "w1", logger, pollWaitMs: 100, tools: [{ name: "lookup", access: "read", run: () => ({ content: "x" }) }] });
      const stop = new AbortController();
      const running = w.run(stop.signal);
      const deadline = Date.now() + 10_000;
      while (!lines.some((l) => l.startsWith("registered with leader")) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
      stop.abort();
      await running;
      assert.ok(lines.includes(`could not deregister from ${node.addr}: no leader is known yet; the cluster drops the Worker after its TTL`), lines.join("\n"));
    } finally {
      ch.close();
      await node.stop();
    }
  });

  it("space repeated lines out: at once, then 2, 4, 8, 16 and at most 30 s apart", () => {
    const s = new SayEvery();
    const gaps: number[] = [];
    let last = 0;
    for (let now = 0; now <= 600_000; now += 1000) {
      if (s.due(now)) {
        gaps.push(now - last);
        last = now;
      }
    }
    assert.deepEqual(gaps.slice(0, 6), [0, 2000, 4000, 8000, 16000, 30000]);
    assert.ok(gaps.slice(6).every((g) => g === 30000), String(gaps));
  });
});
