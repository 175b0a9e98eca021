// The Vercel AI SDK adapter: a Dex RunModel runs one step of the model (one
// model call, stopWhen stepCountIs(1)) on the history Dex hands over. Tools
// named in dexTools reach the model without their execute function, so the
// AI SDK defers them: their calls become Dex tool calls, run as CallTool /
// CallSingleAttemptTool Steps with their policies by the execute function
// they came with. Tools with an execute function run inside that step: Dex
// records them as inline results (they run again with their RunModel: at
// least once). The step's usage (tokens and the model that answered; the AI
// SDK gives no cost) goes out with the output. A provider's APICallError
// fails the attempt typed by its HTTP status, a rate_limit one with the
// Retry-After of its response headers.
//
// Under a Worker (input.stream set) the step runs through streamText and
// each text delta goes out as live output; the output is the same as
// generateText's. Without input.stream, with stream: false, or for a model
// that cannot stream, the step is one generateText call.
import {
  APICallError, generateText, NoOutputGeneratedError, stepCountIs, streamText, type ContentPart, type LanguageModel, type LanguageModelUsage, type ModelMessage,
  type Tool as AiTool, type ToolSet,
} from "ai";
import { ModelError, newHttpModelError } from "../errors.js";
import { ErrorType } from "../../gen/dex/v1/types_pb.js";
import type { ModelInput, ModelOutputInit, Tool, ToolCall, UsageInit } from "../worker.js";
import { contentOf, dexTool, turnMessages, usageCount, type DexToolPolicy } from "./history.js";
import { LiveText } from "./live.js";

export type { DexToolPolicy } from "./history.js";

export interface AiSdkAgentOptions {
  /** The model, or one per RunModel (e.g. by input.agent). */
  model: LanguageModel | ((input: ModelInput) => LanguageModel);
  system?: string;
  tools?: ToolSet;
  /** The tools Dex runs as Steps, each with its policy; every other tool runs inline. */
  dexTools?: Record<string, DexToolPolicy>;
  /** Instructions of the CompactContext summary call. */
  compactPrompt?: string;
  /**
   * Streams the model's text deltas as live output through input.stream
   * (streamText; default true). false: one generateText call, the output
   * sent whole at the end.
   */
  stream?: boolean;
}

/** What Worker takes: the model handler and the Dex tools. */
export interface DexAgent {
  model: { run(input: ModelInput): Promise<ModelOutputInit>; compact(input: ModelInput): Promise<string> };
  tools: Tool[];
}

/** The context an AI SDK execute function gets as experimental_context under Dex. */
export interface DexContext {
  /** The Dex tool call (a deferred tool) or the RunModel input (an inline tool). */
  dex: ToolCall | ModelInput;
}

function toModelMessages(input: ModelInput): ModelMessage[] {
  return turnMessages(input.history).map((m): ModelMessage => {
    if (m.role === "user") return { role: "user", content: m.text };
    if (m.role === "tool") {
      return { role: "tool", content: [{ type: "tool-result", toolCallId: m.callId, toolName: m.tool, output: m.isError ? { type: "error-text", value: m.content } : { type: "text", value: m.content } }] };
    }
    const content: Exclude<ModelMessage & { role: "assistant" }, never>["content"] = [];
    if (m.text) (content as unknown[]).push({ type: "text", text: m.text });
    for (const c of m.calls) (content as unknown[]).push({ type: "tool-call", toolCallId: c.callId, toolName: c.tool, input: c.input });
    return { role: "assistant", content };
  });
}

/**
 * What a generateText call used: its tokens over all its steps (input
 * tokens count cached ones too) and the model that answered. The AI SDK
 * gives no cost: it stays 0.
 */
export function aiSdkUsage(r: { totalUsage?: LanguageModelUsage; response?: { modelId?: string } }): UsageInit {
  return { inputTokens: usageCount(r.totalUsage?.inputTokens), outputTokens: usageCount(r.totalUsage?.outputTokens), model: r.response?.modelId ?? "" };
}

/**
 * A provider's API error as a typed Dex model error (a rate_limit one with
 * the Retry-After of its response headers); anything else as it is.
 */
function typed(e: unknown): unknown {
  if (APICallError.isInstance(e) && e.statusCode) return newHttpModelError(e.statusCode, e.message, e.responseHeaders);
  return e;
}

/**
 * Whether a streamText error means the model cannot stream, so that the
 * step runs through generateText instead: its doStream failed before the
 * stream started (before any start-step part) with an error that is none of
 * a provider's API error (an APICallError: the request was made), a Dex
 * ModelError, an abort or an empty stream. A model without doStream (the AI
 * SDK's MockLanguageModelV3 given only doGenerate) fails so; a provider's
 * other errors before its request (a bad prompt, no API key) come again from
 * doGenerate, still before any request.
 */
function streamUnavailable(e: unknown, signal: AbortSignal): boolean {
  if (signal.aborted || APICallError.isInstance(e) || e instanceof ModelError || NoOutputGeneratedError.isInstance(e)) return false;
  return !(e instanceof Error && (e.name === "AbortError" || e.name === "TimeoutError"));
}

/** Makes a Dex model handler and tools of an AI SDK model and tool set. */
export function aiSdkAgent(o: AiSdkAgentOptions): DexAgent {
  if (!o || (typeof o.model !== "function" && (typeof o.model !== "object" || o.model === null) && typeof o.model !== "string")) {
    throw new Error("aiSdkAgent: a model is required");
  }
  const all = o.tools ?? {};
  const policies = o.dexTools ?? {};
  const modelTools: ToolSet = {};
  const tools: Tool[] = [];
  for (const name of Object.keys(policies)) {
    if (!(name in all)) throw new Error(`aiSdkAgent: dexTools names ${JSON.stringify(name)}, which is not in tools`);
  }
  for (const [name, t] of Object.entries(all)) {
    const p = policies[name];
    if (!p) {
      if (typeof t.execute !== "function") {
        throw new Error(`aiSdkAgent: tool ${JSON.stringify(name)} has no execute function and no Dex policy: give it one in dexTools`);
      }
      modelTools[name] = t;
      continue;
    }
    const { execute, ...deferred } = t as AiTool & { execute?: AiTool["execute"] };
    modelTools[name] = deferred as AiTool;
    if (!execute && !p.run) throw new Error(`aiSdkAgent: tool ${JSON.stringify(name)} has neither an execute function nor a Dex run handler`);
    tools.push(dexTool(name, p, async (call) => {
      const input = call.arguments ? JSON.parse(call.arguments) : {};
      const ctx: DexContext = { dex: call };
      const out = await execute!(input, { toolCallId: call.callId, messages: [], abortSignal: call.signal, experimental_context: ctx });
      return { content: contentOf(out) };
    }, t.description));
  }
  const modelOf = (input: ModelInput) => (typeof o.model === "function" ? (o.model as (i: ModelInput) => LanguageModel)(input) : o.model);

  const step = (input: ModelInput, model: LanguageModel) => ({
    model, system: o.system, messages: toModelMessages(input), tools: modelTools, stopWhen: stepCountIs(1),
    abortSignal: input.signal, maxRetries: 0, experimental_context: { dex: input } satisfies DexContext,
  });

  /** The step's output: its text, the calls Dex runs, the inline calls' results, its usage. */
  const outputOf = (text: string, content: ContentPart<ToolSet>[], usage: UsageInit): ModelOutputInit => {
    const out: ModelOutputInit = { text, toolCalls: [], inlineResults: [], usage };
    for (const part of content) {
      if (part.type === "tool-call" && !part.invalid && !(part.toolName in policies) && part.toolName in modelTools) continue; // ran inline
      if (part.type === "tool-call") out.toolCalls!.push({ callId: part.toolCallId, tool: part.toolName, arguments: contentOf(part.input ?? {}) });
      else if (part.type === "tool-result") {
        out.inlineResults!.push({ callId: part.toolCallId, tool: part.toolName, arguments: contentOf(part.input ?? {}), content: contentOf(part.output) });
      } else if (part.type === "tool-error") {
        out.inlineResults!.push({
          callId: part.toolCallId, tool: part.toolName, arguments: contentOf(part.input ?? {}), content: String((part.error as Error)?.message ?? part.error), isError: true,
        });
      }
    }
    return out;
  };

  const generated = async (input: ModelInput, model: LanguageModel): Promise<ModelOutputInit> => {
    let r;
    try {
      r = await generateText(step(input, model));
    } catch (e) {
      throw typed(e);
    }
    return outputOf(r.text, r.content, aiSdkUsage(r));
  };

  // The step through streamText: each text-delta part is streamed; the
  // first error part fails the attempt, typed as generateText's would be,
  // even after deltas (the output so far is not an answer).
  const streamed = async (input: ModelInput, model: LanguageModel, send: (text: string) => void): Promise<ModelOutputInit> => {
    const live = new LiveText(send, "");
    const r = streamText({ ...step(input, model), onError: () => {} }); // errors are read as error parts
    let started = false;
    let failure: { error: unknown } | undefined;
    try {
      for await (const part of r.fullStream) {
        if (part.type === "start-step") started = true;
        else if (part.type === "text-delta") live.delta(part.text);
        else if (part.type === "error") {
          if (!started && streamUnavailable(part.error, input.signal)) return await generated(input, model);
          failure ??= { error: part.error };
        }
      }
      if (failure) throw failure.error instanceof Error ? failure.error : new Error(String(failure.error));
      const steps = await r.steps;
      const last = steps[steps.length - 1];
      return outputOf(live.sync(last.text), last.content, aiSdkUsage({ totalUsage: await r.totalUsage, response: last.response }));
    } catch (e) {
      throw typed(e);
    }
  };

  const run = (input: ModelInput): Promise<ModelOutputInit> => {
    const model = modelOf(input);
    return o.stream !== false && input.stream ? streamed(input, model, input.stream) : generated(input, model);
  };

  const compact = async (input: ModelInput): Promise<string> => {
    try {
      const r = await generateText({
        model: modelOf(input), system: o.compactPrompt ?? "Summarise the conversation so far for the assistant to go on from: facts, decisions, open tasks.",
        messages: toModelMessages(input), abortSignal: input.signal, maxRetries: 0,
      });
      if (!r.text) throw new ModelError(ErrorType.UNKNOWN, "the summary is empty");
      return r.text;
    } catch (e) {
      throw typed(e);
    }
  };
  return { model: { run, compact }, tools };
}
