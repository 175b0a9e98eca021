// The OpenAI Agents SDK adapter: a Dex RunModel runs one turn of the
// agent (maxTurns 1: one model call) on the history Dex hands over. Tools
// named in dexTools get needsApproval, so the SDK defers their calls (run
// interruptions): they become Dex tool calls, run as CallTool /
// CallSingleAttemptTool Steps with their policies by the tool's own invoke.
// Other function tools run inside the turn (stop_on_first_tool ends it after
// them): Dex records them as inline results, at least once. The run's usage
// (its tokens and the model that answered; the SDK gives no cost) goes out
// with the output. A provider's error leaves the run as the SDK throws it
// (the openai package's APIError, with its status and response headers):
// the Worker types it by its HTTP status, a rate_limit with the Retry-After
// of its headers.
import {
  Agent, run as runAgent, RunContext, type AgentInputItem, type FunctionTool, type ModelResponse, type Runner, type Tool as AgentTool, type Usage,
} from "@openai/agents";
import type { ModelInput, ModelOutputInit, Tool, ToolCall, UsageInit } from "../worker.js";
import { contentOf, dexTool, turnMessages, usageCount, type DexToolPolicy } from "./history.js";

export type { DexToolPolicy } from "./history.js";

export interface OpenAIAgentsOptions {
  /** The agent (its instructions, model and tools), or one per RunModel (e.g. by input.agent). */
  agent: Agent<any, any> | ((input: ModelInput) => Agent<any, any>);
  /** The tools Dex runs as Steps, each with its policy; every other function tool runs inline. */
  dexTools?: Record<string, DexToolPolicy>;
  /** Runs the turn (default: the SDK's run, with its default OpenAI provider). */
  runner?: Runner;
}

/** The run context a tool's execute gets under Dex: context.dex. */
export interface DexRunContext {
  dex: ToolCall | ModelInput;
}

export interface DexAgent {
  model: { run(input: ModelInput): Promise<ModelOutputInit>; compact?: undefined };
  tools: Tool[];
}

function toItems(input: ModelInput): AgentInputItem[] {
  const items: AgentInputItem[] = [];
  for (const m of turnMessages(input.history)) {
    if (m.role === "user") items.push({ role: "user", content: m.text });
    else if (m.role === "tool") items.push({ type: "function_call_result", callId: m.callId, name: m.tool, status: "completed", output: { type: "text", text: m.content } });
    else {
      if (m.text) items.push({ role: "assistant", status: "completed", content: [{ type: "output_text", text: m.text }] });
      for (const c of m.calls) items.push({ type: "function_call", callId: c.callId, name: c.tool, arguments: c.arguments || "{}", status: "completed" });
    }
  }
  return items;
}

/**
 * What a run used: its tokens (the run's total, state.usage) and the model
 * that answered: the last response's provider data names it (the OpenAI
 * providers pass the API's response, with its model); failing that, the
 * agent's model when it is given by name. The SDK gives no cost: it stays 0.
 */
export function openaiAgentsUsage(r: { state: { usage: Usage }; rawResponses: ModelResponse[] }, agent?: Agent<any, any>): UsageInit {
  let model = "";
  for (const resp of r.rawResponses ?? []) {
    const m = resp.providerData?.model;
    if (typeof m === "string" && m !== "") model = m;
  }
  if (model === "" && typeof agent?.model === "string") model = agent.model;
  const u = r.state?.usage;
  return { inputTokens: usageCount(u?.inputTokens), outputTokens: usageCount(u?.outputTokens), model };
}

function isFunctionTool(t: AgentTool): t is FunctionTool<any, any, any> {
  return (t as { type?: string }).type === "function";
}

/** Makes a Dex model handler and tools of an OpenAI Agents SDK agent. */
export function openaiAgentsAdapter(o: OpenAIAgentsOptions): DexAgent {
  if (!o || !(o.agent instanceof Agent || typeof o.agent === "function")) throw new Error("openaiAgentsAdapter: an agent is required");
  const policies = o.dexTools ?? {};
  const deferred = new Set(Object.keys(policies));
  // Per agent: a copy whose Dex tools are deferred through approval.
  const copies = new WeakMap<Agent<any, any>, Agent<any, any>>();
  const prepare = (a: Agent<any, any>): Agent<any, any> => {
    let c = copies.get(a);
    if (c) return c;
    const tools = a.tools.map((t) => (isFunctionTool(t) && deferred.has(t.name) ? { ...t, needsApproval: async () => true } : t));
    c = a.clone({ tools, toolUseBehavior: "stop_on_first_tool" });
    copies.set(a, c);
    return c;
  };
  const tools: Tool[] = [];
  if (o.agent instanceof Agent) {
    const byName = new Map(o.agent.tools.filter(isFunctionTool).map((t) => [t.name, t]));
    for (const [name, p] of Object.entries(policies)) {
      const t = byName.get(name);
      if (!t && !p.run) throw new Error(`openaiAgentsAdapter: dexTools names ${JSON.stringify(name)}, which is not a function tool of the agent`);
      tools.push(dexTool(name, p, async (call) => {
        const ctx = new RunContext<DexRunContext>({ dex: call });
        const out = await t!.invoke(ctx, call.arguments || "{}", { toolCall: { type: "function_call", callId: call.callId, name, arguments: call.arguments || "{}" } });
        return { content: contentOf(out) };
      }, t?.description));
    }
  } else {
    for (const [name, p] of Object.entries(policies)) {
      if (!p.run) throw new Error(`openaiAgentsAdapter: with an agent per RunModel, dexTools ${JSON.stringify(name)} needs a run handler`);
      tools.push(dexTool(name, p, p.run));
    }
  }

  const run = async (input: ModelInput): Promise<ModelOutputInit> => {
    const agent = prepare(typeof o.agent === "function" ? o.agent(input) : o.agent);
    const opts = { maxTurns: 1, context: { dex: input } satisfies DexRunContext, signal: input.signal };
    const r = o.runner ? await o.runner.run(agent, toItems(input), opts) : await runAgent(agent, toItems(input), opts);
    const out: ModelOutputInit = { text: "", toolCalls: [], inlineResults: [], usage: openaiAgentsUsage(r, r.lastAgent ?? agent) };
    const texts: string[] = [];
    const inline = new Map<string, { callId: string; tool: string; arguments: string; content: string }>();
    for (const item of r.newItems) {
      const raw = item.rawItem as Record<string, any>;
      if (item.type === "message_output_item") {
        for (const c of raw.content ?? []) if (c.type === "output_text") texts.push(c.text);
      } else if (item.type === "tool_call_item" && raw.type === "function_call" && !deferred.has(raw.name)) {
        inline.set(raw.callId, { callId: raw.callId, tool: raw.name, arguments: raw.arguments, content: "" });
      } else if (item.type === "tool_call_output_item") {
        const i = inline.get(raw.callId);
        if (i) i.content = typeof (item as { output?: unknown }).output === "string" ? (item as { output: string }).output : contentOf((item as { output?: unknown }).output);
      }
    }
    for (const it of r.interruptions ?? []) {
      const raw = it.rawItem as Record<string, any>;
      out.toolCalls!.push({ callId: raw.callId, tool: raw.name, arguments: raw.arguments || "{}" });
    }
    out.text = texts.join("\n");
    out.inlineResults = [...inline.values()];
    return out;
  };
  return { model: { run }, tools };
}
