// Each adapter's live output through a Worker: what the leader holds of the
// attempt's output (a fake node's AppendOutputs) is the committed model
// output's text, streamed before the result; a rate limit after some deltas
// is reported as the adapter reports it without streaming.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { APICallError, simulateReadableStream } from "ai";
import { MockLanguageModelV3 } from "ai/test";
import { Agent, type Model } from "@openai/agents";
import type { SDKMessage } from "@anthropic-ai/claude-agent-sdk";
import { aiSdkAgent } from "../src/adapters/ai-sdk.js";
import { openaiAgentsAdapter } from "../src/adapters/openai-agents.js";
import { claudeAgentSdkAdapter } from "../src/adapters/claude-agent-sdk.js";
import { dial, ErrorType, StepKind, TaskHandler, TaskRunner, Worker, type ModelHandler } from "../src/index.js";
import { outputItems } from "../demo/adapter-openai-agents.js";
import { FakeNode, task, type ModelReport } from "./fake.js";

/** Runs model on one RunModel task through a Worker against a fake node: the report, what the leader holds of the attempt's output, the appends sent. */
async function runOne(model: ModelHandler): Promise<{ report: ModelReport; held: string | undefined; appends: number }> {
  const node = await new FakeNode().start();
  node.tasks.push(task({ kind: StepKind.RUN_MODEL, runner: TaskRunner.MODEL, handler: TaskHandler.MODEL, stepId: "step-1" }));
  const ch = dial(node.addr, { token: "" });
  const w = new Worker(ch, { id: "w-live", pollWaitMs: 100, shutdownGraceMs: 500, model });
  const stop = new AbortController();
  const running = w.run(stop.signal);
  try {
    const deadline = Date.now() + 10_000;
    while (node.of("report").length < 1) {
      if (Date.now() > deadline) throw new Error("timed out: calls " + JSON.stringify(node.calls.map((c) => c.method)));
      await new Promise((r) => setTimeout(r, 10));
    }
  } finally {
    stop.abort();
    await running;
    ch.close();
    await node.stop();
  }
  const o = node.of("report")[0].result?.outcome;
  const report = o?.case === "modelOutput" ? { output: o.value } : o?.case === "failure" ? { failure: o.value } : {};
  return { report, held: node.output.get("step-1/1"), appends: node.appended.length };
}

const deltas = ["The order", " ships", " on Monday."];
const usage = { inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 }, outputTokens: { total: 1, text: 1, reasoning: 0 } };

/** An AI SDK model streaming the deltas, then failing with err when given. */
function aiSdkModel(err?: Error): MockLanguageModelV3 {
  const chunks: unknown[] = [
    { type: "stream-start", warnings: [] }, { type: "text-start", id: "t1" }, ...deltas.map((delta) => ({ type: "text-delta", id: "t1", delta })),
    ...(err ? [{ type: "error", error: err }] : [{ type: "text-end", id: "t1" }, { type: "finish", finishReason: { unified: "stop", raw: undefined }, usage }]),
  ];
  return new MockLanguageModelV3({ doStream: async () => ({ stream: simulateReadableStream({ chunks, chunkDelayInMs: 5 }) as never }) });
}

const openaiModel: Model = {
  getResponse: async () => assert.fail("the turn was not streamed"),
  getStreamedResponse: async function* () {
    for (const delta of deltas) yield { type: "output_text_delta", delta, itemId: "m1" };
    yield { type: "response_done", response: { id: "r1", usage: { requests: 1, inputTokens: 1, outputTokens: 1, totalTokens: 2 }, output: outputItems({ text: deltas.join("") }) } } as never;
  },
};

async function* claudeQuery(): AsyncGenerator<SDKMessage> {
  const ev = (event: object) => ({ type: "stream_event", event, parent_tool_use_id: null, uuid: "u", session_id: "fake" }) as unknown as SDKMessage;
  yield ev({ type: "content_block_start", index: 0, content_block: { type: "text", text: "" } });
  for (const text of deltas) yield ev({ type: "content_block_delta", index: 0, delta: { type: "text_delta", text } });
  yield ev({ type: "content_block_stop", index: 0 });
  yield { type: "assistant", message: { role: "assistant", model: "claude-sonnet-4-5", content: [{ type: "text", text: deltas.join("") }] }, parent_tool_use_id: null } as unknown as SDKMessage;
  yield { type: "result", subtype: "success", result: deltas.join("") } as unknown as SDKMessage;
}

describe("an adapter's live output through a Worker", () => {
  const adapters: [string, () => ModelHandler][] = [
    ["ai-sdk", () => aiSdkAgent({ model: aiSdkModel() }).model],
    ["openai-agents", () => openaiAgentsAdapter({ agent: new Agent({ name: "t", instructions: "", model: openaiModel }) }).model],
    ["claude-agent-sdk", () => claudeAgentSdkAdapter({ query: claudeQuery }).model],
  ];
  for (const [name, model] of adapters) {
    it(`${name}: the leader holds the committed text, streamed before the result`, async () => {
      const { report, held, appends } = await runOne(model());
      assert.equal(report.output?.text, "The order ships on Monday.");
      assert.equal(held, report.output?.text);
      assert.ok(appends >= 1);
    });
  }

  it("ai-sdk: a rate limit after some deltas is reported as rate_limit with its Retry-After", async () => {
    const err = new APICallError({ message: "slow down", url: "http://127.0.0.1/", requestBodyValues: {}, statusCode: 429, responseHeaders: { "retry-after": "4" } });
    const { report, appends } = await runOne(aiSdkAgent({ model: aiSdkModel(err) }).model);
    assert.deepEqual([report.failure?.errorType, report.failure?.retryAfterMs], [ErrorType.RATE_LIMIT, 4000n]);
    assert.ok(appends >= 1, "the deltas before the error were streamed");
  });
});
