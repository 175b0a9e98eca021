import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { create } from "@bufbuild/protobuf";
import { Agent, tool, Usage, type Model } from "@openai/agents";
import { tool as claudeTool } from "@anthropic-ai/claude-agent-sdk";
import { openaiAgentsAdapter } from "../src/adapters/openai-agents.js";
import { claudeAgentSdkAdapter } from "../src/adapters/claude-agent-sdk.js";
import { HistoryEntrySchema, HistoryKind, ToolAccess, toolSpec, type ModelInput } from "../src/index.js";
import { outputItems } from "../demo/adapter-openai-agents.js";
import { fakeQuery } from "../demo/adapter-claude-agent-sdk.js";

const input: ModelInput = {
  sessionId: "s1", stepId: "st1", attempt: 1, history: [create(HistoryEntrySchema, { seq: 1n, kind: HistoryKind.USER, text: "go" })], tools: [], compact: false,
  epoch: 1n, agent: "", signal: new AbortController().signal,
};
const params = { type: "object" as const, properties: {}, required: [], additionalProperties: true as const };
const answer = { text: "ok", toolCalls: [{ callId: "c1", tool: "save_note", arguments: '{"note":"n"}' }], inlineResults: [{ callId: "i1", tool: "add", arguments: '{"a":1,"b":2}' }] };

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
