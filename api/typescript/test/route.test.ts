import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { dial, StepKind, TaskHandler, TaskRunner, Worker, type WorkerOptions } from "../src/index.js";
import { FakeNode, task } from "./fake.js";

async function runUntil(node: FakeNode, opts: WorkerOptions, until: () => boolean): Promise<void> {
  const ch = dial(node.addr, { token: "" });
  const w = new Worker(ch, { id: "w1", pollWaitMs: 100, shutdownGraceMs: 500, ...opts });
  const stop = new AbortController();
  const running = w.run(stop.signal);
  const deadline = Date.now() + 10_000;
  try {
    while (!until()) {
      if (Date.now() > deadline) throw new Error("timed out: calls " + JSON.stringify(node.calls.map((c) => c.method)));
      await new Promise((r) => setTimeout(r, 10));
    }
  } finally {
    stop.abort();
    await running;
    ch.close();
  }
}

describe("how a task runs", () => {
  it("runs the handler the task names, whatever its kind", async () => {
    const node = await new FakeNode().start();
    const poll = task({ kind: StepKind.UNSPECIFIED, handler: TaskHandler.POLL, tool: "render", stepId: "p1" });
    poll.taskId = "job-7";
    node.tasks.push(poll);
    const ran: string[] = [];
    try {
      await runUntil(node, {
        tools: [{
          name: "render", access: "read", longRunning: true,
          run: () => { ran.push("run"); return { content: "" }; },
          poll: (c) => { ran.push(`poll ${c.taskId}`); return { done: true, result: { content: "rendered" } }; },
        }],
      }, () => node.of("report").length > 0);
      assert.deepEqual(ran, ["poll job-7"]);
      const r = node.of("report")[0];
      assert.equal(r.result?.outcome.case, "pollResult");
      const pr = r.result?.outcome.value as { done: boolean; result?: { content: string } };
      assert.equal(pr.done, true);
      assert.equal(pr.result?.content, "rendered");
    } finally {
      await node.stop();
    }
  });

  it("fails, unclaimed and saying why, a task that does not say how it runs", async () => {
    const node = await new FakeNode().start();
    node.tasks.push(
      task({ stepId: "old", runner: TaskRunner.UNSPECIFIED, handler: TaskHandler.UNSPECIFIED, tool: "echo" }),
      task({ stepId: "mixed", runner: TaskRunner.MODEL, handler: TaskHandler.TOOL, tool: "echo" }),
      task({ stepId: "nohandler", handler: TaskHandler.UNSPECIFIED, tool: "echo" }),
    );
    let ran = 0;
    try {
      await runUntil(node, {
        tools: [{ name: "echo", access: "read", run: () => { ran++; return { content: "" }; } }],
        model: { run: () => { ran++; return { text: "hi" }; } },
      }, () => node.of("report").length === 3);
      const got = new Map(node.of("report").map((r) => [r.ref?.stepId, [r.ref?.seq, (r.result?.outcome.value as { error: string }).error]]));
      assert.deepEqual(got, new Map([
        ["old", [1n, "worker w1 cannot run a STEP_KIND_CALL_TOOL Step: the task names no runner and no handler (a Dex server older than this Worker library sent it)"]],
        ["mixed", [1n, "worker w1 cannot run a STEP_KIND_CALL_TOOL Step: runner TASK_RUNNER_MODEL has no handler TASK_HANDLER_TOOL"]],
        ["nohandler", [1n, "worker w1 cannot run a STEP_KIND_CALL_TOOL Step: runner TASK_RUNNER_TOOL has no handler TASK_HANDLER_UNSPECIFIED"]],
      ]));
      assert.equal(node.of("claim").length, 0);
      assert.equal(ran, 0);
    } finally {
      await node.stop();
    }
  });
});
