// The history Dex hands a RunModel, in the shape every adapter converts
// from: user text, assistant outputs with their calls (inline calls carry
// their result), and tool results. Notes and summaries become user text.
import { HistoryKind, Outcome, type HistoryEntry } from "../../gen/dex/v1/types_pb.js";
import type { Access, PollHandler, Tool, ToolHandler } from "../worker.js";

export interface TurnCall {
  callId: string;
  tool: string;
  /** Parsed JSON arguments ({} when empty or not JSON). */
  input: Record<string, unknown>;
  /** JSON text as the model gave it. */
  arguments: string;
}

export type TurnMessage =
  | { role: "user"; text: string }
  | { role: "assistant"; text: string; calls: TurnCall[] }
  | { role: "tool"; callId: string; tool: string; content: string; isError: boolean };

export function parseArgs(s: string): Record<string, unknown> {
  if (!s) return {};
  try {
    const v = JSON.parse(s);
    return typeof v === "object" && v !== null && !Array.isArray(v) ? v : { value: v };
  } catch {
    return { raw: s };
  }
}

/** Converts Dex history into turn messages, in order. */
export function turnMessages(history: HistoryEntry[]): TurnMessage[] {
  const out: TurnMessage[] = [];
  for (const e of history) {
    switch (e.kind) {
      case HistoryKind.USER:
        out.push({ role: "user", text: e.text });
        break;
      case HistoryKind.SUMMARY:
        out.push({ role: "user", text: `Summary of the conversation so far: ${e.text}` });
        break;
      case HistoryKind.NOTE:
        out.push({ role: "user", text: `Note from the system: ${e.text}` });
        break;
      case HistoryKind.ASSISTANT: {
        const calls = [...e.inlineResults, ...e.toolCalls].map((c) => ({ callId: c.callId, tool: c.tool, input: parseArgs(c.arguments), arguments: c.arguments }));
        out.push({ role: "assistant", text: e.text, calls });
        // Inline calls ran inside that RunModel: their results follow at once.
        for (const r of e.inlineResults) out.push({ role: "tool", callId: r.callId, tool: r.tool, content: r.content, isError: r.isError });
        break;
      }
      case HistoryKind.TOOL_RESULT:
        out.push({ role: "tool", callId: e.callId, tool: e.tool, content: e.text, isError: e.outcome !== Outcome.SUCCEEDED });
        break;
    }
  }
  return out;
}

/** The policy of a framework tool that Dex runs as its own Step (CallTool / CallSingleAttemptTool). */
export interface DexToolPolicy {
  access: Access;
  needsApproval?: boolean;
  maxAttempts?: number;
  runTimeoutMs?: number;
  agents?: string[];
  description?: string;
  /** Runs the tool instead of the framework tool's own function (required when the framework tool has none). */
  run?: ToolHandler;
  /** A long-running tool: run returns a task id, poll is called until done. */
  longRunning?: boolean;
  pollIntervalMs?: number;
  poll?: PollHandler;
}

/** A Dex Tool for a deferred framework tool: the policy with a handler. */
export function dexTool(name: string, policy: DexToolPolicy, run: ToolHandler, description = ""): Tool {
  if (!policy || typeof policy !== "object") throw new Error(`tool ${JSON.stringify(name)}: the Dex policy must be an object with access`);
  return {
    name, access: policy.access, description: policy.description ?? description, needsApproval: policy.needsApproval,
    maxAttempts: policy.maxAttempts, runTimeoutMs: policy.runTimeoutMs, agents: policy.agents, run: policy.run ?? run,
    longRunning: policy.longRunning, pollIntervalMs: policy.pollIntervalMs, poll: policy.poll,
  };
}

/** A tool's return value as the content Dex records. */
export function contentOf(v: unknown): string {
  if (typeof v === "string") return v;
  if (v === undefined) return "";
  return JSON.stringify(v);
}

/**
 * A framework's token count (or cost in micro-units) as a Dex usage count:
 * a whole number, 0 when the framework gives none. A count the wire cannot
 * carry (negative, not a number) is 0 too, rather than failing the model
 * call that has already been made and paid for.
 */
export function usageCount(v: unknown): number {
  return typeof v === "number" && Number.isFinite(v) && v > 0 ? Math.min(Math.round(v), Number.MAX_SAFE_INTEGER) : 0;
}
