import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { Code, ConnectError } from "@connectrpc/connect";
import {
  dial, ErrorType, ModelError, StepKind, TaskHandler, TaskRunner, ToolAccess, toolCallNotRunErrorPrefix, ToolCallNotRunErrorPrefix, Worker, type Tool, type WorkerOptions,
} from "../src/index.js";
import { FakeNode, task } from "./fake.js";

const echo: Tool = { name: "echo", access: "read", run: (c) => ({ content: c.arguments }) };

/** Runs a Worker against node until until() holds, then stops it. */
async function runUntil(node: FakeNode, opts: WorkerOptions, until: () => boolean, target = node.addr, token = ""): Promise<void> {
  const ch = dial(target, { token });
  const w = new Worker(ch, { id: "w-test", pollWaitMs: 100, shutdownGraceMs: 500, ...opts });
  const stop = new AbortController();
  const running = w.run(stop.signal);
  const deadline = Date.now() + 10_000;
  while (!until()) {
    if (Date.now() > deadline) {
      stop.abort();
      await running;
      ch.close();
      throw new Error("timed out: calls " + JSON.stringify(node.calls.map((c) => c.method)));
    }
    await new Promise((r) => setTimeout(r, 10));
  }
  stop.abort();
  await running;
  ch.close();
}

describe("registration", () => {
  it("sends each tool with its policy, and whether it runs the model", async () => {
    const node = await new FakeNode().start();
    try {
      await runUntil(node, {
        tools: [
          echo,
          { name: "deploy", access: "idempotent_write", needsApproval: true, run: () => ({ content: "ok" }) },
          { name: "build", access: ToolAccess.IDEMPOTENT_WRITE, longRunning: true, pollIntervalMs: 250, run: () => ({ content: "", taskId: "b1" }), poll: () => ({ done: true }) },
          { name: "email", access: "single_attempt", runTimeoutMs: 4000, run: () => ({ content: "sent" }) },
        ],
        model: { run: () => ({ text: "hi" }) },
      }, () => node.registered.length > 0);
      const r = node.registered[0];
      assert.equal(r.workerId, "w-test");
      assert.equal(r.runsModel, true);
      assert.deepEqual(r.tools.map((t) => [t.name, t.access, t.needsApproval, t.longRunning, t.pollIntervalMs, t.runTimeoutMs]), [
        ["echo", ToolAccess.READ, false, false, 0, 0],
        ["deploy", ToolAccess.IDEMPOTENT_WRITE, true, false, 0, 0],
        ["build", ToolAccess.IDEMPOTENT_WRITE, false, true, 250, 0],
        ["email", ToolAccess.SINGLE_ATTEMPT, false, false, 0, 4000],
      ]);
    } finally {
      await node.stop();
    }
  });

  it("sends the token as a bearer credential, from the option or $DEX_TOKEN", async () => {
    const node = await new FakeNode().start();
    try {
      await runUntil(node, { tools: [echo] }, () => node.registered.length > 0, node.addr, "s3cret");
      assert.equal(node.registered[0].authorization, "Bearer s3cret");
      process.env.DEX_TOKEN = " from-env\n";
      const ch = dial(node.addr);
      delete process.env.DEX_TOKEN;
      const w = new Worker(ch, { id: "w-env", tools: [echo], pollWaitMs: 100 });
      const stop = new AbortController();
      const running = w.run(stop.signal);
      while (node.registered.length < 2) await new Promise((r) => setTimeout(r, 10));
      stop.abort();
      await running;
      ch.close();
      assert.equal(node.registered[1].authorization, "Bearer from-env");
    } finally {
      await node.stop();
    }
  });

  it("registers again when the cluster says it does not know the Worker", async () => {
    const node = await new FakeNode().start();
    node.refuse.poll = [new ConnectError("worker w-test is not registered", Code.NotFound)];
    try {
      await runUntil(node, { tools: [echo] }, () => node.registered.length >= 2);
      assert.deepEqual(node.calls.slice(0, 3).map((c) => c.method), ["register", "poll", "register"]);
    } finally {
      await node.stop();
    }
  });
});

describe("bad input", () => {
  const ch = dial("127.0.0.1:1", { token: "" });
  const bad: [string, WorkerOptions, RegExp][] = [
    ["a tool without a policy", { tools: [{ name: "x", run: () => ({ content: "" }) } as unknown as Tool] }, /tool "x" has no policy/],
    ["a tool with an unknown policy", { tools: [{ name: "x", access: "write" as never, run: () => ({ content: "" }) }] }, /has no policy/],
    ["a tool without a name", { tools: [{ access: "read", run: () => ({ content: "" }) } as unknown as Tool] }, /a tool has no name/],
    ["a tool without a handler", { tools: [{ name: "x", access: "read" } as unknown as Tool] }, /tool "x" has no handler/],
    ["a long-running tool without a poll handler", { tools: [{ name: "b", access: "read", longRunning: true, run: () => ({ content: "" }) }] }, /no poll handler/],
    ["a built-in's name", { tools: [{ name: "ask_user", access: "read", run: () => ({ content: "" }) }] }, /built-in/],
    ["a tool twice", { tools: [echo, echo] }, /registered twice/],
    ["neither tool nor model", {}, /needs a tool or a model/],
    ["a negative run timeout", { tools: [{ ...echo, runTimeoutMs: -1 }] }, /run timeout/],
  ];
  for (const [what, opts, want] of bad) {
    it(`refuses ${what}`, () => assert.throws(() => new Worker(ch, opts), want));
  }
  it("refuses a malformed target", () => {
    assert.throws(() => dial("dex:///"), /names no address/);
    assert.throws(() => dial("localhost"), /is not host:port/);
  });

  it("fails a RunModel attempt whose output has a tool call without a call id, sending no output", async () => {
    const node = await new FakeNode().start();
    node.tasks.push(task({ kind: StepKind.RUN_MODEL, runner: TaskRunner.MODEL, handler: TaskHandler.MODEL }));
    try {
      await runUntil(node, { model: { run: () => ({ toolCalls: [{ callId: "", tool: "echo", arguments: {} }] }) } },
        () => node.of("report").length > 0);
      const r = node.of("report")[0];
      assert.equal(r.result?.outcome.case, "failure");
      const f = r.result?.outcome.value as { errorType: ErrorType; error: string };
      assert.equal(f.errorType, ErrorType.UNKNOWN);
      assert.match(f.error, /has no call id/);
    } finally {
      await node.stop();
    }
  });
});

describe("running a task", () => {
  it("claims before the handler runs and hands it the idempotency key", async () => {
    const node = await new FakeNode().start();
    node.tasks.push(task({ tool: "echo", arguments: '{"a":1}' }));
    let claimsBeforeHandler = -1;
    let key = "";
    try {
      await runUntil(node, {
        tools: [{
          ...echo, run: (c) => {
            claimsBeforeHandler = node.of("claim").length;
            key = c.idempotencyKey;
            return { content: c.arguments };
          },
        }],
      }, () => node.of("report").length > 0);
      assert.equal(claimsBeforeHandler, 1);
      assert.equal(key, "dex:s1:call-1-1");
      const r = node.of("report")[0];
      assert.equal(r.ref?.seq, 2n);
      assert.deepEqual(r.result?.outcome, { case: "toolResult", value: r.result?.outcome.value });
      assert.equal((r.result?.outcome.value as { content: string }).content, '{"a":1}');
    } finally {
      await node.stop();
    }
  });

  it("aborts the handler when a heartbeat says the attempt was cancelled, and reports nothing", async () => {
    const node = await new FakeNode().start();
    node.tasks.push(task({ tool: "slow" }));
    node.cancelAfterHeartbeats = 1;
    let aborted = false;
    let handlerEnded = false;
    try {
      await runUntil(node, {
        tools: [{
          name: "slow", access: "read", run: (c) => new Promise((_, reject) => {
            c.signal.addEventListener("abort", () => {
              aborted = true;
              handlerEnded = true;
              reject(c.signal.reason);
            });
          }),
        }],
      }, () => handlerEnded);
      await new Promise((r) => setTimeout(r, 300));
      assert.equal(aborted, true);
      assert.equal(node.of("report").length, 0, "a cancelled attempt's result is dropped");
    } finally {
      await node.stop();
    }
  });

  it("sends a refused report again with the same sequence number and result", async () => {
    const node = await new FakeNode().start();
    node.tasks.push(task({ tool: "echo" }));
    node.refuse.report = [
      new ConnectError("no leader", Code.Unavailable),
      new ConnectError("leadership lost", Code.Unavailable),
    ];
    node.refuse.claim = [new ConnectError("no leader", Code.Unavailable)];
    let runs = 0;
    try {
      await runUntil(node, { tools: [{ ...echo, run: () => ({ content: `run ${++runs}` }) }] }, () => node.of("report").length >= 3);
      const claims = node.of("claim");
      assert.deepEqual(claims.map((c) => c.ref?.seq), [1n, 1n]);
      const reports = node.of("report");
      assert.deepEqual(reports.map((c) => c.ref?.seq), [2n, 2n, 2n]);
      assert.deepEqual(reports.map((c) => c.ref?.token), ["tok-1", "tok-1", "tok-1"]);
      assert.deepEqual(reports.map((c) => (c.result?.outcome.value as { content: string }).content), ["run 1", "run 1", "run 1"]);
      assert.equal(runs, 1, "the handler ran once");
    } finally {
      await node.stop();
    }
  });

  it("fails a task whose handler throws, with a ModelError's type for a model", async () => {
    const node = await new FakeNode().start();
    node.tasks.push(task({ kind: StepKind.RUN_MODEL, runner: TaskRunner.MODEL, handler: TaskHandler.MODEL }));
    try {
      await runUntil(node, { model: { run: () => { throw new ModelError(ErrorType.RATE_LIMIT, "slow down"); } } }, () => node.of("report").length > 0);
      const f = node.of("report")[0].result?.outcome.value as { errorType: ErrorType; error: string };
      assert.equal(f.errorType, ErrorType.RATE_LIMIT);
      assert.equal(f.error, "slow down");
    } finally {
      await node.stop();
    }
  });
});

describe("following the node that serves", () => {
  it("moves to the leader a refusal names in the dex-leader trailer", async () => {
    const follower = await new FakeNode().start();
    const leader = await new FakeNode().start();
    follower.serving = true; // it claims to serve, but refuses: the trailer decides
    const refusal = () => new ConnectError("not the leader", Code.Unavailable, { "dex-leader": leader.addr });
    follower.refuse.register = [refusal(), refusal(), refusal()];
    leader.serving = false;
    try {
      await runUntil(leader, { tools: [echo] }, () => leader.registered.length > 0, `dex:///${follower.addr},${leader.addr}`);
      assert.equal(follower.registered.length, 0);
    } finally {
      await follower.stop();
      await leader.stop();
    }
  });

  it("uses the node whose health check says SERVING", async () => {
    const a = await new FakeNode().start();
    const b = await new FakeNode().start();
    a.serving = false;
    try {
      await runUntil(b, { tools: [echo] }, () => b.registered.length > 0, `dex:///${a.addr},${b.addr}`);
      assert.equal(a.registered.length, 0);
    } finally {
      await a.stop();
      await b.stop();
    }
  });
});

it("exports the not-run prefix the cluster gives a call that never ran, under both its names", () => {
  assert.equal(toolCallNotRunErrorPrefix, "the tool did not run, so it is safe to call again");
  assert.equal(ToolCallNotRunErrorPrefix, toolCallNotRunErrorPrefix);
});
