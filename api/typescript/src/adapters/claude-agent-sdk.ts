// The Claude Agent SDK adapter: a Dex RunModel runs one query() of the
// Claude Code loop on the history Dex hands over (rendered as a transcript
// prompt: the CLI keeps its own session and takes only user input). Tools
// named in dexTools are served by an in-process MCP server ("dex") whose
// calls a PreToolUse hook defers (permissionDecision "defer"): they become
// Dex tool calls, run as CallTool / CallSingleAttemptTool Steps with their
// policies. Model calls, the CLI's own tools and the other MCP tools run
// inside the query: Dex records them as inline results, at least once. The
// query's usage (its result's tokens and cost, the model that answered) goes
// out with the output. A model call that failed (an assistant message's
// error, after the CLI's own retries) fails the attempt with its type; a
// rate_limit with the time the limit lifts, when the CLI said so in a
// rejected rate_limit_event, as its Retry-After.
//
// Under a Worker (input.stream set) the query runs with
// includePartialMessages: the text_delta of each content_block_delta the
// main loop streams goes out as live output, a newline before each new
// text block (the output joins the text blocks so). Without input.stream,
// or with stream: false, the query runs as it is given.
import {
  createSdkMcpServer, query as sdkQuery, type HookCallback, type Options, type SdkMcpToolDefinition, type SDKMessage, type SDKResultSuccess,
} from "@anthropic-ai/claude-agent-sdk";
import { ErrorType } from "../../gen/dex/v1/types_pb.js";
import { ModelError } from "../errors.js";
import type { ModelInput, ModelOutputInit, Tool, UsageInit } from "../worker.js";
import { contentOf, dexTool, turnMessages, usageCount, type DexToolPolicy } from "./history.js";
import { LiveText } from "./live.js";

export type { DexToolPolicy } from "./history.js";

/** The MCP server name of the adapter's tools: the model sees mcp__dex__NAME. */
export const serverName = "dex";
const prefix = `mcp__${serverName}__`;

export type QueryFn = (params: { prompt: string; options: Options }, input: ModelInput) => AsyncIterable<SDKMessage>;

export interface ClaudeAgentSdkOptions {
  /** The SDK's options (model, systemPrompt, allowedTools, ...), or one set per RunModel (e.g. by input.agent). */
  options?: Options | ((input: ModelInput) => Options);
  /** Tools of the in-process MCP server (the SDK's tool()); those in dexTools are deferred to Dex. */
  tools?: SdkMcpToolDefinition<any>[];
  dexTools?: Record<string, DexToolPolicy>;
  /** The SDK's query (default); a test passes a fake of the message stream. */
  query?: QueryFn;
  /**
   * Streams the model's text deltas as live output through input.stream
   * (the query's partial messages; default true). false: the query runs
   * with the options given, the output sent whole at the end.
   */
  stream?: boolean;
}

export interface DexAgent {
  model: { run(input: ModelInput): Promise<ModelOutputInit> };
  tools: Tool[];
}

/** The Dex history as one prompt. */
export function transcript(input: ModelInput): string {
  const lines: string[] = [];
  for (const m of turnMessages(input.history)) {
    if (m.role === "user") lines.push(`User: ${m.text}`);
    else if (m.role === "tool") lines.push(`Result of ${m.tool} (${m.callId})${m.isError ? " [error]" : ""}: ${m.content}`);
    else {
      if (m.text) lines.push(`Assistant: ${m.text}`);
      for (const c of m.calls) lines.push(`Assistant called ${c.tool} (${c.callId}) with ${c.arguments || "{}"}`);
    }
  }
  return lines.join("\n");
}

/**
 * What a query used, from its result message: the tokens of every model
 * call it made (modelUsage, summed over its models; the main loop's usage
 * when it has none), input tokens counting the cache reads and writes that
 * Anthropic reports apart (other providers count them in their input
 * tokens); the cost, total_cost_usd in micro-dollars; and model, the one
 * that answered (the main loop's last assistant message), else modelUsage's
 * only model.
 */
export function claudeAgentSdkUsage(r: Partial<Pick<SDKResultSuccess, "usage" | "modelUsage" | "total_cost_usd">>, model = ""): UsageInit {
  const per = Object.entries(r.modelUsage ?? {});
  let inputTokens = 0;
  let outputTokens = 0;
  if (per.length > 0) {
    for (const [, u] of per) {
      inputTokens += usageCount(u.inputTokens) + usageCount(u.cacheReadInputTokens) + usageCount(u.cacheCreationInputTokens);
      outputTokens += usageCount(u.outputTokens);
    }
  } else if (r.usage) {
    inputTokens = usageCount(r.usage.input_tokens) + usageCount(r.usage.cache_read_input_tokens) + usageCount(r.usage.cache_creation_input_tokens);
    outputTokens = usageCount(r.usage.output_tokens);
  }
  if (model === "" && per.length === 1) model = per[0][0];
  return { inputTokens, outputTokens, costMicros: usageCount((r.total_cost_usd ?? 0) * 1e6), model };
}

const assistantErrors: Record<string, ErrorType> = {
  rate_limit: ErrorType.RATE_LIMIT, overloaded: ErrorType.OVERLOADED, server_error: ErrorType.SERVER_ERROR, invalid_request: ErrorType.INVALID_REQUEST,
};

/**
 * When a rejected rate_limit_event says the limit lifts, in Unix
 * milliseconds (0: it does not say). The CLI gives resetsAt in seconds; a
 * value already in milliseconds (past 10^12, the year 33658 in seconds) is
 * taken as it is.
 */
function rateLimitResetMs(m: SDKMessage): number {
  if (m.type !== "rate_limit_event" || m.rate_limit_info?.status !== "rejected") return 0;
  const at = m.rate_limit_info.resetsAt;
  if (typeof at !== "number" || !(at > 0) || !Number.isFinite(at)) return 0;
  return at < 1e12 ? at * 1000 : at;
}

/** Makes a Dex model handler and tools of a Claude Agent SDK setup. */
export function claudeAgentSdkAdapter(o: ClaudeAgentSdkOptions = {}): DexAgent {
  const defs = new Map((o.tools ?? []).map((t) => [t.name, t]));
  const policies = o.dexTools ?? {};
  const tools: Tool[] = [];
  for (const [name, p] of Object.entries(policies)) {
    const d = defs.get(name);
    if (!d) throw new Error(`claudeAgentSdkAdapter: dexTools names ${JSON.stringify(name)}, which is not in tools`);
    tools.push(dexTool(name, p, async (call) => {
      const r = await d.handler(call.arguments ? JSON.parse(call.arguments) : {}, { dex: call });
      const text = (r.content ?? []).map((c: { type: string; text?: string }) => (c.type === "text" ? c.text : contentOf(c))).join("\n");
      return { content: text, isError: !!r.isError };
    }, d.description));
  }
  const q: QueryFn = o.query ?? ((params) => sdkQuery(params));

  const run = async (input: ModelInput): Promise<ModelOutputInit> => {
    const base = typeof o.options === "function" ? o.options(input) : (o.options ?? {});
    // A server of its own per query: the SDK connects the server's instance
    // to the query's CLI, and an instance takes one connection at a time, so
    // a shared one would leave a concurrent query without the tools.
    const server = defs.size > 0 ? createSdkMcpServer({ name: serverName, tools: [...defs.values()] }) : undefined;
    const deferred: { callId: string; tool: string; arguments: string }[] = [];
    const defer: HookCallback = async (h, toolUseID) => {
      const hi = h as { tool_name?: string; tool_input?: unknown; tool_use_id?: string };
      const name = (hi.tool_name ?? "").startsWith(prefix) ? hi.tool_name!.slice(prefix.length) : "";
      if (!(name in policies)) return {};
      deferred.push({ callId: hi.tool_use_id ?? toolUseID ?? "", tool: name, arguments: contentOf(hi.tool_input ?? {}) });
      return { hookSpecificOutput: { hookEventName: "PreToolUse", permissionDecision: "defer", permissionDecisionReason: "runs as a Dex Step" } };
    };
    const abort = new AbortController();
    const onAbort = () => abort.abort(input.signal.reason);
    input.signal.addEventListener("abort", onAbort, { once: true });
    const live = o.stream !== false && input.stream ? new LiveText(input.stream) : undefined;
    const options: Options = {
      ...base, ...(live ? { includePartialMessages: true } : {}), abortController: abort,
      mcpServers: { ...(base.mcpServers ?? {}), ...(server ? { [serverName]: server } : {}) },
      hooks: { ...(base.hooks ?? {}), PreToolUse: [...(base.hooks?.PreToolUse ?? []), { matcher: `^${prefix}`, hooks: [defer] }] },
    };
    const texts: string[] = [];
    const uses = new Map<string, { callId: string; tool: string; arguments: string }>();
    const inline: NonNullable<ModelOutputInit["inlineResults"]> = [];
    let model = "";
    let usage: UsageInit | undefined;
    // When the account's rate limit lifts, as the last rate_limit_event said (0: it is not rejected, or no time given).
    let limitLiftsAt = 0;
    try {
      for await (const m of q({ prompt: transcript(input), options }, input)) {
        if (m.type === "stream_event") {
          // The main loop's partial messages only: a sub-agent's text is not the output.
          if (!live || m.parent_tool_use_id !== null) continue;
          const ev = m.event;
          if (ev.type === "content_block_start" && ev.content_block.type === "text") live.piece();
          else if (ev.type === "content_block_delta" && ev.delta.type === "text_delta") live.delta(ev.delta.text);
        } else if (m.type === "rate_limit_event") {
          limitLiftsAt = rateLimitResetMs(m);
        } else if (m.type === "assistant" && m.parent_tool_use_id === null) {
          if (m.error) {
            const type = assistantErrors[m.error] ?? ErrorType.UNKNOWN;
            const retryAfterMs = type === ErrorType.RATE_LIMIT && limitLiftsAt > 0 ? limitLiftsAt - Date.now() : 0;
            throw new ModelError(type, `the model call failed: ${m.error}`, { retryAfterMs });
          }
          // The CLI's own messages (no model call behind them) name the model "<synthetic>".
          if (typeof m.message.model === "string" && m.message.model !== "" && m.message.model !== "<synthetic>") model = m.message.model;
          for (const b of m.message.content as { type: string; text?: string; id?: string; name?: string; input?: unknown }[]) {
            if (b.type === "text" && b.text) texts.push(b.text);
            if (b.type === "tool_use") uses.set(b.id!, { callId: b.id!, tool: b.name!.startsWith(prefix) ? b.name!.slice(prefix.length) : b.name!, arguments: contentOf(b.input ?? {}) });
          }
          // What the message's text adds to the stream (a message the CLI did not stream, as its own) goes out now.
          live?.sync(texts.join("\n"));
        } else if (m.type === "user" && m.parent_tool_use_id === null && Array.isArray(m.message.content)) {
          for (const b of m.message.content as { type: string; tool_use_id?: string; content?: unknown; is_error?: boolean }[]) {
            const u = b.type === "tool_result" ? uses.get(b.tool_use_id!) : undefined;
            if (!u || deferred.some((d) => d.callId === u.callId)) continue;
            const content = Array.isArray(b.content) ? b.content.map((c: { text?: string }) => c.text ?? "").join("\n") : contentOf(b.content);
            inline.push({ ...u, content, isError: !!b.is_error });
          }
        } else if (m.type === "result") {
          if (m.subtype !== "success") throw new ModelError(ErrorType.UNKNOWN, `the Claude Code query ended: ${m.subtype}`);
          usage = claudeAgentSdkUsage(m, model);
          const d = m.deferred_tool_use;
          if (d && !deferred.some((x) => x.callId === d.id)) deferred.push({ callId: d.id, tool: d.name.replace(prefix, ""), arguments: contentOf(d.input) });
          break;
        }
      }
    } finally {
      input.signal.removeEventListener("abort", onAbort);
      abort.abort();
    }
    const text = texts.join("\n");
    return { text: live ? live.sync(text) : text, toolCalls: deferred, inlineResults: inline, ...(usage ? { usage } : {}) };
  };
  return { model: { run }, tools };
}
