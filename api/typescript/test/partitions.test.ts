// A partitioned cluster: the Worker runs one poll loop per partition, each
// PollTask naming its partition in the dex-partition metadata, and the loops
// share the Worker's concurrency. A cluster of one partition (0 or 1) gets no
// partition metadata. Against a fake node that hands a poll only the tasks of
// the partition it names.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { Code, ConnectError } from "@connectrpc/connect";
import { dial, PartitionMetadataKey, Worker, type ToolCall } from "../src/index.js";
import { FakeNode, task } from "./fake.js";

const stepTask = (step: string) => task({ tool: "echo", stepId: step, arguments: JSON.stringify({ step }) });

/**
 * Runs a Worker of the given concurrency against node until every one of want
 * tasks is reported; returns the most handlers that ran at once. A handler
 * waits until as many run as the concurrency allows (or every task has
 * started), so that the slots fill up, or until the Worker stops it.
 */
async function runAll(node: FakeNode, want: number, concurrency = 4): Promise<number> {
  let started = 0;
  let running = 0;
  let most = 0;
  let fill: () => void = () => {};
  const full = new Promise<void>((r) => (fill = r));
  const echo = async (c: ToolCall) => {
    started++;
    running++;
    most = Math.max(most, running);
    if (running >= concurrency || started === want) fill();
    await Promise.race([full, new Promise((r) => c.signal.addEventListener("abort", r, { once: true }))]);
    running--;
    return { content: `ran ${JSON.parse(c.arguments).step}` };
  };
  const ch = dial(node.addr, { token: "" });
  const w = new Worker(ch, { id: "w-test", pollWaitMs: 100, shutdownGraceMs: 500, concurrency, tools: [{ name: "echo", access: "read", run: echo }] });
  const stop = new AbortController();
  const run = w.run(stop.signal);
  const deadline = Date.now() + 10_000;
  try {
    while (node.of("report").length < want) {
      if (Date.now() > deadline) throw new Error(`not every task was reported; polls: ${JSON.stringify(node.polled)}`);
      await new Promise((r) => setTimeout(r, 10));
    }
  } finally {
    stop.abort();
    await run;
    ch.close();
  }
  return most;
}

/** The content each reported Step completed with. */
function reports(node: FakeNode): Record<string, string> {
  const out: Record<string, string> = {};
  for (const r of node.of("report")) out[r.ref?.stepId ?? ""] = (r.result?.outcome.value as { content: string }).content;
  return out;
}

describe("a partitioned cluster", () => {
  it("is polled on every partition, the loops sharing the concurrency", async () => {
    const node = await new FakeNode().start();
    node.partitions = [3];
    node.tasks.push(stepTask("p0-a"), stepTask("p0-b"));
    node.partitionTasks = { 1: [stepTask("p1-a"), stepTask("p1-b")], 2: [stepTask("p2-a"), stepTask("p2-b")] };
    try {
      const mostRunning = await runAll(node, 6, 2);
      assert.equal(PartitionMetadataKey, "dex-partition");
      for (const k of ["0", "1", "2"]) assert.ok(node.polled.includes(k), `partition ${k} polled: ${JSON.stringify(node.polled)}`);
      assert.ok(!node.polled.includes(null), "every poll names its partition, 0 too");
      const every = ["p0-a", "p0-b", "p1-a", "p1-b", "p2-a", "p2-b"];
      assert.deepEqual(node.of("claim").map((c) => c.ref?.stepId).sort(), every);
      assert.deepEqual(reports(node), Object.fromEntries(every.map((s) => [s, `ran ${s}`])));
      assert.ok(mostRunning <= 2, `${mostRunning} handlers ran at once`);
      assert.ok(node.mostHeld <= 2, `${node.mostHeld} tasks asked for and held at once, across the loops`);
    } finally {
      await node.stop();
    }
  });

  for (const partitions of [0, 1]) {
    it(`of ${partitions} partitions gets no partition metadata`, async () => {
      const node = await new FakeNode().start();
      node.partitions = [partitions];
      node.tasks.push(stepTask("p0-a"), stepTask("p0-b"));
      try {
        await runAll(node, 2);
        assert.ok(node.polled.length > 0);
        assert.deepEqual([...new Set(node.polled)], [null]);
        assert.deepEqual(reports(node), { "p0-a": "ran p0-a", "p0-b": "ran p0-b" });
      } finally {
        await node.stop();
      }
    });
  }

  it("goes on polling the others while one partition has no leader", async () => {
    const node = await new FakeNode().start();
    node.partitions = [3];
    node.down.add(1);
    node.tasks.push(stepTask("p0-a"));
    node.partitionTasks = { 2: [stepTask("p2-a")] };
    try {
      await runAll(node, 2);
      assert.ok(node.polled.includes("1"));
      assert.deepEqual(reports(node), { "p0-a": "ran p0-a", "p2-a": "ran p2-a" });
    } finally {
      await node.stop();
    }
  });

  it("follows the partition count of a registration again", async () => {
    const node = await new FakeNode().start();
    node.partitions = [1, 3];
    node.refuse.poll = [new ConnectError("worker w-test is not registered", Code.NotFound)];
    node.partitionTasks = { 1: [stepTask("p1-a")], 2: [stepTask("p2-a")] };
    try {
      await runAll(node, 2);
      assert.equal(node.registered.length, 2);
      assert.equal(node.polled[0], null, "one partition first: no metadata");
      assert.ok(node.polled.includes("1") && node.polled.includes("2"), JSON.stringify(node.polled));
      assert.deepEqual(reports(node), { "p1-a": "ran p1-a", "p2-a": "ran p2-a" });
    } finally {
      await node.stop();
    }
  });
});
