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
//
// Under a Worker (input.stream set) the turn runs streamed (stream: true)
// and each output_text_delta of its raw model stream goes out as live
// output; the output is the same as the run's without streaming. Without
// input.stream, with stream: false, or for a model that does not stream,
// the turn runs as one non-streamed run.
import {
  Agent, run as runAgent, RunContext, type AgentInputItem, type FunctionTool, type Model, type ModelResponse, type RunResult, type Runner, type Tool as AgentTool,
  type Usage,
} from "@openai/agents";
import type { ModelInput, ModelOutputInit, Tool, ToolCall, UsageInit } from "../worker.js";
import { contentOf, dexTool, turnMessages, usageCount, type DexToolPolicy } from "./history.js";
import { LiveText } from "./live.js";

export type { DexToolPolicy } from "./history.js";

export interface OpenAIAgentsOptions {
  /** The agent (its instructions, model and tools), or one per RunModel (e.g. by input.agent). */
  agent: Agent<any, any> | ((input: ModelInput) => Agent<any, any>);
  /** The tools Dex runs as Steps, each with its policy; every other function tool runs inline. */
  dexTools?: Record<string, DexToolPolicy>;
  /** Runs the turn (default: the SDK's run, with its default OpenAI provider). */
  runner?: Runner;
  /**
   * Streams the model's text deltas as live output through input.stream (a
   * streamed run; default true). false: the run is not streamed, the output
   * sent whole at the end.
   */
  stream?: boolean;
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
 * providers pass the API's response, with its model); in a streamed run,
 * whose responses keep no provider data, the model its stream events named
 * (streamed); failing that, the agent's model when it is given by name. The
 * SDK gives no cost: it stays 0.
 */
export function openaiAgentsUsage(r: { state: { usage: Usage }; rawResponses: ModelResponse[] }, agent?: Agent<any, any>, streamed = ""): UsageInit {
  let model = "";
  for (const resp of r.rawResponses ?? []) {
    const m = resp.providerData?.model;
    if (typeof m === "string" && m !== "") model = m;
  }
  if (model === "") model = streamed;
  if (model === "" && typeof agent?.model === "string") model = agent.model;
  const u = r.state?.usage;
  return { inputTokens: usageCount(u?.inputTokens), outputTokens: usageCount(u?.outputTokens), model };
}

function isFunctionTool(t: AgentTool): t is FunctionTool<any, any, any> {
  return (t as { type?: string }).type === "function";
}

/**
 * The model a raw model stream event names ("": none): a streamed Responses
 * API run's response_done carries the response's provider data, a Chat
 * Completions chunk (a "model" event) its model.
 */
function streamEventModel(d: Record<string, any>): string {
  const m = d.type === "response_done" ? d.response?.providerData?.model : d.type === "model" ? (d.event?.model ?? d.event?.response?.model) : undefined;
  return typeof m === "string" ? m : "";
}

/** What a model's getStreamedResponse threw when called: the model does not stream. */
class StreamUnavailable extends Error {
  constructor(cause: unknown) {
    super("the model does not stream", { cause });
  }
}

/**
 * m, except that a getStreamedResponse that throws when called (rather than
 * failing inside its stream, as a provider's does) throws StreamUnavailable:
 * the adapter then runs the turn without streaming. Its other members are
 * m's, called on m.
 */
function markNoStream(m: Model): Model {
  const getStreamedResponse: Model["getStreamedResponse"] = (req) => {
    try {
      return m.getStreamedResponse(req);
    } catch (e) {
      throw new StreamUnavailable(e);
    }
  };
  return new Proxy(m, {
    get(t, p) {
      if (p === "getStreamedResponse") return getStreamedResponse;
      const v = Reflect.get(t, p, t);
      return typeof v === "function" ? v.bind(t) : v;
    },
  });
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
    const model = typeof a.model === "object" && a.model !== null ? { model: markNoStream(a.model) } : {};
    c = a.clone({ tools, toolUseBehavior: "stop_on_first_tool", ...model });
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

  /** The turn's output, as the run left it. */
  const outputOf = (r: Pick<RunResult<any, any>, "newItems" | "interruptions" | "state" | "rawResponses" | "lastAgent">, agent: Agent<any, any>, streamedModel = "") => {
    const out: ModelOutputInit = { text: "", toolCalls: [], inlineResults: [], usage: openaiAgentsUsage(r, r.lastAgent ?? agent, streamedModel) };
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

  // The turn streamed: each output_text_delta goes out, a newline before a
  // new output text part (the output joins them so); undefined when the
  // model does not stream.
  const streamed = async (agent: Agent<any, any>, input: ModelInput, send: (text: string) => void): Promise<ModelOutputInit | undefined> => {
    const live = new LiveText(send);
    const opts = { maxTurns: 1, context: { dex: input } satisfies DexRunContext, signal: input.signal, stream: true as const };
    let model = "";
    let part: string | undefined;
    let r;
    try {
      r = o.runner ? await o.runner.run(agent, toItems(input), opts) : await runAgent(agent, toItems(input), opts);
      for await (const ev of r) {
        if (ev.type !== "raw_model_stream_event") continue;
        const d = ev.data as Record<string, any>;
        if (d.type === "output_text_delta") {
          const key = `${d.itemId ?? ""}/${d.providerData?.content_index ?? ""}`;
          if (key !== part) live.piece();
          part = key;
          live.delta(d.delta);
        } else {
          model = streamEventModel(d) || model;
        }
      }
      await r.completed;
    } catch (e) {
      if (e instanceof StreamUnavailable) return undefined;
      throw e;
    }
    if (input.signal.aborted) throw input.signal.reason ?? new Error("the run was aborted");
    const out = outputOf(r, agent, model);
    out.text = live.sync(out.text ?? "");
    return out;
  };

  const run = async (input: ModelInput): Promise<ModelOutputInit> => {
    const agent = prepare(typeof o.agent === "function" ? o.agent(input) : o.agent);
    if (o.stream !== false && input.stream) {
      const out = await streamed(agent, input, input.stream);
      if (out) return out;
    }
    const opts = { maxTurns: 1, context: { dex: input } satisfies DexRunContext, signal: input.signal };
    const r = o.runner ? await o.runner.run(agent, toItems(input), opts) : await runAgent(agent, toItems(input), opts);
    return outputOf(r, agent);
  };
  return { model: { run }, tools };
}
