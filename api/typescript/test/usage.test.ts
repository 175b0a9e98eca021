// Model usage: what a model handler returns with its output reaches the wire
// as ModelOutput.usage (against a fake node) and a bad one is refused; each
// adapter maps its framework's answer to a Usage; the demo Worker's scripted
// model reports cmd/dexworker's fixed usage unless its script output gives
// "usage", through every adapter too.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { create } from "@bufbuild/protobuf";
import { MockLanguageModelV3 } from "ai/test";
import { Agent, Runner, Usage as AgentsUsage, type Model } from "@openai/agents";
import type { SDKMessage } from "@anthropic-ai/claude-agent-sdk";
import { aiSdkAgent, aiSdkUsage } from "../src/adapters/ai-sdk.js";
import { openaiAgentsAdapter, openaiAgentsUsage } from "../src/adapters/openai-agents.js";
import { claudeAgentSdkAdapter, claudeAgentSdkUsage } from "../src/adapters/claude-agent-sdk.js";
import {
  ErrorType, HistoryEntrySchema, HistoryKind, ModelOutputSchema, toModelOutput, type HistoryEntry, type ModelHandler, type ModelInput, type Usage,
} from "../src/index.js";
import { demoAgent } from "../demo/adapters.js";
import { outputItems } from "../demo/adapter-openai-agents.js";
import { Ledger } from "../demo/ledger.js";
import { demoModelName, demoUsage, modelOutput, parseScript, ScriptedModel, usageHelp } from "../demo/script.js";
import { DemoTools } from "../demo/tools.js";
import { runModelTasks } from "./fake.js";

/** A usage as [input, output, cost, model], numbers for bigints. */
const u = (x: Usage | undefined) => (x ? [Number(x.inputTokens), Number(x.outputTokens), Number(x.costMicros), x.model] : undefined);
const h = (seq: number, kind: HistoryKind, text = ""): HistoryEntry => create(HistoryEntrySchema, { seq: BigInt(seq), kind, text });
const input = (history: HistoryEntry[], attempt = 1): ModelInput => ({
  sessionId: "s1", stepId: "st1", attempt, history, tools: [], compact: false, epoch: 1n, agent: "", signal: new AbortController().signal,
});

describe("a model handler's usage", () => {
  it("reaches the wire as ModelOutput.usage, however it is given, and is left out when not given", async () => {
    const answers: Record<string, ReturnType<ModelHandler["run"]>> = {
      numbers: { text: "a", toolCalls: [{ callId: "c1", tool: "lookup" }], usage: { inputTokens: 1200, outputTokens: 80, costMicros: 3456, model: "gpt-test" } },
      bigints: { text: "b", usage: { outputTokens: (1n << 64n) - 1n } },
      message: create(ModelOutputSchema, { text: "c", usage: { inputTokens: 5n, costMicros: 9n, model: "m" } }),
      none: { text: "d" },
    };
    const got = await runModelTasks({ run: (i) => answers[i.stepId] }, Object.keys(answers));
    assert.deepEqual(u(got.get("numbers")!.output!.usage), [1200, 80, 3456, "gpt-test"]);
    assert.deepEqual(got.get("numbers")!.output!.toolCalls.map((c) => c.callId), ["c1"]);
    assert.equal(got.get("bigints")!.output!.usage!.outputTokens, (1n << 64n) - 1n);
    assert.deepEqual(u(got.get("message")!.output!.usage), [5, 0, 9, "m"]);
    assert.equal(got.get("none")!.output!.text, "d");
    assert.equal(got.get("none")!.output!.usage, undefined);
  });

  it("fails the attempt, sending no output, when a count is not a whole number from 0", async () => {
    const got = await runModelTasks({ run: () => ({ text: "x", usage: { inputTokens: -1 } }) }, ["bad"]);
    assert.equal(got.get("bad")!.output, undefined);
    assert.match(got.get("bad")!.failure!.error, /usage inputTokens must be a whole number from 0 to 2\^64-1, not -1/);
    assert.equal(got.get("bad")!.failure!.errorType, ErrorType.UNKNOWN);
  });

  it("is checked by toModelOutput", () => {
    assert.throws(() => toModelOutput({ usage: { outputTokens: 1.5 } }), /usage outputTokens must be a whole number/);
    assert.throws(() => toModelOutput({ usage: { costMicros: Number.NaN } }), /usage costMicros must be a whole number.*not NaN/);
    assert.throws(() => toModelOutput({ usage: { costMicros: 1n << 64n } }), /usage costMicros/);
    assert.throws(() => toModelOutput({ usage: { inputTokens: "5" as never } }), /not "5"/);
    assert.throws(() => toModelOutput({ usage: { model: 4 as never } }), /usage model must be a string/);
    assert.deepEqual(u(toModelOutput({ usage: {} }).usage), [0, 0, 0, ""]);
  });
});

describe("the AI SDK adapter's usage", () => {
  const v3usage = (input: number | undefined, output: number | undefined) => ({
    inputTokens: { total: input, noCache: input, cacheRead: 0, cacheWrite: 0 }, outputTokens: { total: output, text: output, reasoning: 0 },
  });

  it("is generateText's tokens and the model that answered, with no cost", async () => {
    const model = new MockLanguageModelV3({
      doGenerate: async () => ({
        content: [{ type: "text", text: "hi" }], finishReason: { unified: "stop", raw: undefined }, warnings: [], usage: v3usage(321, 45),
        response: { modelId: "gpt-4o-2024-08-06" },
      }),
    });
    const out = await aiSdkAgent({ model }).model.run(input([h(1, HistoryKind.USER, "hi")]));
    assert.deepEqual(out.usage, { inputTokens: 321, outputTokens: 45, model: "gpt-4o-2024-08-06" });
    assert.deepEqual(u(toModelOutput(out).usage), [321, 45, 0, "gpt-4o-2024-08-06"]);
  });

  it("takes the model's own id when the response names none, and 0 for tokens a provider does not give", async () => {
    const model = new MockLanguageModelV3({
      modelId: "mock-id", doGenerate: async () => ({ content: [{ type: "text", text: "hi" }], finishReason: { unified: "stop", raw: undefined }, warnings: [], usage: v3usage(undefined, undefined) }),
    });
    const out = await aiSdkAgent({ model }).model.run(input([h(1, HistoryKind.USER, "hi")]));
    assert.deepEqual(out.usage, { inputTokens: 0, outputTokens: 0, model: "mock-id" });
    assert.deepEqual(aiSdkUsage({ totalUsage: { inputTokens: 10.4, outputTokens: -3 } as never, response: undefined }), { inputTokens: 10, outputTokens: 0, model: "" });
  });
});

describe("the OpenAI Agents SDK adapter's usage", () => {
  const fake = (usage: AgentsUsage, providerData?: Record<string, unknown>): Model => ({
    getResponse: async () => ({ usage, output: outputItems({ text: "ok" }), providerData }),
    getStreamedResponse: () => {
      throw new Error("no");
    },
  });

  it("is the run's tokens and the model the provider's response names, with no cost", async () => {
    const agent = new Agent({ name: "t", instructions: "", model: fake(new AgentsUsage({ requests: 1, inputTokens: 900, outputTokens: 60, totalTokens: 960 }), { model: "gpt-4.1-2025-04-14" }) });
    const out = await openaiAgentsAdapter({ agent }).model.run(input([h(1, HistoryKind.USER, "go")]));
    assert.deepEqual(out.usage, { inputTokens: 900, outputTokens: 60, model: "gpt-4.1-2025-04-14" });
  });

  it("names the agent's model when the response does not", async () => {
    let asked = "";
    const runner = new Runner({
      modelProvider: { getModel: async (name?: string) => (asked = name ?? "", fake(new AgentsUsage({ requests: 1, inputTokens: 4, outputTokens: 2, totalTokens: 6 }))) },
    });
    const agent = new Agent({ name: "t", instructions: "", model: "my-model" });
    const out = await openaiAgentsAdapter({ agent, runner }).model.run(input([h(1, HistoryKind.USER, "go")]));
    assert.equal(asked, "my-model");
    assert.deepEqual(out.usage, { inputTokens: 4, outputTokens: 2, model: "my-model" });
    assert.deepEqual(openaiAgentsUsage({ state: { usage: new AgentsUsage() }, rawResponses: [] }), { inputTokens: 0, outputTokens: 0, model: "" });
  });
});

describe("the Claude Agent SDK adapter's usage", () => {
  const modelUsage = (inputTokens: number, outputTokens: number, cacheRead: number, cacheCreation: number, costUSD: number) => ({
    inputTokens, outputTokens, cacheReadInputTokens: cacheRead, cacheCreationInputTokens: cacheCreation, webSearchRequests: 0, costUSD, contextWindow: 200000, maxOutputTokens: 32000,
  });
  const mainUsage = { input_tokens: 3, output_tokens: 50, cache_read_input_tokens: 1000, cache_creation_input_tokens: 200 };

  it("is the result's tokens over every model call, its cost in micro-dollars and the model that answered", async () => {
    const a = claudeAgentSdkAdapter({
      query: async function* () {
        yield { type: "assistant", message: { role: "assistant", model: "claude-sonnet-4-5", content: [{ type: "text", text: "hi" }] }, parent_tool_use_id: null } as never;
        // A sub-agent's message names its own model, and the CLI's own messages "<synthetic>": neither answered.
        yield { type: "assistant", message: { role: "assistant", model: "claude-haiku-4-5", content: [] }, parent_tool_use_id: "t1" } as never;
        yield { type: "assistant", message: { role: "assistant", model: "<synthetic>", content: [] }, parent_tool_use_id: null } as never;
        yield {
          type: "result", subtype: "success", result: "hi", total_cost_usd: 0.0123456, usage: mainUsage,
          modelUsage: { "claude-sonnet-4-5": modelUsage(3, 50, 1000, 200, 0.012), "claude-haiku-4-5": modelUsage(10, 5, 0, 0, 0.0003456) },
        } as unknown as SDKMessage;
      },
    });
    const out = await a.model.run(input([h(1, HistoryKind.USER, "go")]));
    // Input: 3 + 1000 cache reads + 200 cache writes, and the sub-agent's 10.
    assert.deepEqual(out.usage, { inputTokens: 1213, outputTokens: 55, costMicros: 12346, model: "claude-sonnet-4-5" });
  });

  it("falls back to the main loop's usage and modelUsage's only model", () => {
    assert.deepEqual(claudeAgentSdkUsage({ usage: mainUsage as never, total_cost_usd: 0.00015 }),
      { inputTokens: 1203, outputTokens: 50, costMicros: 150, model: "" });
    assert.deepEqual(claudeAgentSdkUsage({ modelUsage: { "claude-opus-4-1": modelUsage(7, 8, 0, 0, 0) } }),
      { inputTokens: 7, outputTokens: 8, costMicros: 0, model: "claude-opus-4-1" });
    assert.deepEqual(claudeAgentSdkUsage({}), { inputTokens: 0, outputTokens: 0, costMicros: 0, model: "" });
  });

  it("is left out when the query ends with no result", async () => {
    const a = claudeAgentSdkAdapter({
      query: async function* () {
        yield { type: "assistant", message: { role: "assistant", model: "m", content: [{ type: "text", text: "hi" }] }, parent_tool_use_id: null } as never;
      },
    });
    const out = await a.model.run(input([h(1, HistoryKind.USER, "go")]));
    assert.equal(out.text, "hi");
    assert.equal(out.usage, undefined);
  });
});

const script = JSON.stringify({
  turns: [
    { match: "pricey", outputs: [{ text: "expensive", usage: { input_tokens: 400, output_tokens: 100, cost_micros: 900 } }] },
    { match: "partial", outputs: [{ text: "cheap", usage: { output_tokens: 5 } }] },
    { match: "nulled", outputs: [{ text: "default", usage: null }] },
    { match: "flaky", outputs: [{ error: { type: "rate_limit" } }, { text: "ok" }] },
  ],
});
const fixed = [100, 20, 150, "dex-demo"];
const usageOfInit = (o: ReturnType<typeof modelOutput>) => u(toModelOutput(o.out).usage);

describe("the demo Worker's usage", () => {
  it("is cmd/dexworker's fixed usage per scripted call", () => {
    assert.deepEqual(demoUsage, { input_tokens: 100, output_tokens: 20, cost_micros: 150 });
    assert.equal(demoModelName, "dex-demo");
    const first = modelOutput(undefined, [h(1, HistoryKind.USER, "hi")], 1);
    assert.equal(first.out!.toolCalls!.length, 3);
    assert.deepEqual(usageOfInit(first), fixed);
    const answer = modelOutput(undefined, [h(1, HistoryKind.USER, "hi"), h(2, HistoryKind.ASSISTANT)], 1);
    assert.match(answer.out!.text!, /^Done/);
    assert.deepEqual(usageOfInit(answer), fixed);
    const past = modelOutput(undefined, [h(1, HistoryKind.USER, "hi"), h(2, HistoryKind.ASSISTANT), h(3, HistoryKind.ASSISTANT)], 1);
    assert.equal(past.out!.text, "done");
    assert.deepEqual(usageOfInit(past), fixed);
  });

  it("is the script output's \"usage\" when it gives one, a field left out being 0", () => {
    const s = parseScript(script);
    assert.deepEqual(usageOfInit(modelOutput(s, [h(1, HistoryKind.USER, "pricey")], 1)), [400, 100, 900, "dex-demo"]);
    assert.deepEqual(usageOfInit(modelOutput(s, [h(1, HistoryKind.USER, "partial")], 1)), [0, 5, 0, "dex-demo"]);
    assert.deepEqual(usageOfInit(modelOutput(s, [h(1, HistoryKind.USER, "nulled")], 1)), fixed);
    assert.ok(modelOutput(s, [h(1, HistoryKind.USER, "flaky")], 1).err);
    assert.deepEqual(usageOfInit(modelOutput(s, [h(1, HistoryKind.USER, "flaky")], 2)), fixed);
    assert.deepEqual(usageOfInit(modelOutput(s, [h(1, HistoryKind.USER, "other")], 1)), fixed);
  });

  it("refuses a bad scripted usage", () => {
    const bad = (usage: string) => () => parseScript(`{"turns":[{"match":"x","outputs":[{"text":"t","usage":${usage}}]}]}`);
    assert.throws(bad('{"input_tokens":-1}'), /usage: field input_tokens wants a whole number from 0, not -1/);
    assert.throws(bad('{"output_tokens":1.5}'), /usage: field output_tokens wants a whole number from 0, not 1.5/);
    assert.throws(bad('{"cost_micros":"150"}'), /field cost_micros wants a number, not a string/);
    assert.throws(bad('{"tokens":5}'), /unknown field "tokens"/);
    assert.throws(bad("[5]"), /field usage wants a object, not a array/);
  });

  it("says so in its help", () => {
    assert.match(usageHelp.replace(/\s+/g, " "),
      /Each scripted model call reports a fixed usage \(100 input and 20 output tokens, cost 150 micro-units, model "dex-demo"\) unless its script output gives "usage"/);
  });

  it("reaches the wire", async () => {
    const dir = mkdtempSync(join(tmpdir(), "usage-"));
    const ledger = new Ledger(join(dir, "l.jsonl"));
    try {
      const m = new ScriptedModel(parseScript(script), ledger, "w", undefined);
      const got = await runModelTasks({ run: m.run, compact: m.compact }, ["step-1"]);
      // The fake node's task history is one user message "hi": the built-in demo.
      assert.deepEqual(u(got.get("step-1")!.output!.usage), fixed);
    } finally {
      ledger.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  for (const name of ["ai-sdk", "openai-agents", "claude-agent-sdk"]) {
    it(`is the same through --adapter ${name}: the framework's answer carries it back`, async () => {
      const dir = mkdtempSync(join(tmpdir(), "usage-"));
      const ledger = new Ledger(join(dir, "l.jsonl"));
      try {
        const s = parseScript(script);
        const a = await demoAgent(name, s, ledger, "w", new DemoTools(ledger, "w"));
        const run = async (hist: HistoryEntry[]) => u(toModelOutput(await a.model.run(input(hist))).usage);
        assert.deepEqual(await run([h(1, HistoryKind.USER, "pricey")]), [400, 100, 900, "dex-demo"]);
        assert.deepEqual(await run([h(1, HistoryKind.USER, "hello")]), fixed);
        assert.deepEqual(await run([h(1, HistoryKind.USER, "partial")]), [0, 5, 0, "dex-demo"]);
      } finally {
        ledger.close();
        rmSync(dir, { recursive: true, force: true });
      }
    });
  }
});
