// Live output (docs/design/streaming.md): the Worker's sender inside a Worker
// against the fake node (the sender alone: stream-sender.test.ts), and the
// client's offsets across a watch that reconnects.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { create } from "@bufbuild/protobuf";
import { Code, ConnectError, createRouterTransport } from "@connectrpc/connect";
import { SessionService, type WatchSessionRequest } from "../gen/dex/v1/sessions_pb.js";
import { EventSchema, type Event } from "../gen/dex/v1/types_pb.js";
import { Client, dial, LiveOffsets, StepKind, TaskHandler, TaskRunner, Worker, type ModelHandler, type Tool } from "../src/index.js";
import { streamText } from "../demo/script.js";
import { FakeNode, task } from "./fake.js";

const bytes = (s: string) => Buffer.byteLength(s, "utf8");

const tick = (ms = 0) => new Promise((r) => setTimeout(r, ms));

/** Runs a Worker on node's tasks until until() holds. */
async function runWorker(node: FakeNode, opts: { model?: ModelHandler; tools?: Tool[]; concurrency?: number }, until: () => boolean): Promise<void> {
  const ch = dial(node.addr, { token: "" });
  const w = new Worker(ch, { id: "w-stream", pollWaitMs: 100, shutdownGraceMs: 500, ...opts });
  const stop = new AbortController();
  const running = w.run(stop.signal);
  try {
    const deadline = Date.now() + 10_000;
    while (!until()) {
      if (Date.now() > deadline) throw new Error("timed out: calls " + JSON.stringify(node.calls.map((c) => c.method)));
      await tick(10);
    }
  } finally {
    stop.abort();
    await running;
    ch.close();
  }
}

const modelTask = (stepId = "st-m", attempt = 2) => task({ kind: StepKind.RUN_MODEL, runner: TaskRunner.MODEL, handler: TaskHandler.MODEL, stepId, attempt });

describe("Worker live output", () => {
  it("sends the handler's stream with the attempt's ref, and reports only once the leader holds it all", async () => {
    const node = await new FakeNode().start();
    node.appendDelayMs = 150;
    node.tasks.push(modelTask());
    try {
      const model: ModelHandler = {
        run: async (input) => {
          for (const part of ["Hel", "lo, ", "wörld"]) {
            input.stream!(part);
            await tick(5);
          }
          return { text: "Hello, wörld" };
        },
      };
      await runWorker(node, { model }, () => node.of("report").length > 0);
      assert.equal(node.output.get("st-m/2"), "Hello, wörld");
      const methods = node.calls.map((c) => c.method).filter((m) => m === "append" || m === "report");
      assert.equal(methods[methods.length - 1], "report", `the result went before the output: ${methods}`);
      const ref = node.of("append")[0].ref!;
      assert.deepEqual([ref.stepId, ref.attempt, ref.token], ["st-m", 2, "tok-1"]);
      assert.equal(node.of("report")[0].result?.outcome.case, "modelOutput");
    } finally {
      await node.stop();
    }
  });

  it("resends the whole output from 0 to a leader that lost it", async () => {
    const node = await new FakeNode().start();
    node.tasks.push(modelTask());
    try {
      const model: ModelHandler = {
        run: async (input) => {
          input.stream!("first ");
          while (node.output.get("st-m/2") !== "first ") await tick(5);
          node.output.clear(); // a new leader
          input.stream!("second");
          return { text: "first second" };
        },
      };
      await runWorker(node, { model }, () => node.of("report").length > 0);
      assert.equal(node.output.get("st-m/2"), "first second");
      assert.deepEqual(node.appended.map((a) => [a.offset, a.text]), [[0n, "first "], [6n, "second"], [0n, "first second"]]);
    } finally {
      await node.stop();
    }
  });

  it("stops streaming when the leader says stop, and does not hold the result back", async () => {
    const node = await new FakeNode().start();
    node.stopOutput = true;
    node.tasks.push(modelTask());
    try {
      const model: ModelHandler = {
        run: async (input) => {
          input.stream!("too much");
          await tick(50);
          input.stream!(" more");
          return { text: "too much more" };
        },
      };
      const t0 = Date.now();
      await runWorker(node, { model }, () => node.of("report").length > 0);
      assert.ok(Date.now() - t0 < 1500, `took ${Date.now() - t0} ms`);
      assert.deepEqual(node.appended.map((a) => a.text), ["too much"]);
    } finally {
      await node.stop();
    }
  });

  it("puts the output of a partition's attempts streamed during a call in one next call, with the partition's metadata", async () => {
    const node = await new FakeNode().start();
    node.partitions = [3];
    node.appendDelayMs = 200;
    node.partitionTasks[2] = ["a", "b", "c", "d"].map((k) => modelTask(k, 1));
    node.partitionTasks[1] = [modelTask("e", 1)];
    try {
      const aInFlight = () => node.appendCalls.some((c) => c.steps.includes("a"));
      const model: ModelHandler = {
        run: async (input) => {
          // a streams first; the others while its call is in flight.
          if (input.stepId !== "a") while (!aInFlight()) await tick(2);
          input.stream!(`${input.stepId} says hi`);
          return { text: `${input.stepId} says hi` };
        },
      };
      await runWorker(node, { model, concurrency: 12 }, () => node.of("report").length === 5);
      for (const k of ["a", "b", "c", "d", "e"]) assert.equal(node.output.get(`${k}/1`), `${k} says hi`);
      const p2 = node.appendCalls.filter((c) => c.partition === "2").map((c) => [...c.steps].sort());
      assert.deepEqual(p2, [["a"], ["b", "c", "d"]], "partition 2's calls");
      assert.deepEqual(node.appendCalls.filter((c) => c.partition !== "2"), [{ steps: ["e"], partition: "1" }]);
    } finally {
      await node.stop();
    }
  });

  it("sends no partition metadata to a cluster of one partition", async () => {
    const node = await new FakeNode().start();
    node.tasks.push(modelTask());
    try {
      const model: ModelHandler = { run: (input) => (input.stream!("hi"), { text: "hi" }) };
      await runWorker(node, { model }, () => node.of("report").length > 0);
      assert.equal(node.output.get("st-m/2"), "hi");
      assert.deepEqual(node.appendCalls, [{ steps: ["st-m"], partition: null }]);
    } finally {
      await node.stop();
    }
  });

  it("streams a tool's progress too, and nothing for a handler that does not stream", async () => {
    const node = await new FakeNode().start();
    node.tasks.push(task({ tool: "slow", stepId: "st-t" }), modelTask());
    try {
      const slow: Tool = {
        name: "slow", access: "read",
        run: (call) => {
          call.stream!("50%…");
          return { content: "done" };
        },
      };
      await runWorker(node, { tools: [slow], model: { run: () => ({ text: "quiet" }) } }, () => node.of("report").length === 2);
      assert.equal(node.output.get("st-t/1"), "50%…");
      assert.equal(node.output.has("st-m/2"), false);
    } finally {
      await node.stop();
    }
  });
});

const ev = (init: { seq?: bigint; type: string; stepId?: string; attempt?: number; offset?: bigint; text?: string }): Event =>
  create(EventSchema, {
    seq: init.seq ?? 0n, sessionId: "s1", type: init.type, stepId: init.stepId ?? "st1",
    output: init.type.startsWith("output") ? { attempt: init.attempt ?? 1, offset: init.offset ?? 0n, text: init.text ?? "" } : undefined,
  });

describe("LiveOffsets", () => {
  it("delivers each byte once: drops a repeat, trims an overlap at a byte offset, keeps attempts apart", () => {
    const l = new LiveOffsets();
    assert.equal(l.trim(ev({ type: "output", text: "héllo" }))?.output?.text, "héllo");
    assert.equal(l.offset("st1", 1), 6n);
    assert.equal(l.trim(ev({ type: "output", text: "hé" })), undefined);
    const rest = l.trim(ev({ type: "output", offset: 3n, text: "llo wörld" }))!;
    assert.deepEqual([rest.output?.offset, rest.output?.text], [6n, " wörld"]);
    assert.equal(l.offset("st1", 1), 13n);
    assert.equal(l.trim(ev({ type: "output", attempt: 2, text: "new" }))?.output?.text, "new");
    const ended = ev({ type: "output_ended" });
    assert.equal(l.trim(ended), ended);
    assert.deepEqual(l.request().map((o) => [o.stepId, o.attempt, o.offset]), [["st1", 1, 13n], ["st1", 2, 3n]]);
  });
});

describe("watchSession with liveOutput", () => {
  it("watches again with its offsets after falling behind or a takeover, delivering every byte once", async () => {
    const requests: WatchSessionRequest[] = [];
    const transport = createRouterTransport(({ service }) => {
      service(SessionService, {
        async *watchSession(req) {
          requests.push(req);
          switch (requests.length) {
            case 1:
              yield ev({ seq: 1n, type: "step_started" });
              yield ev({ type: "output", text: "Hello, " });
              throw new ConnectError("the watch fell behind", Code.ResourceExhausted);
            case 2:
              // The hub sends from the offset asked for, and one repeat.
              yield ev({ type: "output", offset: 0n, text: "Hello, " });
              yield ev({ type: "output", offset: 7n, text: "wör" });
              throw new ConnectError("leader gone", Code.Unavailable);
            default:
              yield ev({ seq: 1n, type: "step_started" });
              yield ev({ type: "output", offset: 7n, text: "wörld" });
              yield ev({ type: "output_ended" });
              yield ev({ seq: 2n, type: "step_completed" });
          }
        },
      });
    });
    const got: Event[] = [];
    for await (const e of new Client(transport).watchSession("s1", 0n, { liveOutput: true })) got.push(e);
    assert.deepEqual(got.map((e) => e.type), ["step_started", "output", "output", "output", "output_ended", "step_completed"]);
    const deltas = got.filter((e) => e.type === "output").map((e) => [e.output!.offset, e.output!.text]);
    assert.deepEqual(deltas, [[0n, "Hello, "], [7n, "wör"], [11n, "ld"]]);
    assert.deepEqual(requests.map((r) => [r.liveOutput, r.afterSeq, r.outputOffsets.map((o) => [o.stepId, o.attempt, o.offset])]), [
      [true, 0n, []], [true, 1n, [["st1", 1, 7n]]], [true, 1n, [["st1", 1, 11n]]],
    ]);
  });

  it("delivers each attempt's end once when a resumed watch is told it again, and keeps its offset", async () => {
    // The server tells a resumed watch an end again (a held attempt's end
    // replayed, or an end told from the state).
    const requests: WatchSessionRequest[] = [];
    const transport = createRouterTransport(({ service }) => {
      service(SessionService, {
        async *watchSession(req) {
          requests.push(req);
          switch (requests.length) {
            case 1:
              yield ev({ type: "output", text: "Hello" });
              yield ev({ type: "output_ended", offset: 5n });
              yield ev({ type: "output", attempt: 2, text: "Hi" });
              throw new ConnectError("leader gone", Code.Unavailable);
            case 2:
              yield ev({ type: "output_ended", offset: 5n });
              yield ev({ type: "output_abandoned", attempt: 2, offset: 2n });
              throw new ConnectError("leader gone", Code.Unavailable);
            default:
              yield ev({ type: "output_ended", offset: 5n });
              yield ev({ type: "output_abandoned", attempt: 2, offset: 2n });
              yield ev({ type: "output", attempt: 3, text: "Hey" });
              yield ev({ type: "output_ended", attempt: 3, offset: 3n });
          }
        },
      });
    });
    const got: [string, number, string][] = [];
    for await (const e of new Client(transport).watchSession("s1", 0n, { liveOutput: true })) {
      got.push([e.type, e.output!.attempt, e.output!.text]);
    }
    assert.deepEqual(got, [
      ["output", 1, "Hello"], ["output_ended", 1, ""], ["output", 2, "Hi"],
      ["output_abandoned", 2, ""], ["output", 3, "Hey"], ["output_ended", 3, ""],
    ]);
    // Ended attempts stay in the request: one missing would be sent from 0.
    assert.deepEqual(requests.map((r) => r.outputOffsets.map((o) => [o.stepId, o.attempt, o.offset])), [
      [], [["st1", 1, 5n], ["st1", 2, 2n]], [["st1", 1, 5n], ["st1", 2, 2n]],
    ]);
  });

  it("without liveOutput asks for none, and a RESOURCE_EXHAUSTED ends the watch", async () => {
    const requests: WatchSessionRequest[] = [];
    const transport = createRouterTransport(({ service }) => {
      service(SessionService, {
        // eslint-disable-next-line require-yield
        async *watchSession(req) {
          requests.push(req);
          throw new ConnectError("too many watches", Code.ResourceExhausted);
        },
      });
    });
    await assert.rejects(async () => {
      for await (const _ of new Client(transport).watchSession("s1")) { /* none */ }
    }, /too many watches/);
    assert.equal(requests.length, 1);
    assert.equal(requests[0].liveOutput, false);
  });
});

describe("the demo Worker's --stream", () => {
  it("streams the text 8 bytes at a time, each delta ending on a character's end", async () => {
    const deltas: string[] = [];
    const input = { stream: (t: string) => deltas.push(t), signal: new AbortController().signal } as unknown as Parameters<typeof streamText>[0];
    const text = "plain ascii, then é and € and 𝄞 too";
    await streamText(input, text, { delta: 8, everyMs: 1 });
    assert.equal(deltas.join(""), text);
    for (const d of deltas.slice(0, -1)) assert.ok(bytes(d) >= 8 && bytes(d) <= 11, `a delta of ${bytes(d)} bytes: ${JSON.stringify(d)}`);
    assert.ok(!deltas.some((d) => d.includes("\ufffd")), "a character was cut");
  });
});
