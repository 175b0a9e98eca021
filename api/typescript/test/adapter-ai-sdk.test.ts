import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { create } from "@bufbuild/protobuf";
import { APICallError, jsonSchema, simulateReadableStream, tool } from "ai";
import { MockLanguageModelV3 } from "ai/test";
import { aiSdkAgent, type DexContext } from "../src/adapters/ai-sdk.js";
import { ErrorType, HistoryEntrySchema, HistoryKind, ModelError, Outcome, ToolAccess, toolSpec, type ModelInput, type ToolCall } from "../src/index.js";

const schema = jsonSchema<Record<string, unknown>>({ type: "object" });
const usage = { inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 }, outputTokens: { total: 1, text: 1, reasoning: 0 } };

function input(history: ModelInput["history"], attempt = 1): ModelInput {
  return { sessionId: "s1", stepId: "st1", attempt, history, tools: [], compact: false, epoch: 2n, agent: "support@v1", signal: new AbortController().signal };
}

/** An input whose stream, as a Worker's, keeps each delta in streamed. */
function streaming(history: ModelInput["history"], streamed: string[]): ModelInput {
  return { ...input(history), stream: (text: string) => streamed.push(text) };
}

type StreamPart = Parameters<typeof simulateReadableStream<unknown>>[0]["chunks"][number];

/** A doStream answer: the parts in order, as a provider's stream. */
const answer = (chunks: StreamPart[]) => async () => ({ stream: simulateReadableStream({ chunks }) as never });

/** The parts of a streamed text answer: its deltas in one text part, then tool calls, then the finish. */
function textParts(deltas: string[], calls: StreamPart[] = [], modelId = "provider-model-2"): StreamPart[] {
  return [
    { type: "stream-start", warnings: [] }, { type: "response-metadata", id: "r1", modelId },
    { type: "text-start", id: "t1" }, ...deltas.map((delta) => ({ type: "text-delta", id: "t1", delta })), { type: "text-end", id: "t1" },
    ...calls,
    { type: "finish", finishReason: { unified: calls.length > 0 ? "tool-calls" : "stop", raw: undefined }, usage: { ...usage, inputTokens: { ...usage.inputTokens, total: 7 } } },
  ];
}

const hi = [create(HistoryEntrySchema, { seq: 1n, kind: HistoryKind.USER, text: "hi" })];

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

describe("the AI SDK adapter's live output", () => {
  const calls: StreamPart[] = [
    { type: "tool-call", toolCallId: "c1", toolName: "send_email", input: '{"to":"a@b"}' },
    { type: "tool-call", toolCallId: "c2", toolName: "add", input: '{"a":1,"b":2}' },
  ];
  const tools = {
    send_email: tool({ inputSchema: schema, execute: async () => "sent" }),
    add: tool({ inputSchema: schema, execute: async (a: Record<string, unknown>) => (a.a as number) + (a.b as number) }),
  };

  it("streams the step's text deltas in order (streamText); the output is their concatenation, with the same calls and usage", async () => {
    const model = new MockLanguageModelV3({ doStream: answer(textParts(["on", " it", ", sending"], calls)) });
    const streamed: string[] = [];
    const out = await aiSdkAgent({ model, tools, dexTools: { send_email: { access: "single_attempt" } } }).model.run(streaming(hi, streamed));
    assert.deepEqual(streamed, ["on", " it", ", sending"]);
    assert.deepEqual(out, {
      text: "on it, sending", toolCalls: [{ callId: "c1", tool: "send_email", arguments: '{"to":"a@b"}' }],
      inlineResults: [{ callId: "c2", tool: "add", arguments: '{"a":1,"b":2}', content: "3" }],
      usage: { inputTokens: 7, outputTokens: 1, model: "provider-model-2" },
    });
    assert.equal(streamed.join(""), out.text);
    assert.deepEqual([model.doStreamCalls.length, model.doGenerateCalls.length], [1, 0]);
  });

  it("gives the output generateText gives for the same answer", async () => {
    const content = [{ type: "text" as const, text: "on it, sending" }, ...calls.map((c) => ({ ...(c as object) }))] as never;
    const model = new MockLanguageModelV3({
      doStream: answer(textParts(["on", " it", ", sending"], calls)),
      doGenerate: async () => ({
        content, finishReason: { unified: "tool-calls", raw: undefined }, warnings: [], usage: { ...usage, inputTokens: { ...usage.inputTokens, total: 7 } },
        response: { id: "r1", modelId: "provider-model-2" },
      }),
    });
    const agent = aiSdkAgent({ model, tools, dexTools: { send_email: { access: "single_attempt" } } });
    const streamed: string[] = [];
    const live = await agent.model.run(streaming(hi, streamed));
    const whole = await agent.model.run(input(hi)); // no stream: one generateText call
    assert.deepEqual(live, whole);
    assert.deepEqual([model.doStreamCalls.length, model.doGenerateCalls.length], [1, 1]);
    assert.equal(streamed.length, 3);
  });

  it("fails on a rate limit after some deltas as generateText does, with the Retry-After of the response", async () => {
    const err = new APICallError({ message: "slow down", url: "http://127.0.0.1/", requestBodyValues: {}, statusCode: 429, responseHeaders: { "retry-after": "2" } });
    // The provider says so inside its stream ...
    const inStream = new MockLanguageModelV3({ doStream: answer([...textParts(["Let me", " look"]).slice(0, 5), { type: "error", error: err }]) });
    const streamed: string[] = [];
    await assert.rejects(aiSdkAgent({ model: inStream }).model.run(streaming(hi, streamed)),
      (e: unknown) => e instanceof ModelError && e.type === ErrorType.RATE_LIMIT && e.retryAfterMs === 2000);
    assert.deepEqual(streamed, ["Let me", " look"]);
    // ... or the stream breaks off with it ...
    const broken = new MockLanguageModelV3({
      doStream: async () => ({
        stream: ((parts) => new ReadableStream({
          pull(c) {
            const p = parts.shift();
            if (p) c.enqueue(p as never);
            else c.error(new APICallError({ message: "down", url: "http://127.0.0.1/", requestBodyValues: {}, statusCode: 503 }));
          },
        }))(textParts(["half"]).slice(0, 4)),
      }),
    });
    const half: string[] = [];
    await assert.rejects(aiSdkAgent({ model: broken }).model.run(streaming(hi, half)), (e: unknown) => e instanceof ModelError && e.type === ErrorType.SERVER_ERROR);
    assert.deepEqual(half, ["half"]);
    // ... or answers it before any (the model is not asked again without streaming).
    const before = new MockLanguageModelV3({ doStream: async () => { throw err; }, doGenerate: async () => assert.fail("asked again") });
    await assert.rejects(aiSdkAgent({ model: before }).model.run(streaming(hi, [])),
      (e: unknown) => e instanceof ModelError && e.type === ErrorType.RATE_LIMIT && e.retryAfterMs === 2000);
    assert.equal(before.doGenerateCalls.length, 0);
    // A stream the AI SDK cannot read (a delta of a text part never started) fails the step too.
    const bad = new MockLanguageModelV3({ doStream: answer([{ type: "stream-start", warnings: [] }, { type: "text-delta", id: "t9", delta: "x" }, ...textParts([]).slice(-1)]) });
    await assert.rejects(aiSdkAgent({ model: bad }).model.run(streaming(hi, [])), (e: unknown) => e instanceof Error && /text part t9 not found/.test(e.message));
  });

  it("fails a step aborted mid-stream rather than answering what came so far", async () => {
    const model = new MockLanguageModelV3({ doStream: async () => ({ stream: simulateReadableStream({ chunks: textParts(["Part", "ial"]), chunkDelayInMs: 5 }) as never }) });
    const ac = new AbortController();
    const streamed: string[] = [];
    const run = { ...input(hi), signal: ac.signal, stream: (text: string) => (streamed.push(text), ac.abort(new Error("the session was cancelled"))) };
    await assert.rejects(aiSdkAgent({ model }).model.run(run), /the session was cancelled/);
    assert.deepEqual(streamed, ["Part"]);
  });

  it("runs generateText with stream: false, and for a model that cannot stream", async () => {
    const generate = async () => ({ content: [{ type: "text" as const, text: "whole" }], finishReason: { unified: "stop" as const, raw: undefined }, warnings: [], usage });
    const both = new MockLanguageModelV3({ doStream: answer(textParts(["wh", "ole"])), doGenerate: generate });
    const off: string[] = [];
    assert.equal((await aiSdkAgent({ model: both, stream: false }).model.run(streaming(hi, off))).text, "whole");
    assert.deepEqual([off, both.doStreamCalls.length, both.doGenerateCalls.length], [[], 0, 1]);
    // No doStream: its "Not implemented" comes before the stream starts. The model is picked once for the RunModel.
    const generateOnly = new MockLanguageModelV3({ doGenerate: generate });
    const none: string[] = [];
    let picked = 0;
    assert.equal((await aiSdkAgent({ model: () => (picked++, generateOnly) }).model.run(streaming(hi, none))).text, "whole");
    assert.deepEqual([none, generateOnly.doStreamCalls.length, generateOnly.doGenerateCalls.length, picked], [[], 1, 1, 1]);
    // A Dex error from doStream, a timeout or an empty stream is the model's answer: it is not asked again.
    const typed = new MockLanguageModelV3({ doStream: async () => { throw new ModelError(ErrorType.OVERLOADED, "busy"); }, doGenerate: generate });
    await assert.rejects(aiSdkAgent({ model: typed }).model.run(streaming(hi, [])), (e: unknown) => e instanceof ModelError && e.type === ErrorType.OVERLOADED);
    const timedOut = new MockLanguageModelV3({ doStream: async () => { throw new DOMException("no answer in time", "TimeoutError"); }, doGenerate: generate });
    await assert.rejects(aiSdkAgent({ model: timedOut }).model.run(streaming(hi, [])), { name: "TimeoutError" });
    const empty = new MockLanguageModelV3({ doStream: answer([{ type: "stream-start", warnings: [] }]), doGenerate: generate });
    await assert.rejects(aiSdkAgent({ model: empty }).model.run(streaming(hi, [])), { name: "AI_NoOutputGeneratedError" });
    assert.deepEqual([typed, timedOut, empty].map((m) => m.doGenerateCalls.length), [0, 0, 0]);
  });
});
