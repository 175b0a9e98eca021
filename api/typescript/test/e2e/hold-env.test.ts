// Holds driven by the environment (DEX_HOLD, DEX_HOLD_ALL, the .held and
// .release files beside DEX_LEDGER), as dexchaos certify drives a user's
// Worker: the Worker runs as its own process, configured only by its
// environment; the test releases each hold by writing the release file.
import { afterEach, describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  Client, dial, HoldAllEnv, HoldEnv, LedgerEnv, Moments, SessionStatus, StepKind, StepStatus, Worker, type Channel, type Moment, type WorkerOptions,
} from "../../src/index.js";
import { binDir, haveDexd, type Cluster, oneNodeForSuite } from "./cluster.js";

// A model that calls send_invoice once, then answers "done".
const workerScript = `
import { dial, HistoryKind, sideEffect, Worker } from ${JSON.stringify(join(import.meta.dirname, "../../src/index.js"))};
const ch = dial(process.env.DEX_ADDR);
const w = new Worker(ch, {
  id: "held-worker", pollWaitMs: 1000,
  tools: [{ name: "send_invoice", access: "idempotent_write", run: (call) => {
    sideEffect(call, "invoice", call.idempotencyKey);
    return { content: "sent" };
  } }],
  model: { run: (input) => input.history.some((h) => h.kind === HistoryKind.TOOL_RESULT)
    ? { text: "done" } : { toolCalls: [{ callId: "c1", tool: "send_invoice", arguments: {} }] } },
});
const stop = new AbortController();
process.on("SIGTERM", () => stop.abort());
await w.run(stop.signal);
ch.close();
`;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function waitFor<T>(what: string, f: () => T | undefined | Promise<T | undefined>, ms = 20_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await f();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

/** A Worker process run with env; stderr collected. */
function startWorker(env: Record<string, string>): { p: ChildProcess; stderr: () => string; stop: () => Promise<void> } {
  let err = "";
  const p = spawn("node", ["--input-type=module", "-e", workerScript], { env: { ...process.env, ...env }, stdio: ["ignore", "ignore", "pipe"] });
  p.stderr!.on("data", (d) => (err += d));
  return {
    p, stderr: () => err,
    stop: () => new Promise<void>((res) => {
      if (p.exitCode !== null || p.signalCode !== null) return res();
      const kill = setTimeout(() => p.kill("SIGKILL"), 10_000); // a hold never released does not end
      p.once("exit", () => {
        clearTimeout(kill);
        res();
      });
      p.kill("SIGTERM");
    }),
  };
}

const ledgerLines = (path: string) => (existsSync(path) ? readFileSync(path, "utf8").trim().split("\n").filter(Boolean).map((l) => JSON.parse(l)) : []);

afterEach(() => {
  for (const k of [HoldEnv, HoldAllEnv, LedgerEnv]) delete process.env[k];
});

describe("holds from the environment against a real dexd", { skip: haveDexd ? false : `no dexd in ${binDir} (make build)` }, () => {
  let cl: Cluster;
  let ch: Channel;
  oneNodeForSuite((c, h) => ([cl, ch] = [c, h]));

  /** Runs one session under hold; at each hold calls at with the .held line, which releases it. */
  async function heldRun(hold: string, all: boolean, at: (held: string, ledger: string, session: string) => Promise<void>) {
    const ledger = join(mkdtempSync(join(tmpdir(), "dexhold-")), "ledger.jsonl");
    writeFileSync(ledger + ".release", "stale\n"); // left over: does not release the first hold
    const w = startWorker({ DEX_ADDR: cl.target, DEX_LEDGER: ledger, DEX_HOLD: hold, DEX_HOLD_ALL: all ? "1" : "" });
    const c = new Client(ch);
    const helds: string[] = [];
    try {
      const s = await c.createSession({ message: "send the invoice" });
      for (;;) {
        const held = await waitFor("a hold or the turn's end", async () => {
          if (existsSync(ledger + ".held")) return readFileSync(ledger + ".held", "utf8");
          const r = await c.getSession(s.id);
          return r.session?.status === SessionStatus.IDLE && r.steps.length >= 3 ? "" : undefined;
        });
        if (held === "") break;
        helds.push(held);
        assert.ok(!existsSync(ledger + ".release"), "a stale release is removed before the hold");
        await at(held, ledger, s.id);
        const n = helds.length;
        await waitFor("the release", () => (w.stderr().split("released ").length - 1 >= n ? true : undefined));
        assert.ok(!existsSync(ledger + ".release"), "the Worker removes the release file");
      }
      return { helds, stderr: w.stderr(), pid: w.p.pid };
    } finally {
      await w.stop();
    }
  }

  it("holds each moment once, writes .held and the stderr lines, and goes on at .release", async () => {
    const { helds, stderr, pid } = await heldRun("before-model,tool-running", false, async (_held, ledger) => {
      writeFileSync(ledger + ".release", "go\n");
    });
    assert.equal(helds.length, 2, helds.join(""));
    assert.match(helds[0], new RegExp(`^before-model step=\\S+ session=\\S+ kind=STEP_KIND_RUN_MODEL tool= attempt=1 pid=${pid}\\n$`));
    assert.match(helds[1], new RegExp(`^tool-running step=\\S+ session=\\S+ kind=STEP_KIND_CALL_TOOL tool=send_invoice attempt=1 pid=${pid}\\n$`));
    const step = /step=(\S+)/.exec(helds[1])![1];
    assert.match(stderr, new RegExp(`held tool-running step=${step} pid=${pid}\\n`));
    assert.match(stderr, new RegExp(`released tool-running step=${step} pid=${pid}\\n`));
  });

  it("with DEX_HOLD_ALL=1 holds every occurrence; before-result comes after the end line, before the result is reported", async () => {
    const { helds } = await heldRun("before-result", true, async (held, ledger, session) => {
      const step = /step=(\S+)/.exec(held)![1];
      const lines = ledgerLines(ledger).filter((l) => l.step === step);
      assert.deepEqual(lines.map((l) => l.phase).filter((p) => p !== "effect"), ["start", "end"], "the end line is written");
      const r = await new Client(ch).getSession(session);
      const st = r.steps.find((x) => x.id === step)!;
      assert.equal(st.status, StepStatus.RUNNING, "the result is not reported yet");
      writeFileSync(ledger + ".release", "go\n");
    });
    assert.deepEqual(helds.map((h) => h.split(" ")[0] + " " + /kind=(\S+)/.exec(h)![1]), [
      "before-result STEP_KIND_RUN_MODEL", "before-result STEP_KIND_CALL_TOOL", "before-result STEP_KIND_RUN_MODEL",
    ]);
  });

  it("a hook in code gets before-result between the handler and the report; DEX_HOLD is then ignored", async () => {
    process.env[HoldEnv] = "no-such-moment";
    const seen: [Moment, StepKind, string][] = [];
    const stop = new AbortController();
    const w = new Worker(ch, {
      id: "hook-worker", pollWaitMs: 1000, hold: (m, t) => void seen.push([m, t.kind, t.sessionId]),
      tools: [{ name: "send_invoice", access: "idempotent_write", run: () => ({ content: "sent" }) }],
      model: { run: (i) => (i.history.length > 1 ? { text: "done" } : { toolCalls: [{ callId: "c1", tool: "send_invoice" }] }) },
    } satisfies WorkerOptions);
    const running = w.run(stop.signal);
    const c = new Client(ch);
    const s = await c.createSession({ message: "hook" });
    await waitFor("the turn", async () => ((await c.getSession(s.id)).session?.status === SessionStatus.IDLE ? true : undefined));
    stop.abort();
    await running;
    const tool = seen.filter(([, k, id]) => k === StepKind.CALL_TOOL && id === s.id).map(([m]) => m);
    assert.deepEqual(tool, [Moments.beforeClaim, Moments.afterClaim, Moments.toolRunning, Moments.beforeResult, Moments.afterResultSent]);
    const model = seen.filter(([, k, id]) => k === StepKind.RUN_MODEL && id === s.id).map(([m]) => m);
    assert.deepEqual(model.slice(0, 5), [Moments.beforeClaim, Moments.afterClaim, Moments.beforeModel, Moments.beforeResult, Moments.afterResultSent]);
  });
});

describe("DEX_HOLD that cannot be used", () => {
  const opts: WorkerOptions = { tools: [{ name: "t", access: "read", run: () => ({ content: "" }) }] };
  const ch = () => dial("127.0.0.1:1", { token: "" });

  it("an unknown moment fails the construction, naming DEX_HOLD", () => {
    process.env[LedgerEnv] = join(mkdtempSync(join(tmpdir(), "dexhold-")), "ledger.jsonl");
    process.env[HoldEnv] = "tool-running,after-lunch";
    assert.throws(() => new Worker(ch(), opts), /^Error: DEX_HOLD: unknown hold moment "after-lunch" \(known: before-claim, .*before-result/);
  });

  it("DEX_HOLD without DEX_LEDGER fails the construction, naming both", () => {
    process.env[HoldEnv] = "before-result";
    assert.throws(() => new Worker(ch(), opts), /DEX_HOLD is set \("before-result"\) but DEX_LEDGER is not/);
  });

  it("an empty DEX_HOLD installs nothing", () => {
    process.env[HoldEnv] = " ";
    assert.doesNotThrow(() => new Worker(ch(), opts));
  });
});
