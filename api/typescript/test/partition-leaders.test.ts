// A channel given several nodes sends a partition's calls straight to the
// partition's leader, learned from the trailers of its calls: a node that
// forwarded a call names the leader in dex-partition-leader, a node that
// served one leads it. A follower's dex-leader names no partition's leader.
// Against fake nodes on 127.0.0.1 that answer with the trailers a test scripts.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { WorkerService } from "../gen/dex/v1/workers_pb.js";
import { inPartition } from "../src/channel.js";
import { dial, Worker, type ToolCall } from "../src/index.js";
import { FakeNode, task } from "./fake.js";

/** The partition of a call: its dex-partition metadata, or the "pK-" its Step id starts with. */
function partitionOf(partition: string | null, stepId = ""): string | null {
  return partition ?? /^p(\d+)-/.exec(stepId)?.[1] ?? null;
}

/**
 * The trailers of a node of a cluster of count partitions that forwards the
 * calls of the partitions in forwards to the leader given; a registration
 * (of every partition) gets none.
 */
function trailersOf(count: number, forwards: Record<string, string> = {}): FakeNode["trailers"] {
  return (m, p, ref) => {
    const out: Record<string, string> = {};
    if (m === "register" || m === "deregister") return out;
    out["dex-partitions"] = String(count);
    const leader = forwards[partitionOf(p, ref?.stepId) ?? ""];
    if (leader) out["dex-partition-leader"] = leader;
    return out;
  };
}

/** How many calls of method of partition k each node got. */
function where(nodes: Record<string, FakeNode>, method: string, k: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [name, n] of Object.entries(nodes)) out[name] = n.of(method).filter((c) => partitionOf(c.partition, c.ref?.stepId) === k).length;
  return out;
}

async function startNodes(): Promise<{ a: FakeNode; b: FakeNode; c: FakeNode; stop: () => Promise<void> }> {
  const [a, b, c] = await Promise.all([new FakeNode().start(), new FakeNode().start(), new FakeNode().start()]);
  return { a, b, c, stop: async () => void (await Promise.all([a.stop(), b.stop(), c.stop()])) };
}

describe("a channel to a partitioned cluster", () => {
  it("sends a partition's calls to the leader a forward named, and keeps them there", async () => {
    const { a, b, c, stop } = await startNodes();
    // Two partitions: a leads 0, b leads 1; a forwards partition 1's calls to b.
    a.trailers = trailersOf(2, { 1: b.addr });
    b.trailers = trailersOf(2);
    c.trailers = trailersOf(2);
    const ch = dial(`dex:///${a.addr},${b.addr},${c.addr}`, { token: "" });
    const svc = createClient(WorkerService, ch);
    const poll = (k: number) => svc.pollTask({ workerId: "w", maxTasks: 1 }, { headers: { "dex-partition": String(k) }, ...inPartition(k) });
    try {
      await poll(1);
      assert.equal(ch.current, a.addr, "the first call goes where calls go");
      assert.equal(ch.partitionLeader(1), b.addr);
      for (let i = 0; i < 3; i++) await poll(1);
      await svc.claimTask({ ref: { stepId: "p1-s1", attempt: 1, token: "t" } }, inPartition(1));
      await svc.heartbeat({ ref: { stepId: "p1-s1", attempt: 1, token: "t", seq: 1n } }, inPartition(1));
      assert.deepEqual(where({ a, b, c }, "poll", "1"), { a: 1, b: 3, c: 0 });
      assert.deepEqual(where({ a, b, c }, "claim", "1"), { a: 0, b: 1, c: 0 });
      assert.deepEqual(where({ a, b, c }, "heartbeat", "1"), { a: 0, b: 1, c: 0 });
      assert.equal(b.of("claim")[0].partition, null, "an attempt call carries no dex-partition metadata");

      // The leader stops answering: its partition's calls go where calls go,
      // and the node there names the leader again.
      b.refuse.poll = [new ConnectError("connection reset", Code.Unavailable)];
      await assert.rejects(poll(1));
      assert.equal(ch.partitionLeader(1), "");
      await poll(1);
      assert.equal(ch.partitionLeader(1), b.addr);
      await poll(1);
      assert.deepEqual(where({ a, b, c }, "poll", "1"), { a: 2, b: 5, c: 0 });

      // A new partition count forgets every leader.
      a.trailers = trailersOf(3);
      await poll(0);
      assert.equal(ch.partitionLeader(1), "");
    } finally {
      ch.close();
      await stop();
    }
  });

  it("learns that a node that served a call leads its partition", async () => {
    const { a, b, c, stop } = await startNodes();
    for (const n of [a, b, c]) n.trailers = trailersOf(2);
    // A call of no partition (a registration) refused naming c moves calls to c.
    a.refuse.register = [new ConnectError("not the leader", Code.Unavailable, { "dex-leader": c.addr })];
    const ch = dial(`dex:///${a.addr},${b.addr},${c.addr}`, { token: "" });
    const svc = createClient(WorkerService, ch);
    try {
      await svc.pollTask({ workerId: "w", maxTasks: 1 }, { headers: { "dex-partition": "0" }, ...inPartition(0) });
      assert.equal(ch.partitionLeader(0), a.addr, "a served partition 0's poll");
      await assert.rejects(svc.registerWorker({ workerId: "w" }));
      assert.equal(ch.current, c.addr, "calls follow the dex-leader a refusal names");
      await svc.registerWorker({ workerId: "w" });
      await svc.pollTask({ workerId: "w", maxTasks: 1 }, { headers: { "dex-partition": "0" }, ...inPartition(0) });
      assert.equal(c.of("register").length, 1);
      assert.deepEqual(where({ a, b, c }, "poll", "0"), { a: 2, b: 0, c: 0 }, "partition 0's calls stay with the node that served it");
    } finally {
      ch.close();
      await stop();
    }
  });

  it("takes no follower's dex-leader for a partition's leader", async () => {
    const { a, b, c, stop } = await startNodes();
    for (const n of [a, b, c]) n.trailers = trailersOf(2);
    a.refuse.poll = [new ConnectError("not the leader", Code.Unavailable, { "dex-leader": c.addr })];
    const ch = dial(`dex:///${a.addr},${b.addr},${c.addr}`, { token: "" });
    const svc = createClient(WorkerService, ch);
    const poll = () => svc.pollTask({ workerId: "w", maxTasks: 1 }, { headers: { "dex-partition": "1" }, ...inPartition(1) });
    try {
      await assert.rejects(poll());
      assert.equal(ch.current, c.addr);
      assert.equal(ch.partitionLeader(1), "", "a refusal's dex-leader is where every call goes, not partition 1's leader");
      // c forwards partition 1 to b: b, not c, is its leader.
      c.trailers = trailersOf(2, { 1: b.addr });
      await poll();
      await poll();
      assert.equal(ch.partitionLeader(1), b.addr);
      assert.deepEqual(where({ a, b, c }, "poll", "1"), { a: 1, b: 1, c: 1 });
    } finally {
      ch.close();
      await stop();
    }
  });

  it("given one address (a load balancer), sends every call there", async () => {
    const { a, b, c, stop } = await startNodes();
    a.trailers = trailersOf(2, { 1: b.addr });
    const ch = dial(a.addr, { token: "" });
    const svc = createClient(WorkerService, ch);
    try {
      for (let i = 0; i < 3; i++) await svc.pollTask({ workerId: "w", maxTasks: 1 }, { headers: { "dex-partition": "1" }, ...inPartition(1) });
      assert.equal(ch.partitionLeader(1), "");
      assert.deepEqual(where({ a, b, c }, "poll", "1"), { a: 3, b: 0, c: 0 });
    } finally {
      ch.close();
      await stop();
    }
  });
});

describe("a Worker on a partitioned cluster", () => {
  it("polls each partition at its leader and makes a task's calls there, without partition metadata", async () => {
    const { a, b, c, stop } = await startNodes();
    // a leads partition 0 and forwards partition 1's calls to b, which leads it.
    a.partitions = [2];
    a.trailers = trailersOf(2, { 1: b.addr });
    b.trailers = trailersOf(2);
    a.tasks.push(task({ tool: "echo", stepId: "p0-s1" }));
    b.partitionTasks = { 1: [task({ tool: "echo", stepId: "p1-s1" })] };
    const ch = dial(`dex:///${a.addr},${b.addr},${c.addr}`, { token: "" });
    // The handler runs a few heartbeat intervals (100 ms).
    const echo = async (call: ToolCall) => {
      await new Promise((r) => setTimeout(r, 350));
      return { content: `ran ${call.stepId}` };
    };
    const w = new Worker(ch, { id: "w-route", pollWaitMs: 100, shutdownGraceMs: 500, tools: [{ name: "echo", access: "read", run: echo }] });
    const ctl = new AbortController();
    const run = w.run(ctl.signal);
    try {
      const deadline = Date.now() + 10_000;
      while (a.of("report").length + b.of("report").length < 2) {
        if (Date.now() > deadline) throw new Error(`not every task was reported: a ${JSON.stringify(a.calls.map((x) => x.method))} b ${JSON.stringify(b.calls.map((x) => x.method))}`);
        await new Promise((r) => setTimeout(r, 10));
      }
      // Partition 1: its first poll went to a, which named b; every later call went to b.
      const polls = where({ a, b, c }, "poll", "1");
      assert.ok(polls.a === 1 && polls.b > 0 && polls.c === 0, JSON.stringify(polls));
      for (const m of ["claim", "heartbeat", "report"]) {
        const at = where({ a, b, c }, m, "1");
        assert.ok(at.a === 0 && at.b > 0 && at.c === 0, `partition 1's ${m} calls went to ${JSON.stringify(at)}`);
        assert.ok(b.of(m).every((x) => x.partition === null), `${m} carries no dex-partition metadata`);
      }
      // Partition 0: a serves it, so its calls stay at a.
      for (const m of ["poll", "claim", "heartbeat", "report"]) {
        const at = where({ a, b, c }, m, "0");
        assert.ok(at.a > 0 && at.b === 0 && at.c === 0, `partition 0's ${m} calls went to ${JSON.stringify(at)}`);
      }
      assert.equal(c.calls.filter((x) => x.method !== "register" && x.method !== "deregister").length, 0);
    } finally {
      ctl.abort();
      await run;
      ch.close();
      await stop();
    }
  });
});
