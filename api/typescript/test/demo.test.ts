import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { create } from "@bufbuild/protobuf";
import { classifyError, ErrorType, HistoryEntrySchema, HistoryKind, ModelError, newHttpModelError, type HistoryEntry } from "../src/index.js";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseDuration, splitList } from "../demo/flags.js";
import { Ledger, rfc3339Nano } from "../demo/ledger.js";
import { modelOutput, parseScript } from "../demo/script.js";
import { calculate, goFloat } from "../demo/tools.js";

const h = (seq: number, kind: HistoryKind, text = ""): HistoryEntry => create(HistoryEntrySchema, { seq: BigInt(seq), kind, text });

describe("the scripted model", () => {
  it("answers the demo turn with dexworker's outputs and call ids", () => {
    const first = modelOutput(undefined, [h(1, HistoryKind.USER, 'say "hi" <now>')], 1).out!;
    assert.deepEqual(first.toolCalls!.map((c) => [c.callId, c.tool, c.arguments]), [
      ["call-1-1", "lookup", '{"query":"say \\"hi\\" \\u003cnow\\u003e"}'],
      ["call-1-2", "save_note", '{"note":"say \\"hi\\" \\u003cnow\\u003e"}'],
      ["call-1-3", "send_email", '{"to":"ops@example.com","body":"say \\"hi\\" \\u003cnow\\u003e"}'],
    ]);
    const second = modelOutput(undefined, [h(1, HistoryKind.USER, "x"), h(2, HistoryKind.ASSISTANT), h(5, HistoryKind.TOOL_RESULT)], 1).out!;
    assert.equal(second.text, "Done: looked it up, saved a note and sent the email.");
    assert.equal(second.toolCalls!.length, 0);
  });

  it("consumes error outputs by attempt, as the Go Worker does", () => {
    const s = parseScript(JSON.stringify({ turns: [{ match: "flaky", prefix: true, outputs: [
      { error: { type: "rate_limit", message: "slow down" } }, { text: "ok {{message}}" },
    ] }] }));
    const hist = [h(3, HistoryKind.USER, "flaky one")];
    const a1 = modelOutput(s, hist, 1);
    assert.ok(a1.err instanceof ModelError);
    assert.equal(a1.err.type, ErrorType.RATE_LIMIT);
    assert.equal(modelOutput(s, hist, 2).out!.text, "ok flaky one");
    assert.equal(modelOutput(s, [...hist, h(4, HistoryKind.ASSISTANT)], 1).out!.text, "done");
  });

  it("refuses a bad script with the reason", () => {
    assert.throws(() => parseScript('{"turns":[{"match":"x","outputs":[{}]}]}'), /has no text, tool call or error/);
    assert.throws(() => parseScript('{"turns":[{"match":"x","outputs":[{"error":{"type":"bogus"}}]}]}'), /unknown error type "bogus"/);
    assert.throws(() => parseScript('{"turnz":[]}'), /unknown field "turnz"/);
    assert.throws(() => parseScript('{"turns":[{"match":"x","outputs":[{"inline":[{"tool":"lookup"}]}]}]}'), /not an inline tool/);
  });
});

describe("the demo's formats", () => {
  it("reads Go durations", () => {
    assert.equal(parseDuration("200ms"), 200);
    assert.equal(parseDuration("1m30s"), 90_000);
    assert.equal(parseDuration("1.5s"), 1500);
    assert.equal(parseDuration("0"), 0);
    assert.throws(() => parseDuration("5"), /invalid duration/);
  });
  it("formats numbers and times as Go does", () => {
    assert.equal(calculate('{"a":2,"b":2}').content, "4");
    assert.equal(calculate('{"a":0.1,"b":0.2}').content, "0.30000000000000004");
    assert.equal(goFloat(1e6), "1e+06");
    assert.equal(calculate('{"a":1,"b":2,"op":"/"}').content, 'calc: unknown op "/"');
    assert.equal(rfc3339Nano(new Date("2026-11-30T07:05:26.120Z")), "2026-11-30T07:05:26.12Z");
    assert.equal(rfc3339Nano(new Date("2026-11-30T07:05:26.000Z")), "2026-11-30T07:05:26Z");
  });
});

describe("error classification", () => {
  it("types a provider's errors as the Go library does", () => {
    assert.equal(newHttpModelError(429, "slow").type, ErrorType.RATE_LIMIT);
    assert.equal(newHttpModelError(400, "prompt is too long").type, ErrorType.CONTEXT_LENGTH);
    assert.equal(newHttpModelError(503, "Overloaded").type, ErrorType.OVERLOADED);
    assert.equal(classifyError(Object.assign(new Error("bad gateway"), { status: 502 })), ErrorType.SERVER_ERROR);
    assert.equal(classifyError(new DOMException("timed out", "TimeoutError")), ErrorType.TIMEOUT);
    assert.equal(classifyError(new TypeError("fetch failed", { cause: Object.assign(new Error("x"), { code: "ECONNREFUSED" }) })), ErrorType.NETWORK);
    assert.equal(classifyError(new Error("?")), ErrorType.UNKNOWN);
    assert.equal(classifyError(undefined), ErrorType.UNSPECIFIED);
  });
});

describe("the demo's ledger", () => {
  it("writes epoch and agent as dexworker does, left out when zero or empty", () => {
    const dir = mkdtempSync(join(tmpdir(), "ledger-"));
    try {
      const l = new Ledger(join(dir, "l.jsonl"), 42, () => new Date("2026-11-30T07:05:26.120Z"));
      l.append({ session: "s1", tool: "model", attempt: 1, step: "st", kind: "model", worker: "w", epoch: 3n, agent: "support@v2" });
      l.append({ session: "s1", call_id: "c1", tool: "lookup", attempt: 2, step: "st2", kind: "tool", worker: "w", epoch: 0n, agent: "" });
      l.close();
      const lines = readFileSync(join(dir, "l.jsonl"), "utf8").trim().split("\n");
      assert.equal(lines[0], '{"session":"s1","call_id":"","tool":"model","attempt":1,"idempotency_key":"","pid":42,' +
        '"time":"2026-11-30T07:05:26.12Z","step":"st","kind":"model","worker":"w","epoch":3,"agent":"support@v2"}');
      assert.equal(lines[1], '{"session":"s1","call_id":"c1","tool":"lookup","attempt":2,"idempotency_key":"","pid":42,' +
        '"time":"2026-11-30T07:05:26.12Z","step":"st2","kind":"tool","worker":"w"}');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
  it("reads --agent and --tool-agents lists as dexworker does", () => {
    assert.deepEqual(splitList(" a@v1, ,b "), ["a@v1", "b"]);
    assert.deepEqual(splitList(""), []);
  });
});
