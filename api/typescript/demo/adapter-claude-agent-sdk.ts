import { randomUUID } from "node:crypto";
import { tool, type HookCallbackMatcher, type Options, type SDKMessage } from "@anthropic-ai/claude-agent-sdk";
import { claudeAgentSdkAdapter, serverName, type QueryFn } from "../src/adapters/claude-agent-sdk.js";
import type { ModelInput, ModelOutputInit } from "../src/index.js";
import type { Ledger } from "./ledger.js";
import { wait, type Script } from "./script.js";
import type { DemoTools } from "./tools.js";
import { runCalc, scripted, stepPolicies, type DemoAgent } from "./adapters.js";

/**
 * The Claude Code CLI's own tools. A scripted call of one of them is asked
 * for under its bare name and run by the CLI itself, inside the query (so
 * inside RunModel); every other call is a tool of the "dex" MCP server.
 */
export const cliTools = new Set(["Bash", "Write", "Edit", "Task"]);

type Run = (input: ModelInput, name: string, callId: string, args: unknown) => Promise<{ content: string; isError: boolean }>;
type Use = { id: string; name: string; input: Record<string, unknown> };

/** Asks the PreToolUse hooks whose matcher takes the call, as the CLI does; their last decision ("allow" when none). */
async function preToolUse(options: Options, input: ModelInput, c: Use): Promise<string> {
  let decision = "allow";
  for (const m of (options.hooks?.PreToolUse ?? []) as HookCallbackMatcher[]) {
    if (m.matcher && !new RegExp(m.matcher).test(c.name)) continue;
    for (const h of m.hooks) {
      const r = (await h({ hook_event_name: "PreToolUse", tool_name: c.name, tool_input: c.input, tool_use_id: c.id } as never, c.id, { signal: input.signal })) as
        { hookSpecificOutput?: { permissionDecision?: string } };
      decision = r.hookSpecificOutput?.permissionDecision ?? decision;
    }
  }
  return decision;
}

const assistant = (content: unknown[], parent: string | null, model = ""): SDKMessage =>
  ({ type: "assistant", message: { role: "assistant", content, model } as never, parent_tool_use_id: parent, uuid: randomUUID(), session_id: "fake" }) as SDKMessage;
const user = (content: unknown[], parent: string | null): SDKMessage =>
  ({ type: "user", message: { role: "user", content } as never, parent_tool_use_id: parent, session_id: "fake" }) as SDKMessage;
const toolResult = (id: string, r: { content: string; isError: boolean }) =>
  ({ type: "tool_result", tool_use_id: id, content: [{ type: "text", text: r.content }], is_error: r.isError });

/**
 * A fake of query()'s message stream, standing where the Claude Code CLI
 * would. When the output calls the CLI's own tools (cliTools), a first
 * model turn asks for them under their bare names and the CLI runs them
 * through runCli (a Task's sub-agent first streams its own messages, whose
 * parent is the Task call); their tool_result blocks follow. Then one
 * assistant message with the output's text and its other calls (MCP names),
 * the PreToolUse hooks asked for each, the calls they do not defer run
 * through runInline, their tool_result blocks, then the result.
 */
export function fakeQuery(answer: (input: ModelInput) => Promise<ModelOutputInit>, runInline: Run, runCli?: Run): QueryFn {
  return async function* (params: { prompt: string; options: Options }, input: ModelInput): AsyncGenerator<SDKMessage> {
    const out = await answer(input);
    const model = out.usage?.model ?? "";
    const all = [...(out.inlineResults ?? []), ...(out.toolCalls ?? [])].map((c) => ({
      id: c.callId, tool: c.tool, input: (typeof c.arguments === "string" ? JSON.parse(c.arguments || "{}") : c.arguments ?? {}) as Record<string, unknown>,
    }));
    let deferred: Use | undefined;
    const own: Use[] = all.filter((c) => cliTools.has(c.tool)).map((c) => ({ id: c.id, name: c.tool, input: c.input }));
    if (own.length > 0) {
      if (!runCli) throw new Error("the output calls the CLI's own tools but the fake CLI cannot run them");
      yield assistant(own.map((c) => ({ type: "tool_use", ...c })), null, model);
      const results: unknown[] = [];
      for (const c of own) {
        if ((await preToolUse(params.options, input, c)) === "defer") {
          deferred ??= c;
          continue;
        }
        if (c.name === "Task") {
          const sub = `${c.id}-sub`;
          yield assistant([{ type: "text", text: "working on it" }, { type: "tool_use", id: sub, name: "Read", input: { file_path: "README.md" } }], c.id);
          yield user([toolResult(sub, { content: "read", isError: false })], c.id);
        }
        results.push(toolResult(c.id, await runCli(input, c.name, c.id, c.input)));
      }
      yield user(results, null);
    }
    const calls: Use[] = all.filter((c) => !cliTools.has(c.tool)).map((c) => ({ id: c.id, name: `mcp__${serverName}__${c.tool}`, input: c.input }));
    const content = [...(out.text ? [{ type: "text", text: out.text }] : []), ...calls.map((c) => ({ type: "tool_use", ...c }))];
    yield assistant(content, null, model);
    const results: unknown[] = [];
    for (const c of calls) {
      if ((await preToolUse(params.options, input, c)) === "defer") {
        deferred ??= c;
        continue;
      }
      results.push(toolResult(c.id, await runInline(input, c.name.slice(`mcp__${serverName}__`.length), c.id, c.input)));
    }
    if (results.length > 0) yield user(results, null);
    yield {
      type: "result", subtype: "success", result: out.text ?? "", session_id: "fake", uuid: randomUUID(), is_error: false, num_turns: own.length > 0 ? 2 : 1,
      deferred_tool_use: deferred, terminal_reason: deferred ? "tool_deferred" : "completed", ...resultUsage(out),
    } as unknown as SDKMessage;
  };
}

/**
 * A result message's usage fields for a Dex model output, as the CLI
 * reports them: the main loop's usage, the per-model totals and the cost in
 * dollars (none when the output has no usage).
 */
export function resultUsage(out: ModelOutputInit): Record<string, unknown> {
  if (!out.usage) return {};
  const inputTokens = Number(out.usage.inputTokens ?? 0);
  const outputTokens = Number(out.usage.outputTokens ?? 0);
  const costUSD = Number(out.usage.costMicros ?? 0) / 1e6;
  return {
    usage: { input_tokens: inputTokens, output_tokens: outputTokens, cache_read_input_tokens: 0, cache_creation_input_tokens: 0 },
    modelUsage: {
      [out.usage.model || "unknown"]: {
        inputTokens, outputTokens, cacheReadInputTokens: 0, cacheCreationInputTokens: 0, webSearchRequests: 0, costUSD, contextWindow: 0, maxOutputTokens: 0,
      },
    },
    total_cost_usd: costUSD,
  };
}

/**
 * One of the CLI's own tools, run inside the query: its ledger line (kind
 * "inline", as every call that runs inside RunModel), the demo tools'
 * sleep_ms test argument, and a result naming it.
 */
export function cliRunner(ledger: Ledger, worker: string): Run {
  return async (input, name, callId, args) => {
    const a = (args ?? {}) as { sleep_ms?: unknown };
    ledger.append({
      session: input.sessionId, call_id: callId, tool: name, attempt: input.attempt, step: input.stepId, kind: "inline", worker, epoch: input.epoch,
    });
    await wait(Number.isInteger(a.sleep_ms) ? (a.sleep_ms as number) : 0, input.signal);
    return { content: `${name} done`, isError: false };
  };
}

/** The demo through the Claude Agent SDK adapter, with fakeQuery as the CLI. */
export function claudeAgentSdkDemo(script: Script | undefined, ledger: Ledger, worker: string, demo: DemoTools): DemoAgent {
  const policies = stepPolicies(demo);
  const defs = Object.entries(policies).map(([name, p]) => tool(name, p.description, {}, async () => {
    throw new Error(`${name} runs as a Dex Step`);
  }));
  const calc = tool("calc", "Adds, subtracts or multiplies two numbers.", {}, async () => ({ content: [] }));
  const query = fakeQuery((input) => scripted(script, ledger, worker, input), (input, _name, callId, args) => runCalc(demo, input, callId, args),
    cliRunner(ledger, worker));
  return claudeAgentSdkAdapter({ tools: [...defs, calc], dexTools: policies, query });
}
