// The crash matrix's Worker-kill rows under each framework adapter
// (docs/crash-matrix.md), with real processes: a single-node dexd, and the
// demo Worker (demo/main.js --adapter NAME, the framework faked as in
// make chaos-adapters) SIGKILLed at the row's moment, then a new one. The
// session's Steps and the Workers' side-effect ledger say what ran again.
// dexd comes from $DEX_BIN (make e2e-typescript), else it is built with go.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { closeSync, existsSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import {
  AttemptProgress, Client, dial, HistoryKind, Outcome, SessionStatus, StepKind, type Channel, type Step,
} from "../../src/index.js";
import type { GetSessionResponse } from "../../gen/dex/v1/sessions_pb.js";
import { binDir, freePort } from "./cluster.js";

const repo = resolve(import.meta.dirname, "../../../../..");
const canBuild = existsSync(join(repo, "go.mod")) && spawnSync("go", ["version"], { stdio: "ignore" }).status === 0;
const haveDexd = existsSync(join(binDir, "dexd"));
const skip = haveDexd || canBuild ? false : `no dexd in ${binDir} and no go to build one`;

// A tool (or a CLI tool) runs this long: the kill lands inside it even on a
// slow machine, since it strikes as soon as the run's ledger line is there;
// the chaos suite's "while the tool runs" cells run theirs as long. The new
// Worker's run takes as long again.
const runMs = 2500;
const script = {
  turns: [
    { match: "write-slow", outputs: [{ tool_calls: [{ tool: "save_note", arguments: { note: "n", sleep_ms: runMs } }] }, { text: "saved" }] },
    { match: "email-slow", outputs: [{ tool_calls: [{ tool: "send_email", arguments: { to: "a@b", sleep_ms: runMs } }] }, { text: "mailed" }] },
    { match: "calc", outputs: [{ text: "2+2=4", inline: [{ tool: "calc", arguments: { a: 2, b: 2, sleep_ms: runMs } }] }] },
    {
      match: "cli", outputs: [{
        text: "built, wrote, edited, reviewed", tool_calls: [
          { tool: "Bash", arguments: { command: "make", sleep_ms: runMs } }, { tool: "Write", arguments: { file_path: "notes.md", content: "n" } },
          { tool: "Edit", arguments: { file_path: "notes.md", old_string: "n", new_string: "m" } },
          { tool: "Task", arguments: { description: "review", prompt: "review notes.md" } }, { tool: "save_note", arguments: { note: "n" } },
        ],
      }, { text: "saved" }],
    },
  ],
};

interface Line { session: string; call_id: string; tool: string; attempt: number; idempotency_key: string; kind: string; step: string; pid: number }

async function waitFor<T>(what: string, f: () => Promise<T | undefined> | T | undefined, ms = 60_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await f();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** SIGKILLs a process group this file started and waits for its leader to exit. */
async function killGroup(p: ChildProcess): Promise<void> {
  if (p.exitCode !== null || p.signalCode !== null) return;
  const exited = new Promise<void>((r) => p.once("exit", () => r()));
  try {
    process.kill(-p.pid!, "SIGKILL");
  } catch {
    // already gone
  }
  await exited;
}

describe("each adapter's Worker killed at a row's moment (real dexd and Worker processes)", { skip }, () => {
  let dir: string;
  let dexd: ChildProcess | undefined;
  let target: string;
  let ch: Channel;
  let c: Client;
  const workers = new Set<ChildProcess>();

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), "dexkill-"));
    let bin = join(binDir, "dexd");
    if (!haveDexd) {
      bin = join(dir, "dexd");
      const b = spawnSync("go", ["build", "-o", bin, "./cmd/dexd"], { cwd: repo, encoding: "utf8", timeout: 600_000 });
      assert.equal(b.status, 0, `go build ./cmd/dexd: ${b.stderr}`);
    }
    const [raft, grpc, http] = [await freePort(), await freePort(), await freePort()];
    target = `127.0.0.1:${grpc}`;
    const log = openSync(join(dir, "dexd.log"), "a");
    // Short attempt leases, as in the chaos suite: a dead Worker's attempt fails within seconds.
    dexd = spawn(bin, [
      "--id", "n1", "--data-dir", join(dir, "n1"), "--raft-addr", `127.0.0.1:${raft}`, "--grpc-addr", target, "--http-addr", `127.0.0.1:${http}`,
      "--peers", `n1=127.0.0.1:${raft}`, "--heartbeat-timeout", "3s", "--heartbeat-interval", "500ms", "--log-level", "warn",
    ], { detached: true, stdio: ["ignore", log, log] });
    closeSync(log);
    await waitFor("dexd to be ready", async () => {
      try {
        return (await fetch(`http://127.0.0.1:${http}/readyz`)).ok ? true : undefined;
      } catch {
        return undefined;
      }
    }, 30_000);
    writeFileSync(join(dir, "script.json"), JSON.stringify(script));
    ch = dial(target, { token: "" });
    c = new Client(ch);
  });

  after(async () => {
    ch?.close();
    for (const w of workers) await killGroup(w);
    if (dexd) await killGroup(dexd);
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  function startWorker(adapter: string, id: string): ChildProcess {
    const log = openSync(join(dir, `${id}.log`), "a");
    const w = spawn(process.execPath, [
      join(import.meta.dirname, "../../demo/main.js"), "--addr", target, "--ledger", join(dir, "ledger.jsonl"), "--script", join(dir, "script.json"),
      "--adapter", adapter, "--id", id, "--poll-wait", "1s",
    ], { detached: true, stdio: ["ignore", log, log] });
    closeSync(log);
    workers.add(w);
    w.once("exit", () => workers.delete(w));
    return w;
  }

  function ledger(session: string): Line[] {
    const f = join(dir, "ledger.jsonl");
    if (!existsSync(f)) return [];
    return readFileSync(f, "utf8").split("\n").filter((l) => l.trim() !== "").map((l) => JSON.parse(l) as Line).filter((x) => x.session === session);
  }

  /**
   * Starts a Worker under adapter, starts a session with message, SIGKILLs
   * the Worker once the ledger shows the moment, starts a new Worker and
   * waits until the session's turn ended; then stops that Worker too.
   */
  async function killAt(adapter: string, message: string, what: string, moment: (x: Line) => boolean): Promise<{ g: GetSessionResponse; lines: Line[] }> {
    const w1 = startWorker(adapter, `${adapter}-${message}-1`);
    const s = await c.createSession({ message });
    const at = await waitFor(what, () => ledger(s.id).find(moment));
    assert.equal(at.pid, w1.pid, `${what} ran in the first Worker`);
    await killGroup(w1);
    const w2 = startWorker(adapter, `${adapter}-${message}-2`);
    try {
      const g = await waitFor(`the turn of ${JSON.stringify(message)} to end after the kill`, async () => {
        const r = await c.getSession(s.id);
        return r.session?.status === SessionStatus.IDLE && r.session.inbox.length === 0 && r.session.turnsCompleted >= 1n ? r : undefined;
      }, 90_000);
      return { g, lines: ledger(s.id) };
    } finally {
      await killGroup(w2);
    }
  }

  function step(g: GetSessionResponse, kind: StepKind, tool = ""): Step {
    const st = g.steps.filter((x) => x.kind === kind && (tool === "" || x.tool === tool));
    assert.equal(st.length, 1, `one ${StepKind[kind]} ${tool} Step: ${st.map((x) => x.id).join(", ")}`);
    return st[0];
  }
  const toolResults = (g: GetSessionResponse, callId: string) => g.session!.history.filter((h) => h.kind === HistoryKind.TOOL_RESULT && h.callId === callId);
  const runs = (lines: Line[], tool: string) => lines.filter((x) => x.tool === tool);

  // CallTool, idempotent write | while the tool runs: it runs again, with the same idempotency key.
  async function writeRunsAgain(adapter: string) {
    const { g, lines } = await killAt(adapter, "write-slow", "save_note running", (x) => x.tool === "save_note");
    const st = step(g, StepKind.CALL_TOOL, "save_note");
    assert.equal(st.outcome, Outcome.SUCCEEDED);
    assert.equal(st.attempts.length, 2);
    assert.equal(st.attempts[0].progress, AttemptProgress.NOT_COMPLETED);
    assert.deepEqual(runs(lines, "save_note").map((x) => [x.attempt, x.idempotency_key]), [[1, st.idempotencyKey], [2, st.idempotencyKey]]);
    assert.notEqual(st.idempotencyKey, "");
    assert.equal(toolResults(g, st.callId).length, 1, "the model is told once");
  }

  // CallSingleAttemptTool | while the tool runs: outcome_unknown, never runs again.
  async function singleAttemptNotRepeated(adapter: string) {
    const { g, lines } = await killAt(adapter, "email-slow", "send_email running", (x) => x.tool === "send_email");
    const st = step(g, StepKind.CALL_SINGLE_ATTEMPT_TOOL, "send_email");
    assert.equal(st.outcome, Outcome.UNKNOWN);
    assert.equal(st.attempts.length, 1);
    assert.equal(runs(lines, "send_email").length, 1, "a single-attempt tool never runs again");
    assert.equal(toolResults(g, st.callId).length, 1, "the model is told the outcome");
    assert.equal(g.steps.filter((x) => x.kind === StepKind.RUN_MODEL).length, 2);
  }

  // inline tool | while it runs: it runs again with its RunModel; the history keeps the committed output's result.
  async function inlineRunsAgain(adapter: string) {
    const { g, lines } = await killAt(adapter, "calc", "calc running inside RunModel", (x) => x.kind === "inline" && x.tool === "calc");
    const st = step(g, StepKind.RUN_MODEL);
    assert.equal(st.outcome, Outcome.SUCCEEDED);
    assert.equal(st.attempts.length, 2);
    assert.deepEqual(runs(lines, "calc").map((x) => x.attempt), [1, 2]);
    const inline = g.session!.history.flatMap((h) => h.inlineResults.map((r) => `${r.tool}=${r.content}`));
    assert.deepEqual(inline, ["calc=4"]);
  }

  describe("ai-sdk", () => {
    it("CallTool, idempotent write, killed while the tool runs: runs again with the same idempotency key", () => writeRunsAgain("ai-sdk"));
    it("inline tool, killed while it runs: runs again with RunModel", () => inlineRunsAgain("ai-sdk"));
  });

  describe("openai-agents", () => {
    it("CallSingleAttemptTool, killed while the tool runs: outcome_unknown, never runs again", () => singleAttemptNotRepeated("openai-agents"));
    it("inline tool, killed while it runs: runs again with RunModel", () => inlineRunsAgain("openai-agents"));
  });

  describe("claude-agent-sdk", () => {
    it("CallSingleAttemptTool, killed while the tool runs: outcome_unknown, never runs again", () => singleAttemptNotRepeated("claude-agent-sdk"));
    it("turn segment, killed while the CLI's Bash runs: the model call and the CLI's tools run again, the deferred tool once", async () => {
      const { g, lines } = await killAt("claude-agent-sdk", "cli", "Bash running inside the query", (x) => x.kind === "inline" && x.tool === "Bash");
      const st = g.steps.filter((x) => x.kind === StepKind.RUN_MODEL)[0];
      assert.equal(st.outcome, Outcome.SUCCEEDED);
      assert.equal(st.attempts.length, 2);
      assert.equal(lines.filter((x) => x.kind === "model" && x.step === st.id).length, 2, "the model call ran again");
      assert.deepEqual(runs(lines, "Bash").map((x) => x.attempt), [1, 2]);
      // Write, Edit and Task come after Bash: only the second query reached them.
      for (const t of ["Write", "Edit", "Task"]) assert.deepEqual(runs(lines, t).map((x) => x.attempt), [2], t);
      const inline = g.session!.history.flatMap((h) => h.inlineResults.map((r) => `${r.tool}=${r.content}`));
      assert.deepEqual(inline, ["Bash=Bash done", "Write=Write done", "Edit=Edit done", "Task=Task done"]);
      // The deferred save_note became its own Step and ran once, in the second Worker.
      const note = step(g, StepKind.CALL_TOOL, "save_note");
      assert.equal(note.outcome, Outcome.SUCCEEDED);
      assert.equal(note.attempts.length, 1);
      assert.equal(runs(lines, "save_note").length, 1);
    });
  });
});
