import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { dial, StepKind, TaskHandler, TaskRunner, Worker, type ModelInput, type Tool, type ToolCall, type WorkerOptions } from "../src/index.js";
import { FakeNode, task } from "./fake.js";

const echo: Tool = { name: "echo", access: "read", run: (c) => ({ content: c.arguments }) };

async function runUntil(node: FakeNode, opts: WorkerOptions, until: () => boolean): Promise<void> {
  const ch = dial(node.addr, { token: "" });
  const w = new Worker(ch, { id: "w-agents", pollWaitMs: 100, shutdownGraceMs: 500, ...opts });
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

describe("agents", () => {
  it("registers the Worker's agents and each tool's agents", async () => {
    const node = await new FakeNode().start();
    try {
      await runUntil(node, {
        agents: ["support@v2", "billing"], model: { run: () => ({ text: "hi" }) },
        tools: [echo, { name: "refund", access: "single_attempt", agents: ["billing"], run: () => ({ content: "ok" }) }],
      }, () => node.registered.length > 0);
      const r = node.registered[0];
      assert.deepEqual(r.agents, ["support@v2", "billing"]);
      assert.deepEqual(r.tools.map((t) => [t.name, t.agents]), [["echo", []], ["refund", ["billing"]]]);
    } finally {
      await node.stop();
    }
  });

  it("hands the session's agent and the dispatch epoch to model and tool handlers", async () => {
    const node = await new FakeNode().start();
    node.tasks.push(task({ kind: StepKind.RUN_MODEL, runner: TaskRunner.MODEL, handler: TaskHandler.MODEL, stepId: "m1", agent: "support@v2", epoch: 7n }));
    node.tasks.push(task({ kind: StepKind.CALL_TOOL, tool: "echo", stepId: "t1", agent: "support@v2", epoch: 7n }));
    let model: ModelInput | undefined;
    let tool: ToolCall | undefined;
    try {
      await runUntil(node, {
        agents: ["support@v2"],
        model: { run: (i) => ((model = i), { text: "hi" }) },
        tools: [{ ...echo, run: (c) => ((tool = c), { content: "x" }) }],
      }, () => node.of("report").length >= 2);
      assert.equal(model?.agent, "support@v2");
      assert.equal(model?.epoch, 7n);
      assert.equal(tool?.agent, "support@v2");
      assert.equal(tool?.epoch, 7n);
    } finally {
      await node.stop();
    }
  });

  const ch = dial("127.0.0.1:1", { token: "" });
  const model = { run: () => ({ text: "" }) };
  const bad: [string, WorkerOptions, RegExp][] = [
    ["agents on a Worker that runs no model", { agents: ["a"], tools: [echo] }, /runs no model/],
    ["an empty agent name", { agents: [""], model }, /worker agents: an empty agent name/],
    ["an agent listed twice", { agents: ["a", "a"], model }, /"a" is listed twice/],
    ["an agent with a space", { agents: ["my agent"], model }, /holds a character/],
    ["an agent holding ..", { agents: ["a..b"], model }, /must not be "." or hold ".."/],
    ["an agent too long", { agents: ["a".repeat(201)], model }, /longer than 200 bytes/],
    ["a tool's bad agent", { tools: [{ ...echo, agents: ["x y"] }] }, /tool "echo" agents: agent "x y" holds a character/],
    ["agents that are not a list", { agents: "a" as never, model }, /want a list of agent names/],
  ];
  for (const [what, opts, want] of bad) {
    it(`refuses ${what}`, () => assert.throws(() => new Worker(ch, opts), want));
  }
});
