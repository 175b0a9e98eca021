import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { create } from "@bufbuild/protobuf";
import { APICallError, jsonSchema, tool } from "ai";
import { MockLanguageModelV3 } from "ai/test";
import { aiSdkAgent, type DexContext } from "../src/adapters/ai-sdk.js";
import { ErrorType, HistoryEntrySchema, HistoryKind, ModelError, Outcome, ToolAccess, toolSpec, type ModelInput, type ToolCall } from "../src/index.js";

const schema = jsonSchema<Record<string, unknown>>({ type: "object" });
const usage = { inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 }, outputTokens: { total: 1, text: 1, reasoning: 0 } };

function input(history: ModelInput["history"], attempt = 1): ModelInput {
  return { sessionId: "s1", stepId: "st1", attempt, history, tools: [], compact: false, epoch: 2n, agent: "support@v1", signal: new AbortController().signal };
}

describe("the AI SDK adapter", () => {
  it("runs one model step: deferred tools become Dex tool calls, tools with execute run inline", async () => {
    let prompt: unknown;
    const model = new MockLanguageModelV3({
      doGenerate: async (opts) => {
        prompt = opts.prompt;
        return {
          content: [
            { type: "text", text: "on it" },
            { type: "tool-call", toolCallId: "c1", toolName: "send_email", input: '{"to":"a@b"}' },
            { type: "tool-call", toolCallId: "c2", toolName: "add", input: '{"a":1,"b":2}' },
          ],
          finishReason: { unified: "tool-calls", raw: undefined }, usage, warnings: [],
        };
      },
    });
    const sent: ToolCall[] = [];
    const agent = aiSdkAgent({
      model, system: "be brief",
      tools: {
        send_email: tool({ inputSchema: schema, execute: async (a, o) => (sent.push((o.experimental_context as DexContext).dex as ToolCall), `sent to ${a.to}`) }),
        add: tool({ inputSchema: schema, execute: async (a: Record<string, unknown>) => (a.a as number) + (a.b as number) }),
      },
      dexTools: { send_email: { access: "single_attempt" } },
    });
    const h = [
      create(HistoryEntrySchema, { seq: 1n, kind: HistoryKind.USER, text: "mail a@b" }),
      create(HistoryEntrySchema, { seq: 2n, kind: HistoryKind.ASSISTANT, text: "", toolCalls: [{ callId: "c0", tool: "lookup", arguments: '{"q":"x"}' }] }),
      create(HistoryEntrySchema, { seq: 3n, kind: HistoryKind.TOOL_RESULT, callId: "c0", tool: "lookup", text: "found", outcome: Outcome.SUCCEEDED }),
    ];
    const out = await agent.model.run(input(h));
    assert.deepEqual(out, {
      text: "on it", toolCalls: [{ callId: "c1", tool: "send_email", arguments: '{"to":"a@b"}' }],
      inlineResults: [{ callId: "c2", tool: "add", arguments: '{"a":1,"b":2}', content: "3" }],
      usage: { inputTokens: 1, outputTokens: 1, model: "mock-model-id" },
    });
    // The model saw the history in the AI SDK's prompt format, and only the deferred tool's call left the step.
    const roles = (prompt as { role: string }[]).map((m) => m.role);
    assert.deepEqual(roles, ["system", "user", "assistant", "tool"]);
    assert.equal(sent.length, 0);
    // The adapter registered send_email with its policy; its Dex handler runs the tool's own execute.
    assert.deepEqual(agent.tools.map((t) => [toolSpec(t).name, toolSpec(t).access]), [["send_email", ToolAccess.SINGLE_ATTEMPT]]);
    const call = { sessionId: "s1", stepId: "st2", callId: "c1", tool: "send_email", arguments: '{"to":"a@b"}', idempotencyKey: "k", attempt: 1, taskId: "", access: ToolAccess.SINGLE_ATTEMPT, epoch: 2n, agent: "", signal: new AbortController().signal };
    assert.deepEqual(await agent.tools[0].run(call), { content: "sent to a@b" });
    assert.equal(sent[0].idempotencyKey, "k");
  });

  it("picks the model per RunModel and types a provider's errors", async () => {
    const err = new APICallError({ message: "slow down", url: "http://127.0.0.1/", requestBodyValues: {}, statusCode: 429, isRetryable: true });
    const agents: string[] = [];
    const agent = aiSdkAgent({ model: (i) => (agents.push(i.agent), new MockLanguageModelV3({ doGenerate: async () => { throw err; } })) });
    await assert.rejects(agent.model.run(input([create(HistoryEntrySchema, { seq: 1n, kind: HistoryKind.USER, text: "hi" })])),
      (e: unknown) => e instanceof ModelError && e.type === ErrorType.RATE_LIMIT);
    assert.deepEqual(agents, ["support@v1"]);
    // A scripted ModelError passes through untouched (no retries inside the step: Dex retries).
    const typed = aiSdkAgent({ model: new MockLanguageModelV3({ doGenerate: async () => { throw new ModelError(ErrorType.OVERLOADED, "busy"); } }) });
    await assert.rejects(typed.model.run(input([create(HistoryEntrySchema, { seq: 1n, kind: HistoryKind.USER, text: "hi" })])), (e: unknown) => e instanceof ModelError && e.type === ErrorType.OVERLOADED);
  });

  it("refuses tools nobody can run", () => {
    const model = new MockLanguageModelV3();
    assert.throws(() => aiSdkAgent({ model, tools: { x: tool({ inputSchema: schema }) } }), /"x" has no execute function and no Dex policy/);
    assert.throws(() => aiSdkAgent({ model, tools: {}, dexTools: { y: { access: "read" } } }), /names "y", which is not in tools/);
    assert.throws(() => aiSdkAgent({ model, tools: { x: tool({ inputSchema: schema }) }, dexTools: { x: { access: "read" } } }), /neither an execute function nor a Dex run handler/);
    assert.throws(() => aiSdkAgent({} as never), /a model is required/);
  });
});
