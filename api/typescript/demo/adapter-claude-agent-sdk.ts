import { randomUUID } from "node:crypto";
import { tool, type HookCallbackMatcher, type Options, type SDKMessage } from "@anthropic-ai/claude-agent-sdk";
import { claudeAgentSdkAdapter, serverName, type QueryFn } from "../src/adapters/claude-agent-sdk.js";
import type { ModelInput, ModelOutputInit } from "../src/index.js";
import type { Ledger } from "./ledger.js";
import type { Script } from "./script.js";
import type { DemoTools } from "./tools.js";
import { runCalc, scripted, stepPolicies, type DemoAgent } from "./adapters.js";

/**
 * A fake of query()'s message stream, standing where the Claude Code CLI
 * would: one assistant message with the output's text and tool_use blocks
 * (MCP names), the PreToolUse hooks asked for each, the calls they do not
 * defer run through run(), their tool_result blocks, then the result.
 */
export function fakeQuery(answer: (input: ModelInput) => Promise<ModelOutputInit>,
  runInline: (input: ModelInput, name: string, callId: string, args: unknown) => Promise<{ content: string; isError: boolean }>): QueryFn {
  return async function* (params: { prompt: string; options: Options }, input: ModelInput): AsyncGenerator<SDKMessage> {
    const out = await answer(input);
    const session_id = "fake";
    const calls = [...(out.inlineResults ?? []), ...(out.toolCalls ?? [])].map((c) => ({
      id: c.callId, name: `mcp__${serverName}__${c.tool}`, input: typeof c.arguments === "string" ? JSON.parse(c.arguments || "{}") : c.arguments ?? {},
    }));
    const content = [...(out.text ? [{ type: "text", text: out.text }] : []), ...calls.map((c) => ({ type: "tool_use", ...c }))];
    yield { type: "assistant", message: { role: "assistant", content } as never, parent_tool_use_id: null, uuid: randomUUID(), session_id } as SDKMessage;
    const results: unknown[] = [];
    let deferred: { id: string; name: string; input: Record<string, unknown> } | undefined;
    for (const c of calls) {
      let decision = "allow";
      for (const m of (params.options.hooks?.PreToolUse ?? []) as HookCallbackMatcher[]) {
        if (m.matcher && !new RegExp(m.matcher).test(c.name)) continue;
        for (const h of m.hooks) {
          const r = (await h({ hook_event_name: "PreToolUse", tool_name: c.name, tool_input: c.input, tool_use_id: c.id } as never, c.id, { signal: input.signal })) as
            { hookSpecificOutput?: { permissionDecision?: string } };
          decision = r.hookSpecificOutput?.permissionDecision ?? decision;
        }
      }
      if (decision === "defer") {
        deferred ??= c;
        continue;
      }
      const r = await runInline(input, c.name.slice(`mcp__${serverName}__`.length), c.id, c.input);
      results.push({ type: "tool_result", tool_use_id: c.id, content: [{ type: "text", text: r.content }], is_error: r.isError });
    }
    if (results.length > 0) yield { type: "user", message: { role: "user", content: results } as never, parent_tool_use_id: null, session_id } as SDKMessage;
    yield {
      type: "result", subtype: "success", result: out.text ?? "", session_id, uuid: randomUUID(), is_error: false, num_turns: 1,
      deferred_tool_use: deferred, terminal_reason: deferred ? "tool_deferred" : "completed",
    } as unknown as SDKMessage;
  };
}

/** The demo through the Claude Agent SDK adapter, with fakeQuery as the CLI. */
export function claudeAgentSdkDemo(script: Script | undefined, ledger: Ledger, worker: string, demo: DemoTools): DemoAgent {
  const policies = stepPolicies(demo);
  const defs = Object.entries(policies).map(([name, p]) => tool(name, p.description, {}, async () => {
    throw new Error(`${name} runs as a Dex Step`);
  }));
  const calc = tool("calc", "Adds, subtracts or multiplies two numbers.", {}, async () => ({ content: [] }));
  const query = fakeQuery((input) => scripted(script, ledger, worker, input), (input, _name, callId, args) => runCalc(demo, input, callId, args));
  return claudeAgentSdkAdapter({ tools: [...defs, calc], dexTools: policies, query });
}
