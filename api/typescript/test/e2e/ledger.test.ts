// The execution ledger ($DEX_LEDGER, docs/ledger.md) against a real dexd:
// its lines, with the golden fields, and none without the variable.
import { afterEach, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Client, HistoryKind, LedgerEnv, SessionStatus, sideEffect, StepKind, Worker, type Channel, type WorkerOptions } from "../../src/index.js";
import { binDir, haveDexd, type Cluster, oneNodeForSuite } from "./cluster.js";

// The fields every library writes, by phase (api/ledger-fields.json).
const golden = JSON.parse(readFileSync(join(import.meta.dirname, "../../../../ledger-fields.json"), "utf8")) as Record<string, string[]>;

async function waitFor<T>(what: string, f: () => Promise<T | undefined>, ms = 30_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await f();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

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

describe("the execution ledger against a real dexd", { skip: haveDexd ? false : `no dexd in ${binDir} (make build)` }, () => {
  let cl: Cluster;
  let ch: Channel;
  oneNodeForSuite((c, h) => ([cl, ch] = [c, h]));

  async function runSession(w: Worker) {
    const stop = new AbortController();
    const running = w.run(stop.signal);
    const c = new Client(ch);
    const s = await c.createSession({ message: "save hi" });
    const got = await waitFor("the turn to end", async () => {
      const r = await c.getSession(s.id);
      return r.session?.status === SessionStatus.IDLE && r.steps.length >= 3 ? r : undefined;
    });
    stop.abort();
    await running;
    return { s, got };
  }

  it("writes start and end lines of the model and tool calls and the effect line, with the golden fields", async () => {
    const ledger = join(mkdtempSync(join(tmpdir(), "dexledger-")), "ledger.jsonl");
    process.env[LedgerEnv] = ledger;
    const { s, got } = await runSession(new Worker(ch, options()));
    const step = got.steps.find((x) => x.kind === StepKind.CALL_TOOL)!;
    const lines = readFileSync(ledger, "utf8").trim().split("\n").map((l) => JSON.parse(l));
    assert.deepEqual(lines.map((x) => [x.phase, x.kind, x.tool, x.outcome]), [
      ["start", "model", "", undefined], ["end", "model", "", "ok"],
      ["start", "tool", "save_note", undefined], ["effect", "tool", "save_note", undefined], ["end", "tool", "save_note", "ok"],
      ["start", "model", "", undefined], ["end", "model", "", "ok"],
    ]);
    for (const x of lines) {
      assert.deepEqual([x.session, x.worker, x.attempt, x.pid], [s.id, "ts-ledger", 1, process.pid]);
      assert.deepEqual(Object.keys(x).sort(), golden[x.phase], `${x.phase} line fields`);
    }
    for (const x of lines.slice(2, 5)) {
      assert.deepEqual([x.step, x.call_id, x.idempotency_key], [step.id, "call-1", `dex:${s.id}:call-1`]);
    }
    assert.deepEqual([lines[3].effect, lines[3].effect_key], ["notes.insert", `dex:${s.id}:call-1`]);
    assert.notEqual(lines[0].step, lines[5].step);
  });

  it("writes nothing without the variable", async () => {
    const w = new Worker(ch, options());
    assert.equal(w.ledger, undefined);
    const { got } = await runSession(w); // sideEffect is a no-op
    assert.equal(got.session?.history.at(-1)?.text, "done");
  });
});
