// The execution ledger ($DEX_LEDGER, docs/ledger.md) that cannot be used;
// its lines against a real dexd are in e2e/ledger.test.ts.
import { afterEach, describe, it } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { create } from "@bufbuild/protobuf";
import { TaskHandler, TaskRunner, TaskSchema } from "../gen/dex/v1/workers_pb.js";
import { dial, HistoryKind, LedgerEnv, sideEffect, StepKind, Worker, type WorkerOptions } from "../src/index.js";

// A model that calls a write tool, which reports its side effect.
function options(): WorkerOptions {
  return {
    id: "ts-ledger",
    tools: [{
      name: "save_note", access: "idempotent_write", run: (call) => {
        sideEffect(call, "notes.insert", call.idempotencyKey);
        return { content: "saved" };
      },
    }],
    model: {
      run: (input) => input.history.some((h) => h.kind === HistoryKind.TOOL_RESULT)
        ? { text: "done" }
        : { toolCalls: [{ callId: "call-1", tool: "save_note", arguments: { note: "hi" } }] },
    },
    pollWaitMs: 1000,
  };
}

afterEach(() => {
  delete process.env[LedgerEnv];
});

describe("a ledger that cannot be used", () => {
  it("refuses to start when it cannot be opened", () => {
    const path = join(mkdtempSync(join(tmpdir(), "dexledger-")), "no-such-dir", "ledger.jsonl");
    process.env[LedgerEnv] = path;
    assert.throws(() => new Worker(dial("127.0.0.1:1", { token: "" }), options()), new RegExp(`${LedgerEnv}: open ledger ${path}`));
  });

  it("fails the attempt unrun when the start line cannot be written", { skip: existsSync("/dev/full") ? false : "no /dev/full" }, async () => {
    process.env[LedgerEnv] = "/dev/full";
    let ran = 0;
    const w = new Worker(dial("127.0.0.1:1", { token: "" }), {
      tools: [{ name: "save_note", access: "idempotent_write", run: () => { ran++; return { content: "saved" }; } }],
    });
    const t = create(TaskSchema, {
      ref: { stepId: "st1", attempt: 1 }, sessionId: "s1", kind: StepKind.CALL_TOOL, runner: TaskRunner.TOOL, handler: TaskHandler.TOOL, tool: "save_note", callId: "c1", idempotencyKey: "dex:s1:c1",
    });
    const signal = new AbortController().signal;
    const out = await (w as unknown as { invoke(a: AbortSignal, b: AbortSignal, t: unknown, n: number): Promise<{ err?: Error }> }).invoke(signal, signal, t, 1);
    assert.equal(ran, 0);
    assert.match(String(out.err?.message), /ledger start line was not written/);
  });
});
