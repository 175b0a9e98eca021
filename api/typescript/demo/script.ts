import { existsSync, readFileSync } from "node:fs";
import { ErrorType, HistoryKind, ModelError, type HistoryEntry, type ModelInput, type ModelOutputInit, type UsageInit } from "../src/index.js";
import type { Ledger } from "./ledger.js";

// The scripted, deterministic model of cmd/dexworker/script.go: the same
// script format, the same outputs and call ids for the same history.

export interface ScriptCall {
  tool: string;
  /** Any JSON value; "{{message}}" inside strings becomes the user message. */
  arguments?: unknown;
  call_id?: string;
}
export interface ScriptError {
  type: string;
  message?: string;
  /** A rate_limit error's Retry-After, as a provider's header would give it (0: none). */
  retry_after_ms?: number;
}
/** A scripted model call's usage; a field left out is 0. */
export interface ScriptUsage {
  input_tokens?: number;
  output_tokens?: number;
  cost_micros?: number;
}
export interface Output {
  text?: string;
  tool_calls?: ScriptCall[];
  inline?: ScriptCall[];
  error?: ScriptError;
  always?: boolean;
  delay_ms?: number;
  while_file?: string;
  /** What the call reports it used (default: demoUsage). */
  usage?: ScriptUsage | null;
}
export interface ScriptTurn {
  match: string;
  prefix?: boolean;
  outputs: Output[];
}
export interface Script {
  turns?: ScriptTurn[];
  default?: Output[];
  compact?: Output[];
}

export const errorTypes: Record<string, ErrorType> = {
  "": ErrorType.UNSPECIFIED,
  none: ErrorType.UNSPECIFIED,
  invalid_request: ErrorType.INVALID_REQUEST,
  context_length: ErrorType.CONTEXT_LENGTH,
  rate_limit: ErrorType.RATE_LIMIT,
  overloaded: ErrorType.OVERLOADED,
  server_error: ErrorType.SERVER_ERROR,
  timeout: ErrorType.TIMEOUT,
  network: ErrorType.NETWORK,
  unknown: ErrorType.UNKNOWN,
};

/**
 * What every scripted model call reports it used, unless its output gives
 * "usage" (cmd/dexworker's DemoUsage): fixed figures, so that budgets can be tried.
 */
export const demoUsage: Readonly<Required<ScriptUsage>> = { input_tokens: 100, output_tokens: 20, cost_micros: 150 };
/** The model name the scripted model reports. */
export const demoModelName = "dex-demo";

/** What the demo Worker's help says of its usage. */
export const usageHelp = `Each scripted model call reports a fixed usage (${demoUsage.input_tokens} input and ${demoUsage.output_tokens} output
tokens, cost ${demoUsage.cost_micros} micro-units, model "${demoModelName}") unless its script output
gives "usage", so that budgets (dexctl session budget) can be tried. Through
--adapter the usage goes through the framework's answer and back; where the
framework carries no cost (ai-sdk, openai-agents) the demo adds the script's.
`;

/** An output's usage, with the demo model's name. */
export function usageOf(o: Output): UsageInit {
  const u = o.usage ?? demoUsage;
  return { inputTokens: u.input_tokens ?? 0, outputTokens: u.output_tokens ?? 0, costMicros: u.cost_micros ?? 0, model: demoModelName };
}

/** What the demo Worker's help says of a scripted Retry-After (cmd/dexworker's words). */
export const retryAfterHelp = `A script's rate_limit error may give "retry_after_ms": N, reported as the
provider's Retry-After: the cluster holds the session's provider that long.
`;

/** The tools a script may call inline. */
export const inlineTools = new Set(["calc"]);

function fields(where: string, v: unknown, known: Record<string, string>): Record<string, unknown> {
  if (typeof v !== "object" || v === null || Array.isArray(v)) throw new Error(`script: ${where}: want a JSON object`);
  const o = v as Record<string, unknown>;
  for (const [k, val] of Object.entries(o)) {
    const want = known[k];
    if (want === undefined) throw new Error(`script: json: unknown field ${JSON.stringify(k)}`);
    const got = Array.isArray(val) ? "array" : val === null ? "null" : typeof val;
    if (want !== "any" && val !== null && got !== want) throw new Error(`script: ${where}: field ${k} wants a ${want}, not a ${got}`);
  }
  return o;
}

function checkOutputs(where: string, outs: unknown, model: boolean): Output[] {
  if (outs === undefined || outs === null) return [];
  if (!Array.isArray(outs)) throw new Error(`script: ${where}: want a list of outputs`);
  outs.forEach((raw, i) => {
    const at = `${where} output ${i + 1}`;
    fields(at, raw, {
      text: "string", tool_calls: "array", inline: "array", error: "object", always: "boolean", delay_ms: "number", while_file: "string", usage: "object",
    });
    const o = raw as Output;
    if (o.usage) {
      const u = fields(`${at} usage`, o.usage, { input_tokens: "number", output_tokens: "number", cost_micros: "number" });
      for (const [k, v] of Object.entries(u)) {
        if (v !== null && !(Number.isSafeInteger(v) && (v as number) >= 0)) throw new Error(`script: ${at} usage: field ${k} wants a whole number from 0, not ${v}`);
      }
    }
    o.tool_calls?.forEach((c, j) => fields(`${at} tool call ${j + 1}`, c, { tool: "string", arguments: "any", call_id: "string" }));
    o.inline?.forEach((c, j) => fields(`${at} inline call ${j + 1}`, c, { tool: "string", arguments: "any", call_id: "string" }));
    if (o.error) fields(`${at} error`, o.error, { type: "string", message: "string", retry_after_ms: "number" });
    const answers = !!o.text || (o.tool_calls?.length ?? 0) > 0 || (o.inline?.length ?? 0) > 0;
    if (!o.error && !answers) throw new Error(`script: ${at} has no text, tool call or error`);
    if (o.error && answers) throw new Error(`script: ${at} has an error and an answer`);
    if (o.error) checkError(at, o.error);
    if (!model && ((o.tool_calls?.length ?? 0) > 0 || (o.inline?.length ?? 0) > 0)) throw new Error(`script: ${at}: a compaction calls no tool`);
    if ((o.delay_ms ?? 0) < 0) throw new Error(`script: ${at}: negative delay_ms`);
    o.tool_calls?.forEach((c, j) => {
      if (!c.tool) throw new Error(`script: ${at} tool call ${j + 1} names no tool`);
    });
    o.inline?.forEach((c, j) => {
      if (!inlineTools.has(c.tool)) throw new Error(`script: ${at} inline call ${j + 1}: ${JSON.stringify(c.tool ?? "")} is not an inline tool (known: calc)`);
    });
  });
  return outs as Output[];
}

/** Checks an output's error: a known type, and a Retry-After only on a rate_limit, a whole number of ms from 0 (cmd/dexworker's checkError). */
function checkError(at: string, e: ScriptError): void {
  if (!((e.type ?? "") in errorTypes)) throw new Error(`script: ${at}: unknown error type ${JSON.stringify(e.type)}`);
  const ms = e.retry_after_ms ?? 0;
  if (!Number.isSafeInteger(ms)) throw new Error(`script: ${at} error: field retry_after_ms wants a whole number of ms, not ${ms}`);
  if (ms < 0) throw new Error(`script: ${at}: negative retry_after_ms`);
  if (ms > 0 && e.type !== "rate_limit") throw new Error(`script: ${at}: retry_after_ms is for a rate_limit error, not ${JSON.stringify(e.type)}`);
}

/** Parses and checks a script. */
export function parseScript(text: string): Script {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch (e) {
    throw new Error(`script: ${(e as Error).message}`);
  }
  const s = fields("the script", v, { turns: "array", default: "array", compact: "array" }) as Script;
  (s.turns ?? []).forEach((t, i) => {
    fields(`turn ${i + 1}`, t, { match: "string", prefix: "boolean", outputs: "array" });
    const where = `turn ${i + 1} (${JSON.stringify(t.match ?? "")})`;
    if (!t.outputs || t.outputs.length === 0) throw new Error(`script: ${where} has no outputs`);
    checkOutputs(where, t.outputs, true);
  });
  checkOutputs("default", s.default, true);
  checkOutputs("compact", s.compact, false);
  return s;
}

export function loadScript(path: string): Script {
  return parseScript(readFileSync(path, "utf8"));
}

/** The model with no script: call lookup, save_note and send_email in one output, then answer. */
const demoOutputs: Output[] = [
  {
    tool_calls: [
      { tool: "lookup", arguments: { query: "{{message}}" } },
      { tool: "save_note", arguments: { note: "{{message}}" } },
      { tool: "send_email", arguments: { to: "ops@example.com", body: "{{message}}" } },
    ],
  },
  { text: "Done: looked it up, saved a note and sent the email." },
];

/** Answers a turn whose outputs ran out. */
const finalText = "done";

function outputsFor(s: Script | undefined, msgs: string[]): Output[] {
  if (s) {
    for (const t of s.turns ?? []) {
      for (const m of msgs) {
        if (m === t.match || (t.prefix && m.startsWith(t.match))) return t.outputs;
      }
    }
    if ((s.default ?? []).length > 0) return s.default!;
  }
  return demoOutputs;
}

/** Leaves out the outputs whose while_file is missing. */
function active(outs: Output[]): Output[] {
  return outs.filter((o) => !o.while_file || existsSync(o.while_file));
}

/**
 * The output index of a RunModel: each of the n0 outputs the turn already
 * committed took one answer and the error outputs before it; then each
 * earlier attempt of this Step took one error output.
 */
export function pick(outs: Output[], n0: number, attempt: number): number {
  let idx = 0;
  for (let k = 0; k < n0; k++) {
    while (idx < outs.length && outs[idx].error && !outs[idx].always) idx++;
    idx++;
  }
  for (let a = 1; a < attempt; a++) {
    const o = at(outs, idx);
    if (o.error && !o.always) idx++;
  }
  return idx;
}

/** Output idx, honouring always; past the end the turn answers text. */
export function at(outs: Output[], idx: number): Output {
  for (let i = 0; i < outs.length && i <= idx; i++) {
    if (outs[i].always) return outs[i];
  }
  return idx < outs.length ? outs[idx] : { text: finalText };
}

/** The turn in progress: its user messages, the outputs it already committed, and the seq of the last entry. */
export function turnOf(h: HistoryEntry[]): { msgs: string[]; outputs: number; lastSeq: bigint } {
  let last = -1;
  for (let i = h.length - 1; i >= 0; i--) {
    if (h[i].kind === HistoryKind.USER) {
      last = i;
      break;
    }
  }
  const lastSeq = h.length > 0 ? h[h.length - 1].seq : 0n;
  let outputs = 0;
  if (last < 0) {
    // No user message left after the summary (an operator's edit): the
    // summary stands for the turn's messages.
    for (let i = h.length - 1; i >= 0; i--) {
      if (h[i].kind === HistoryKind.SUMMARY) {
        for (const e of h.slice(i + 1)) if (e.kind === HistoryKind.ASSISTANT) outputs++;
        return { msgs: [h[i].text], outputs, lastSeq };
      }
    }
    return { msgs: [], outputs: 0, lastSeq };
  }
  const msgs: string[] = [];
  for (let i = last; i >= 0 && h[i].kind === HistoryKind.USER; i--) msgs.unshift(h[i].text);
  for (const e of h.slice(last + 1)) if (e.kind === HistoryKind.ASSISTANT) outputs++;
  return { msgs, outputs, lastSeq };
}

/** A string JSON-escaped as Go's encoding/json does (HTML characters too), without the quotes. */
export function goEscape(s: string): string {
  return JSON.stringify(s).slice(1, -1).replace(/</g, "\\u003c").replace(/>/g, "\\u003e").replace(/&/g, "\\u0026")
    .replace(/\u2028/g, "\\u2028").replace(/\u2029/g, "\\u2029");
}

/** A call's arguments as compact JSON ("{}" when none) with {{message}} replaced. */
function compactArgs(raw: unknown, escapedMsg: string): string {
  const args = raw === undefined || raw === null ? "{}" : JSON.stringify(raw);
  return args.replaceAll("{{message}}", escapedMsg);
}

/** A scripted error as the model handler throws it; a rate_limit's retry_after_ms is the failure's Retry-After. */
export function scriptError(e: ScriptError): ModelError {
  return new ModelError(errorTypes[e.type ?? ""], e.message || `scripted ${e.type} error`, { retryAfterMs: e.retry_after_ms ?? 0 });
}

/** What one RunModel answers: the output picked and the model output, or the scripted error. */
export function modelOutput(script: Script | undefined, history: HistoryEntry[], attempt: number): { o: Output; out?: ModelOutputInit; err?: ModelError } {
  const { msgs, outputs: n0, lastSeq } = turnOf(history);
  const outs = active(outputsFor(script, msgs));
  const o = at(outs, pick(outs, n0, attempt));
  if (o.error) return { o, err: scriptError(o.error) };
  const msg = msgs.length > 0 ? msgs[msgs.length - 1] : "";
  const escaped = goEscape(msg);
  const out: ModelOutputInit = { text: (o.text ?? "").replaceAll("{{message}}", msg), toolCalls: [], inlineResults: [], usage: usageOf(o) };
  (o.tool_calls ?? []).forEach((c, i) => {
    out.toolCalls!.push({ callId: c.call_id || `call-${lastSeq}-${i + 1}`, tool: c.tool, arguments: compactArgs(c.arguments, escaped) });
  });
  (o.inline ?? []).forEach((c, i) => {
    out.inlineResults!.push({ callId: c.call_id || `inline-${lastSeq}-${i + 1}`, tool: c.tool, arguments: compactArgs(c.arguments, escaped) });
  });
  return { o, out };
}

/** Waits ms or until signal aborts (rejecting with its reason). */
export function wait(ms: number | undefined, signal: AbortSignal): Promise<void> {
  if (!ms || ms <= 0) return Promise.resolve();
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason ?? new Error("cancelled"));
    const t = setTimeout(() => {
      signal.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(t);
      reject(signal.reason ?? new Error("cancelled"));
    };
    signal.addEventListener("abort", onAbort, { once: true });
  });
}

/** How --stream streams a model output's text: delta bytes every everyMs (cmd/dexworker's streamDelta, streamEvery). */
export interface StreamPace {
  delta: number;
  everyMs: number;
}

/** The pace of the demo Worker's --stream: 8 bytes every 10 ms. */
export const demoStream: StreamPace = { delta: 8, everyMs: 10 };

/**
 * Streams text in deltas of pace.delta bytes (a delta ends on a character's
 * end), one every pace.everyMs, as a model writes it.
 */
export async function streamText(input: ModelInput, text: string, pace: StreamPace): Promise<void> {
  let rest = Buffer.from(text, "utf8");
  while (rest.length > 0) {
    let n = Math.min(pace.delta, rest.length);
    while (n < rest.length && (rest[n] & 0xc0) === 0x80) n++;
    input.stream?.(rest.subarray(0, n).toString("utf8"));
    rest = rest.subarray(n);
    await wait(pace.everyMs, input.signal);
  }
}

export type InlineRunner = (input: ModelInput, calls: NonNullable<ModelOutputInit["inlineResults"]>) => Promise<void>;

/** The scripted model: its answer depends only on the history it is sent and the attempt number. */
export class ScriptedModel {
  constructor(private readonly script: Script | undefined, private readonly ledger: Ledger, private readonly worker: string,
    private readonly inline: InlineRunner | undefined, private readonly stream?: StreamPace) {}

  private record(kind: string, input: ModelInput): void {
    this.ledger.append({
      session: input.sessionId, tool: kind, attempt: input.attempt, step: input.stepId, kind, worker: this.worker, epoch: input.epoch, agent: input.agent,
    });
  }

  run = async (input: ModelInput): Promise<ModelOutputInit> => {
    this.record("model", input);
    const { o, out, err } = modelOutput(this.script, input.history, input.attempt);
    await wait(o.delay_ms, input.signal);
    if (err) throw err;
    if (this.stream) await streamText(input, out!.text ?? "", this.stream);
    if ((out!.inlineResults?.length ?? 0) > 0) {
      if (!this.inline) throw new Error("inline calls but no inline tool runner");
      // Inline tools run inside this RunModel attempt: a rerun runs them again.
      await this.inline(input, out!.inlineResults!);
    }
    return out!;
  };

  compact = async (input: ModelInput): Promise<string> => {
    this.record("compact", input);
    const summary = `Summary of ${input.history.length} entries.`;
    const c = this.script?.compact ?? [];
    if (c.length === 0) return summary;
    const o = at(c, input.attempt - 1);
    await wait(o.delay_ms, input.signal);
    if (o.error) throw scriptError(o.error);
    if (!o.text || (input.attempt > c.length && !o.always)) return summary;
    const { msgs } = turnOf(input.history);
    return o.text.replaceAll("{{message}}", msgs.length > 0 ? msgs[msgs.length - 1] : "");
  };
}
