import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { create } from "@bufbuild/protobuf";
import { Agent, tool, Usage, type Model } from "@openai/agents";
import { tool as claudeTool, type Options, type SDKMessage } from "@anthropic-ai/claude-agent-sdk";
import OpenAI from "openai";
import { openaiAgentsAdapter } from "../src/adapters/openai-agents.js";
import { claudeAgentSdkAdapter } from "../src/adapters/claude-agent-sdk.js";
import { classifyError, ErrorType, HistoryEntrySchema, HistoryKind, ModelError, retryAfterMsOf, ToolAccess, toolSpec, type ModelInput } from "../src/index.js";
import { outputItems } from "../demo/adapter-openai-agents.js";
import { fakeQuery } from "../demo/adapter-claude-agent-sdk.js";

const input: ModelInput = {
  sessionId: "s1", stepId: "st1", attempt: 1, history: [create(HistoryEntrySchema, { seq: 1n, kind: HistoryKind.USER, text: "go" })], tools: [], compact: false,
  epoch: 1n, agent: "", signal: new AbortController().signal,
};
const params = { type: "object" as const, properties: {}, required: [], additionalProperties: true as const };
const answer = { text: "ok", toolCalls: [{ callId: "c1", tool: "save_note", arguments: '{"note":"n"}' }], inlineResults: [{ callId: "i1", tool: "add", arguments: '{"a":1,"b":2}' }] };

/** The input as a Worker gives it: its stream keeps each delta in streamed. */
const streaming = (streamed: string[]): ModelInput => ({ ...input, stream: (text: string) => streamed.push(text) });

/** What rejects p with, or a failure when it resolves. */
async function rejection(p: Promise<unknown>): Promise<unknown> {
  try {
    await p;
  } catch (e) {
    return e;
  }
  assert.fail("resolved; wanted a rejection");
}

describe("the OpenAI Agents SDK adapter (a custom Model, no network)", () => {
  it("defers Dex tools through approval and runs the others inline, in one model call", async () => {
    let calls = 0;
    const model: Model = { getResponse: async () => (calls++, { usage: new Usage(), output: outputItems(answer) }), getStreamedResponse: () => { throw new Error("no"); } };
    let noted = "";
    const agent = new Agent({
      name: "t", instructions: "", model, tools: [
        tool({ name: "save_note", description: "", parameters: params, strict: false, execute: async (a: any) => (noted = a.note, "saved") }),
        tool({ name: "add", description: "", parameters: params, strict: false, execute: async (a: any) => String(a.a + a.b) }),
      ],
    });
    const a = openaiAgentsAdapter({ agent, dexTools: { save_note: { access: "idempotent_write" } } });
    const out = await a.model.run(input);
    assert.equal(calls, 1);
    assert.equal(out.text, "ok");
    assert.deepEqual(out.toolCalls, [{ callId: "c1", tool: "save_note", arguments: '{"note":"n"}' }]);
    assert.deepEqual(out.inlineResults, [{ callId: "i1", tool: "add", arguments: '{"a":1,"b":2}', content: "3" }]);
    assert.equal(noted, "");
    assert.equal(toolSpec(a.tools[0]).access, ToolAccess.IDEMPOTENT_WRITE);
    const r = await a.tools[0].run({ ...input, callId: "c1", tool: "save_note", arguments: '{"note":"n"}', idempotencyKey: "k", taskId: "", access: ToolAccess.IDEMPOTENT_WRITE });
    assert.equal(r.content, "saved");
    assert.equal(noted, "n");
    assert.throws(() => openaiAgentsAdapter({ agent, dexTools: { nope: { access: "read" } } }), /not a function tool of the agent/);
  });
});

describe("the OpenAI Agents SDK adapter's live output (a custom Model's stream)", () => {
  const textDelta = (delta: string, itemId = "m1", contentIndex = 0) => ({ type: "output_text_delta", delta, itemId, providerData: { content_index: contentIndex } }) as const;
  /** A model that answers with its stream only: the events, then response_done with the output items (the model named in its provider data). */
  const streamingModel = (events: object[], output: ReturnType<typeof outputItems>, fail?: Error): Model & { streamed: number } => {
    const m = {
      streamed: 0,
      getResponse: async () => assert.fail("the turn was not streamed"),
      getStreamedResponse: async function* () {
        m.streamed++;
        yield { type: "response_started", providerData: {} };
        for (const e of events) yield e as never;
        if (fail) throw fail;
        yield { type: "response_done", response: { id: "r1", usage: { requests: 1, inputTokens: 9, outputTokens: 4, totalTokens: 13 }, output, providerData: { model: "gpt-stream-1" } } };
      },
    };
    return m as never;
  };
  const tools = () => [
    tool({ name: "save_note", description: "", parameters: params, strict: false, execute: async () => "saved" }),
    tool({ name: "add", description: "", parameters: params, strict: false, execute: async (a: any) => String(a.a + a.b) }),
  ];

  it("streams each output_text_delta in order; the output is their concatenation, with the run's calls and usage", async () => {
    const model = streamingModel([textDelta("Saving"), textDelta(" your"), textDelta(" note")], outputItems({ ...answer, text: "Saving your note" }));
    const a = openaiAgentsAdapter({ agent: new Agent({ name: "t", instructions: "", model, tools: tools() }), dexTools: { save_note: { access: "idempotent_write" } } });
    const streamed: string[] = [];
    const out = await a.model.run(streaming(streamed));
    assert.deepEqual(streamed, ["Saving", " your", " note"]);
    assert.deepEqual(out, {
      text: "Saving your note", toolCalls: [{ callId: "c1", tool: "save_note", arguments: '{"note":"n"}' }],
      inlineResults: [{ callId: "i1", tool: "add", arguments: '{"a":1,"b":2}', content: "3" }],
      usage: { inputTokens: 9, outputTokens: 4, model: "gpt-stream-1" },
    });
    assert.equal(streamed.join(""), out.text);
    assert.equal(model.streamed, 1);
  });

  it("names the model a Chat Completions stream's chunks name, whose response keeps no provider data", async () => {
    const model: Model = {
      getResponse: async () => assert.fail("the turn was not streamed"),
      getStreamedResponse: async function* () {
        yield { type: "model", event: { object: "chat.completion.chunk", model: "gpt-chat-2025", choices: [] } };
        yield textDelta("ok");
        yield { type: "response_done", response: { id: "r1", usage: { requests: 1, inputTokens: 2, outputTokens: 1, totalTokens: 3 }, output: outputItems({ text: "ok" }) } } as never;
      },
    };
    const out = await openaiAgentsAdapter({ agent: new Agent({ name: "t", instructions: "", model }) }).model.run(streaming([]));
    assert.deepEqual(out.usage, { inputTokens: 2, outputTokens: 1, model: "gpt-chat-2025" });
  });

  it("streams a newline before a new output text part, as the output joins them", async () => {
    const output = [
      { type: "message" as const, role: "assistant" as const, status: "completed" as const, content: [{ type: "output_text" as const, text: "One" }, { type: "output_text" as const, text: "two" }] },
      { type: "message" as const, role: "assistant" as const, status: "completed" as const, content: [{ type: "output_text" as const, text: "three." }] },
    ];
    const model = streamingModel([textDelta("One"), textDelta("tw", "m1", 1), textDelta("o", "m1", 1), textDelta("three.", "m2")], output);
    const streamed: string[] = [];
    const out = await openaiAgentsAdapter({ agent: new Agent({ name: "t", instructions: "", model }) }).model.run(streaming(streamed));
    assert.deepEqual(streamed, ["One", "\ntw", "o", "\nthree."]);
    assert.equal(out.text, "One\ntwo\nthree.");
    assert.equal(streamed.join(""), out.text);
  });

  it("leaves a provider's rate limit after some deltas as the openai package threw it: the Worker reads its Retry-After", async () => {
    const limit = new OpenAI.RateLimitError(429, { message: "slow down" }, "429 slow down", new Headers({ "retry-after-ms": "1200" }));
    const model = streamingModel([textDelta("Look"), textDelta("ing")], [], limit);
    const streamed: string[] = [];
    const err = await rejection(openaiAgentsAdapter({ agent: new Agent({ name: "t", instructions: "", model }) }).model.run(streaming(streamed)));
    assert.equal(err, limit);
    assert.deepEqual([classifyError(err), retryAfterMsOf(err)], [ErrorType.RATE_LIMIT, 1200]);
    assert.deepEqual(streamed, ["Look", "ing"]);
  });

  it("runs the turn without streaming with stream: false, and for a model whose getStreamedResponse throws when called", async () => {
    let asked = 0;
    let tried = 0;
    const whole: Model = {
      getResponse: async () => (asked++, { usage: new Usage(), output: outputItems({ text: "whole" }) }),
      getStreamedResponse: () => {
        tried++;
        throw new Error("no");
      },
    };
    const streamed: string[] = [];
    assert.equal((await openaiAgentsAdapter({ agent: new Agent({ name: "t", instructions: "", model: whole }) }).model.run(streaming(streamed))).text, "whole");
    assert.deepEqual([streamed, tried, asked], [[], 1, 1]);
    const model = Object.assign(streamingModel([textDelta("whole")], outputItems({ text: "whole" })), { getResponse: whole.getResponse });
    assert.equal((await openaiAgentsAdapter({ agent: new Agent({ name: "t", instructions: "", model }), stream: false }).model.run(streaming(streamed))).text, "whole");
    assert.deepEqual([streamed, asked, model.streamed], [[], 2, 0]);
  });

  it("fails a turn aborted mid-stream rather than answering what came so far", async () => {
    const model = streamingModel([textDelta("Part"), textDelta("ial")], outputItems({ text: "Partial" }));
    const ac = new AbortController();
    const streamed: string[] = [];
    const run = { ...input, signal: ac.signal, stream: (text: string) => (streamed.push(text), ac.abort(new Error("the session was cancelled"))) };
    const err = await rejection(openaiAgentsAdapter({ agent: new Agent({ name: "t", instructions: "", model }) }).model.run(run));
    assert.equal((err as Error).message, "the session was cancelled");
    assert.deepEqual(streamed, ["Part"]);
  });
});

describe("the Claude Agent SDK adapter (at query()'s message stream, not the CLI)", () => {
  it("defers Dex tools with a PreToolUse hook and records the others inline", async () => {
    let ran = "";
    const a = claudeAgentSdkAdapter({
      tools: [claudeTool("save_note", "", {}, async (args: any) => (ran = args.note, { content: [{ type: "text", text: "saved" }] })), claudeTool("add", "", {}, async () => ({ content: [] }))],
      dexTools: { save_note: { access: "single_attempt" } },
      query: fakeQuery(async () => answer, async (_i, name, _id, args: any) => ({ content: name === "add" ? String(args.a + args.b) : "?", isError: false })),
    });
    const out = await a.model.run(input);
    assert.equal(out.text, "ok");
    assert.deepEqual(out.toolCalls, [{ callId: "c1", tool: "save_note", arguments: '{"note":"n"}' }]);
    assert.deepEqual(out.inlineResults, [{ callId: "i1", tool: "add", arguments: '{"a":1,"b":2}', content: "3", isError: false }]);
    assert.equal(ran, "");
    const r = await a.tools[0].run({ ...input, callId: "c1", tool: "save_note", arguments: '{"note":"n"}', idempotencyKey: "", taskId: "", access: ToolAccess.SINGLE_ATTEMPT });
    assert.deepEqual([r.content, ran], ["saved", "n"]);
    assert.throws(() => claudeAgentSdkAdapter({ dexTools: { nope: { access: "read" } } }), /not in tools/);
  });

  it("records the CLI's own tools (Bash, Write, Edit, Task) as inline results and defers only Dex tools", async () => {
    const ran: string[] = [];
    const cli = [
      { callId: "b1", tool: "Bash", arguments: '{"command":"make"}' }, { callId: "w1", tool: "Write", arguments: '{"file_path":"a.md","content":"x"}' },
      { callId: "e1", tool: "Edit", arguments: '{"file_path":"a.md","old_string":"x","new_string":"y"}' },
      { callId: "t1", tool: "Task", arguments: '{"description":"review","prompt":"review a.md"}' },
    ];
    const a = claudeAgentSdkAdapter({
      tools: [claudeTool("save_note", "", {}, async () => ({ content: [] }))],
      dexTools: { save_note: { access: "idempotent_write" } },
      query: fakeQuery(async () => ({ text: "ok", toolCalls: [...cli, { callId: "c1", tool: "save_note", arguments: '{"note":"n"}' }] }),
        async () => assert.fail("no MCP tool runs inline here"),
        async (_i, name) => (ran.push(name), { content: `${name} done`, isError: false })),
    });
    const out = await a.model.run(input);
    assert.deepEqual(ran, ["Bash", "Write", "Edit", "Task"]);
    assert.deepEqual(out.toolCalls, [{ callId: "c1", tool: "save_note", arguments: '{"note":"n"}' }]);
    // The Task's sub-agent ran a Read of its own: the Task's result stands for it.
    assert.deepEqual(out.inlineResults, cli.map((c) => ({ ...c, content: `${c.tool} done`, isError: false })));
    assert.equal(out.text, "ok");
  });

  it("gives each query an MCP server of its own, so concurrent RunModels all get the tools", async () => {
    // The SDK connects a server's instance to one CLI at a time: a shared
    // one left a second, concurrent query without the dex tools.
    const instances: unknown[] = [];
    const a = claudeAgentSdkAdapter({
      tools: [claudeTool("save_note", "", {}, async () => ({ content: [] }))],
      dexTools: { save_note: { access: "idempotent_write" } },
      query: async function* (params) {
        const dex = params.options.mcpServers?.dex as { type: string; instance: unknown };
        assert.equal(dex.type, "sdk");
        instances.push(dex.instance);
        await new Promise((res) => setTimeout(res, 10));
        yield { type: "result", subtype: "success" } as never;
      },
    });
    await Promise.all([a.model.run(input), a.model.run(input)]);
    assert.equal(instances.length, 2);
    assert.notEqual(instances[0], instances[1]);
  });
});

describe("the Claude Agent SDK adapter's live output (partial messages in query()'s stream)", () => {
  const ev = (event: object, parent: string | null = null) => ({ type: "stream_event", event, parent_tool_use_id: parent, uuid: "u", session_id: "fake" }) as unknown as SDKMessage;
  /** One streamed text block: its start, its deltas, its stop. */
  const block = (index: number, deltas: string[], parent: string | null = null) => [
    ev({ type: "content_block_start", index, content_block: { type: "text", text: "" } }, parent),
    ...deltas.map((text) => ev({ type: "content_block_delta", index, delta: { type: "text_delta", text } }, parent)),
    ev({ type: "content_block_stop", index }, parent),
  ];
  const assistant = (content: unknown[], model = "claude-sonnet-4-5", parent: string | null = null) =>
    ({ type: "assistant", message: { role: "assistant", model, content }, parent_tool_use_id: parent }) as unknown as SDKMessage;
  const user = (content: unknown[]) => ({ type: "user", message: { role: "user", content }, parent_tool_use_id: null }) as unknown as SDKMessage;
  const result = { type: "result", subtype: "success", result: "", usage: { input_tokens: 3, output_tokens: 5 } } as unknown as SDKMessage;
  /** A fake query yielding messages, keeping the options it was given. */
  const fake = (messages: SDKMessage[], seen: Options[]) => async function* (params: { options: Options }) {
    seen.push(params.options);
    yield* messages;
  };

  it("streams the main loop's text deltas in order, a newline before each new text block; the output is their concatenation", async () => {
    const seen: Options[] = [];
    const a = claudeAgentSdkAdapter({
      query: fake([
        ev({ type: "message_start", message: {} }), ...block(0, ["Adding", " them"]), assistant([{ type: "text", text: "Adding them" }]),
        assistant([{ type: "tool_use", id: "t1", name: "Task", input: {} }]),
        // A sub-agent streams too: its text is not the output.
        ...block(0, ["sub-agent text"], "t1"), assistant([{ type: "text", text: "sub-agent text" }], "claude-haiku-4-5", "t1"),
        user([{ type: "tool_result", tool_use_id: "t1", content: "3" }]),
        ...block(0, ["It is", " 3."]), assistant([{ type: "text", text: "It is 3." }]),
        result,
      ], seen),
    });
    const streamed: string[] = [];
    const out = await a.model.run(streaming(streamed));
    assert.equal(seen[0].includePartialMessages, true);
    assert.deepEqual(streamed, ["Adding", " them", "\nIt is", " 3."]);
    assert.equal(out.text, "Adding them\nIt is 3.");
    assert.equal(streamed.join(""), out.text);
    assert.deepEqual(out.inlineResults, [{ callId: "t1", tool: "Task", arguments: "{}", content: "3", isError: false }]);
  });

  it("streams a message's text the CLI did not stream when the message comes", async () => {
    const a = claudeAgentSdkAdapter({
      query: fake([...block(0, ["First"]), assistant([{ type: "text", text: "First" }]), assistant([{ type: "text", text: "(interrupted)" }], "<synthetic>"),
        ...block(0, ["Last"]), assistant([{ type: "text", text: "Last" }]), result], []),
    });
    const streamed: string[] = [];
    const out = await a.model.run(streaming(streamed));
    assert.deepEqual(streamed, ["First", "\n(interrupted)", "\nLast"]);
    assert.equal(out.text, "First\n(interrupted)\nLast");
  });

  it("fails on a rate limit after some deltas as without streaming, with the time the limit lifts", async () => {
    const resetsAt = Math.floor(Date.now() / 1000) + 60;
    const a = claudeAgentSdkAdapter({
      query: fake([...block(0, ["Work", "ing"]), { type: "rate_limit_event", rate_limit_info: { status: "rejected", resetsAt } } as unknown as SDKMessage,
        { ...(assistant([], "<synthetic>") as object), error: "rate_limit" } as SDKMessage], []),
    });
    const streamed: string[] = [];
    const err = await rejection(a.model.run(streaming(streamed)));
    assert.ok(err instanceof ModelError);
    assert.equal(err.type, ErrorType.RATE_LIMIT);
    assert.ok(err.retryAfterMs > 50_000 && err.retryAfterMs <= 60_000, `Retry-After ${err.retryAfterMs} ms`);
    assert.deepEqual(streamed, ["Work", "ing"]);
  });

  it("commits the CLI's text when it differs from what was streamed (asked again), and streams no more", async () => {
    const a = claudeAgentSdkAdapter({
      query: fake([...block(0, ["Dra", "ft"]), assistant([{ type: "text", text: "Final" }]), ...block(0, ["More"]), assistant([{ type: "text", text: "More" }]), result], []),
    });
    const streamed: string[] = [];
    const out = await a.model.run(streaming(streamed));
    assert.deepEqual(streamed, ["Dra", "ft"]);
    assert.equal(out.text, "Final\nMore");
  });

  it("runs the query as given with stream: false, or with no stream to send to", async () => {
    const messages = [...block(0, ["whole"]), assistant([{ type: "text", text: "whole" }]), result];
    const on: string[] = [];
    await claudeAgentSdkAdapter({ query: fake(messages, []) }).model.run(streaming(on));
    assert.deepEqual(on, ["whole"]);
    for (const [stream, run] of [[false, streaming([])], [undefined, input]] as const) {
      const seen: Options[] = [];
      const out = await claudeAgentSdkAdapter({ query: fake(messages, seen), stream }).model.run(run);
      assert.equal(out.text, "whole");
      assert.equal(seen[0].includePartialMessages, undefined);
    }
    const streamed: string[] = [];
    await claudeAgentSdkAdapter({ query: fake(messages, []), stream: false }).model.run(streaming(streamed));
    assert.deepEqual(streamed, []);
  });
});
