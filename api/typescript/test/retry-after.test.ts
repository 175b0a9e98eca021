// A rate_limit failure's Retry-After: read from the response headers a
// provider SDK's error carries (retry-after-ms, then retry-after in seconds
// or as an HTTP date) or given on a ModelError, reported by the Worker as
// AttemptFailure.retryAfterMs; passed through by each adapter and given by
// the demo Worker's script ("retry_after_ms").
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { create } from "@bufbuild/protobuf";
import { APICallError } from "ai";
import { MockLanguageModelV3 } from "ai/test";
import { Agent, type Model } from "@openai/agents";
import type { SDKMessage } from "@anthropic-ai/claude-agent-sdk";
import OpenAI from "openai";
import Anthropic from "@anthropic-ai/sdk";
import { aiSdkAgent } from "../src/adapters/ai-sdk.js";
import { openaiAgentsAdapter } from "../src/adapters/openai-agents.js";
import { claudeAgentSdkAdapter } from "../src/adapters/claude-agent-sdk.js";
import {
  classifyError, ErrorType, HistoryEntrySchema, HistoryKind, maxRetryAfterMs, ModelError, newHttpModelError, retryAfterMsFromHeaders, retryAfterMsOf,
  type HistoryEntry, type ModelInput,
} from "../src/index.js";
import { demoAgent } from "../demo/adapters.js";
import { Ledger } from "../demo/ledger.js";
import { modelOutput, parseScript, retryAfterHelp, ScriptedModel } from "../demo/script.js";
import { DemoTools } from "../demo/tools.js";
import { runModelTasks } from "./fake.js";

const now = Date.UTC(2026, 11, 4, 10, 0, 0);
const h = (seq: number, kind: HistoryKind, text = ""): HistoryEntry => create(HistoryEntrySchema, { seq: BigInt(seq), kind, text });
const input = (history: HistoryEntry[]): ModelInput => ({
  sessionId: "s1", stepId: "st1", attempt: 1, history, tools: [], compact: false, epoch: 1n, agent: "", signal: new AbortController().signal,
});

/** A provider SDK's error as a fake: a status and the response headers, as the openai and @anthropic-ai/sdk packages expose them. */
function sdkError(status: number, headers: Headers | Record<string, unknown>, message = `${status} from the provider`): Error {
  return Object.assign(new Error(message), { status, headers });
}

/** What rejects p with, or a failure when it resolves. */
async function rejection(p: Promise<unknown>): Promise<unknown> {
  try {
    await p;
  } catch (e) {
    return e;
  }
  assert.fail("resolved; wanted a rejection");
}

describe("the Retry-After of response headers", () => {
  it("reads retry-after-ms, then retry-after in seconds (a fraction too) or as an HTTP date", () => {
    const cases: [string, Headers | Record<string, unknown>, number][] = [
      ["retry-after-ms", new Headers({ "retry-after-ms": "250" }), 250],
      ["retry-after-ms, a fraction rounded up", new Headers({ "retry-after-ms": "12.5" }), 13],
      ["retry-after-ms before retry-after", new Headers({ "retry-after-ms": "250", "retry-after": "1" }), 250],
      ["retry-after seconds", new Headers({ "retry-after": "20" }), 20_000],
      ["retry-after fractional seconds", new Headers({ "retry-after": "1.5" }), 1500],
      ["retry-after HTTP date, from now", new Headers({ "retry-after": new Date(now + 90_000).toUTCString() }), 90_000],
      ["a plain record, names in any case", { "Retry-After": "3" }, 3000],
      ["a plain record of retry-after-ms", { "retry-after-ms": "40" }, 40],
      ["a record value as a number", { "retry-after": 2 }, 2000],
      ["a record value as a list (Node's headers)", { "retry-after": ["4", "9"] }, 4000],
      ["spaces around", { "retry-after": " 5 " }, 5000],
    ];
    for (const [name, headers, want] of cases) assert.equal(retryAfterMsFromHeaders(headers, now), want, name);
  });

  it("ignores a bad header, a past date and no header, and caps a long one", () => {
    const cases: [string, Headers | Record<string, unknown> | undefined, number][] = [
      ["a bad retry-after-ms falls back to retry-after", new Headers({ "retry-after-ms": "soon", "retry-after": "2" }), 2000],
      ["a zero retry-after-ms falls back to retry-after", new Headers({ "retry-after-ms": "0", "retry-after": "2" }), 2000],
      ["not a number or date", new Headers({ "retry-after": "tomorrow" }), 0],
      ["negative", new Headers({ "retry-after": "-5" }), 0],
      ["NaN and Infinity", new Headers({ "retry-after-ms": "NaN", "retry-after": "Infinity" }), 0],
      ["hex", new Headers({ "retry-after": "0x10" }), 0],
      ["empty", new Headers({ "retry-after": "" }), 0],
      ["a date passed", new Headers({ "retry-after": new Date(now - 60_000).toUTCString() }), 0],
      ["no Retry-After", new Headers({ "content-type": "application/json" }), 0],
      ["no headers", undefined, 0],
      ["a record value of another type", { "retry-after": { seconds: 3 } }, 0],
      ["capped at 24 hours", new Headers({ "retry-after": "1e12" }), maxRetryAfterMs],
    ];
    for (const [name, headers, want] of cases) assert.equal(retryAfterMsFromHeaders(headers, now), want, name);
  });
});

describe("the Retry-After of a model handler's error", () => {
  it("is read from the openai and @anthropic-ai/sdk packages' errors, the AI SDK's APICallError and fakes of them", () => {
    const openaiErr = new OpenAI.RateLimitError(429, { message: "slow down" }, "slow down", new Headers({ "retry-after-ms": "1500" }));
    const anthropicErr = new Anthropic.RateLimitError(429, { type: "error" }, "slow down", new Headers({ "retry-after": "7" }));
    const aiSdkErr = new APICallError({ message: "slow down", url: "u", requestBodyValues: {}, statusCode: 429, responseHeaders: { "retry-after": "2.25" } });
    const cases: [string, unknown, number][] = [
      ["openai", openaiErr, 1500],
      ["@anthropic-ai/sdk", anthropicErr, 7000],
      ["the AI SDK's APICallError", aiSdkErr, 2250],
      ["a fake with Headers", sdkError(429, new Headers({ "retry-after": "3" })), 3000],
      ["a fake with a plain record", sdkError(429, { "retry-after-ms": "800" }), 800],
      ["a fetch-style response", Object.assign(new Error("429"), { status: 429, response: { headers: new Headers({ "retry-after": "1" }) } }), 1000],
      ["a cause's", new Error("the call failed", { cause: sdkError(429, { "retry-after": "6" }) }), 6000],
      ["a ModelError's own", new ModelError(ErrorType.RATE_LIMIT, "slow", { retryAfterMs: 1234 }), 1234],
      ["a ModelError's cause's", new ModelError(ErrorType.RATE_LIMIT, "slow", { cause: openaiErr }), 1500],
      ["a ModelError's own before its cause's", new ModelError(ErrorType.RATE_LIMIT, "slow", { retryAfterMs: 10, cause: openaiErr }), 10],
      ["a bad header", sdkError(429, { "retry-after": "later" }), 0],
      ["none", sdkError(429, new Headers()), 0],
      ["a plain error", new Error("boom"), 0],
      ["not an error", "boom", 0],
      ["undefined", undefined, 0],
    ];
    for (const [name, err, want] of cases) assert.equal(retryAfterMsOf(err, now), want, name);
    assert.equal(classifyError(openaiErr), ErrorType.RATE_LIMIT);
    assert.equal(classifyError(anthropicErr), ErrorType.RATE_LIMIT);
  });

  it("is given to a ModelError in whole milliseconds, rounded up; anything but a number above 0 is none", () => {
    const ms = (v: unknown) => new ModelError(ErrorType.RATE_LIMIT, "x", { retryAfterMs: v as number }).retryAfterMs;
    assert.equal(ms(1500), 1500);
    assert.equal(ms(0.2), 1);
    assert.equal(ms(undefined), 0);
    assert.equal(ms(-5), 0);
    assert.equal(ms(Number.NaN), 0);
    assert.equal(ms("100"), 0);
    assert.equal(ms(Number.POSITIVE_INFINITY), maxRetryAfterMs);
    assert.equal(new ModelError(ErrorType.RATE_LIMIT).retryAfterMs, 0);
    const cause = new Error("the provider's");
    assert.equal(new ModelError(ErrorType.RATE_LIMIT, "x", { cause }).cause, cause);
  });

  it("comes with newHttpModelError's rate_limit, given the answer's headers, and with no other type", () => {
    const limited = newHttpModelError(429, "slow down", new Headers({ "retry-after": "30" }));
    assert.equal(limited.type, ErrorType.RATE_LIMIT);
    assert.equal(limited.retryAfterMs, 30_000);
    assert.equal(newHttpModelError(429, "slow down", { "retry-after-ms": "50" }).retryAfterMs, 50);
    assert.equal(newHttpModelError(429, "slow down").retryAfterMs, 0);
    const busy = newHttpModelError(503, "service unavailable", new Headers({ "retry-after": "30" }));
    assert.equal(busy.type, ErrorType.SERVER_ERROR);
    assert.equal(busy.retryAfterMs, 0);
  });
});

describe("the Worker's failure report", () => {
  it("carries a rate_limit's Retry-After as retryAfterMs, and none for any other type", async () => {
    const throws: Record<string, unknown> = {
      "openai": new OpenAI.RateLimitError(429, { message: "slow down" }, "slow down", new Headers({ "retry-after": "2" })),
      "record": sdkError(429, { "retry-after-ms": "1500" }),
      "model-error": new ModelError(ErrorType.RATE_LIMIT, "slow down", { retryAfterMs: 700 }),
      "typed-by-hand": new ModelError(ErrorType.RATE_LIMIT, "slow down", { cause: sdkError(429, { "retry-after": "4" }) }),
      "bad-header": sdkError(429, { "retry-after": "whenever" }),
      "server-error": sdkError(503, { "retry-after": "5" }),
      "overloaded": new ModelError(ErrorType.OVERLOADED, "busy", { retryAfterMs: 900 }),
    };
    const got = await runModelTasks({ run: (i) => { throw throws[i.stepId]; } }, Object.keys(throws));
    const f = (step: string) => {
      const failure = got.get(step)?.failure;
      assert.ok(failure, `${step} failed`);
      return [failure.errorType, failure.retryAfterMs];
    };
    assert.deepEqual(f("openai"), [ErrorType.RATE_LIMIT, 2000n]);
    assert.deepEqual(f("record"), [ErrorType.RATE_LIMIT, 1500n]);
    assert.deepEqual(f("model-error"), [ErrorType.RATE_LIMIT, 700n]);
    assert.deepEqual(f("typed-by-hand"), [ErrorType.RATE_LIMIT, 4000n]);
    assert.deepEqual(f("bad-header"), [ErrorType.RATE_LIMIT, 0n]);
    assert.deepEqual(f("server-error"), [ErrorType.SERVER_ERROR, 0n]);
    assert.deepEqual(f("overloaded"), [ErrorType.OVERLOADED, 0n]);
    assert.equal(got.get("model-error")!.failure!.error, "slow down");
  });
});

describe("the adapters pass a rate_limit's Retry-After through", () => {
  it("the AI SDK: an APICallError's response headers", async () => {
    const failing = (statusCode: number, responseHeaders: Record<string, string>) => aiSdkAgent({
      model: new MockLanguageModelV3({
        doGenerate: async () => {
          throw new APICallError({ message: `${statusCode}`, url: "https://provider.test/v1", requestBodyValues: {}, statusCode, responseHeaders });
        },
      }),
    });
    const limited = await rejection(failing(429, { "retry-after": "3" }).model.run(input([h(1, HistoryKind.USER, "hi")])));
    assert.ok(limited instanceof ModelError);
    assert.deepEqual([limited.type, limited.retryAfterMs], [ErrorType.RATE_LIMIT, 3000]);
    const ms = await rejection(failing(429, { "retry-after-ms": "450" }).model.compact(input([h(1, HistoryKind.USER, "hi")])));
    assert.deepEqual([(ms as ModelError).type, (ms as ModelError).retryAfterMs], [ErrorType.RATE_LIMIT, 450]);
    const down = await rejection(failing(500, { "retry-after": "3" }).model.run(input([h(1, HistoryKind.USER, "hi")])));
    assert.deepEqual([(down as ModelError).type, (down as ModelError).retryAfterMs], [ErrorType.SERVER_ERROR, 0]);
  });

  it("the OpenAI Agents SDK: the openai package's error leaves the run as it is, and the Worker reports its Retry-After", async () => {
    const model: Model = {
      getResponse: async () => {
        throw new OpenAI.RateLimitError(429, { message: "slow down" }, "429 slow down", new Headers({ "retry-after-ms": "1200" }));
      },
      getStreamedResponse: () => {
        throw new Error("no streaming");
      },
    };
    const a = openaiAgentsAdapter({ agent: new Agent({ name: "t", instructions: "", model }) });
    const err = await rejection(a.model.run(input([h(1, HistoryKind.USER, "hi")])));
    assert.equal(classifyError(err), ErrorType.RATE_LIMIT);
    assert.equal(retryAfterMsOf(err), 1200);
    const got = await runModelTasks(a.model, ["step-1"]);
    assert.deepEqual([got.get("step-1")!.failure!.errorType, got.get("step-1")!.failure!.retryAfterMs], [ErrorType.RATE_LIMIT, 1200n]);
  });

  describe("the Claude Agent SDK: when a rejected rate_limit_event says the limit lifts", () => {
    const assistantError = (error: string) =>
      ({ type: "assistant", message: { role: "assistant", model: "<synthetic>", content: [] }, parent_tool_use_id: null, error }) as unknown as SDKMessage;
    const rateLimitEvent = (status: string, resetsAt?: number) => ({ type: "rate_limit_event", rate_limit_info: { status, resetsAt } }) as unknown as SDKMessage;
    const runWith = (...messages: SDKMessage[]) => claudeAgentSdkAdapter({
      query: async function* () {
        yield* messages;
      },
    }).model.run(input([h(1, HistoryKind.USER, "go")]));

    it("reads resetsAt in seconds (or milliseconds) from now", async () => {
      for (const resetsAt of [Math.floor(Date.now() / 1000) + 120, Date.now() + 120_000]) {
        const err = await rejection(runWith(rateLimitEvent("rejected", resetsAt), assistantError("rate_limit")));
        assert.ok(err instanceof ModelError);
        assert.equal(err.type, ErrorType.RATE_LIMIT);
        assert.ok(err.retryAfterMs > 110_000 && err.retryAfterMs <= 120_000, `Retry-After ${err.retryAfterMs} ms, want about 2 minutes`);
      }
    });

    it("gives none without such an event, after an allowed one, or for another error", async () => {
      const soon = Math.floor(Date.now() / 1000) + 120;
      const cases: [string, SDKMessage[], ErrorType][] = [
        ["no event", [assistantError("rate_limit")], ErrorType.RATE_LIMIT],
        ["allowed again", [rateLimitEvent("rejected", soon), rateLimitEvent("allowed", soon), assistantError("rate_limit")], ErrorType.RATE_LIMIT],
        ["no reset time", [rateLimitEvent("rejected"), assistantError("rate_limit")], ErrorType.RATE_LIMIT],
        ["overloaded", [rateLimitEvent("rejected", soon), assistantError("overloaded")], ErrorType.OVERLOADED],
      ];
      for (const [name, messages, type] of cases) {
        const err = await rejection(runWith(...messages));
        assert.ok(err instanceof ModelError, name);
        assert.deepEqual([err.type, err.retryAfterMs], [type, 0], name);
      }
    });
  });
});

const script = JSON.stringify({
  turns: [
    { match: "hi", outputs: [{ error: { type: "rate_limit", message: "slow down", retry_after_ms: 1500 } }, { text: "ok" }] },
    { match: "plain", outputs: [{ error: { type: "rate_limit" } }] },
  ],
});

describe("the demo Worker's script", () => {
  it("gives a rate_limit error's \"retry_after_ms\" as the error's Retry-After", () => {
    const s = parseScript(script);
    const first = modelOutput(s, [h(1, HistoryKind.USER, "hi")], 1).err;
    assert.ok(first instanceof ModelError);
    assert.deepEqual([first.type, first.message, first.retryAfterMs], [ErrorType.RATE_LIMIT, "slow down", 1500]);
    assert.equal(modelOutput(s, [h(1, HistoryKind.USER, "hi")], 2).out!.text, "ok");
    assert.equal(modelOutput(s, [h(1, HistoryKind.USER, "plain")], 1).err!.retryAfterMs, 0);
    assert.ok(parseScript('{"turns":[{"match":"x","outputs":[{"error":{"type":"rate_limit","retry_after_ms":0}}]}]}'));
  });

  it("refuses a bad retry_after_ms as cmd/dexworker does", () => {
    const bad = (error: string) => () => parseScript(`{"turns":[{"match":"x","outputs":[{"error":${error}}]}]}`);
    assert.throws(bad('{"type":"server_error","retry_after_ms":100}'), /retry_after_ms is for a rate_limit error, not "server_error"/);
    assert.throws(bad('{"type":"rate_limit","retry_after_ms":-1}'), /negative retry_after_ms/);
    assert.throws(bad('{"type":"rate_limit","retry_after_ms":1.5}'), /field retry_after_ms wants a whole number of ms, not 1.5/);
    assert.throws(bad('{"type":"rate_limit","retry_after_ms":"1500"}'), /field retry_after_ms wants a number, not a string/);
    assert.throws(bad('{"type":"rate_limit","retry_after":1500}'), /unknown field "retry_after"/);
  });

  it("says so in its help, in cmd/dexworker's words", () => {
    assert.match(retryAfterHelp.replace(/\s+/g, " "),
      /A script's rate_limit error may give "retry_after_ms": N, reported as the provider's Retry-After: the cluster holds the session's provider that long\./);
  });

  it("reports it with the failure", async () => {
    const dir = mkdtempSync(join(tmpdir(), "retry-after-"));
    const ledger = new Ledger(join(dir, "l.jsonl"));
    try {
      const m = new ScriptedModel(parseScript(script), ledger, "w", undefined);
      // The fake node's task history is one user message "hi".
      const got = await runModelTasks({ run: m.run, compact: m.compact }, ["step-1"]);
      const f = got.get("step-1")!.failure!;
      assert.deepEqual([f.errorType, f.error, f.retryAfterMs], [ErrorType.RATE_LIMIT, "slow down", 1500n]);
    } finally {
      ledger.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  for (const name of ["ai-sdk", "openai-agents", "claude-agent-sdk"]) {
    it(`reports it through --adapter ${name} too`, async () => {
      const dir = mkdtempSync(join(tmpdir(), "retry-after-"));
      const ledger = new Ledger(join(dir, "l.jsonl"));
      try {
        const a = await demoAgent(name, parseScript(script), ledger, "w", new DemoTools(ledger, "w"));
        const got = await runModelTasks(a.model, ["step-1"]);
        const f = got.get("step-1")!.failure!;
        assert.deepEqual([f.errorType, f.retryAfterMs], [ErrorType.RATE_LIMIT, 1500n]);
      } finally {
        ledger.close();
        rmSync(dir, { recursive: true, force: true });
      }
    });
  }
});
