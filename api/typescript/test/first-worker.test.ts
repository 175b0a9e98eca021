// The first Worker with its fake model (examples/first-worker.ts): its rules,
// its bad flags, and, run as the README says against a real dexd with no
// provider key, a session that finishes, one that waits for approval and one
// that waits for an answer.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { join } from "node:path";
import { create } from "@bufbuild/protobuf";
import {
  Client, dial, HistoryEntrySchema, HistoryKind, SessionStatus, StepKind, StepStatus, Worker, type Channel, type HistoryEntry,
  type ModelInput,
} from "../src/index.js";
import { fakeModel } from "../examples/first-worker.js";
import { binDir, haveDexd, startCluster, type Cluster } from "./cluster.js";

const script = join(import.meta.dirname, "../examples/first-worker.js");

/** Runs the first Worker as a user does, with no provider key in its environment. */
function firstWorker(...args: string[]) {
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.endsWith("_API_KEY")));
  const p = spawn("node", [script, ...args], { env, stdio: ["ignore", "ignore", "pipe"] });
  let stderr = "";
  p.stderr!.on("data", (d) => (stderr += d));
  const exited = new Promise<{ code: number | null; stderr: string }>((r) => p.once("exit", (code) => r({ code, stderr })));
  return { p, exited };
}

async function waitFor<T>(what: string, f: () => Promise<T | undefined>, ms = 30_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await f();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

const entry = (seq: bigint, kind: HistoryKind, text = "", tool = "", callId = ""): HistoryEntry =>
  create(HistoryEntrySchema, { seq, kind, text, tool, callId });
const input = (...history: HistoryEntry[]) => ({ history }) as unknown as ModelInput;

it("the first Worker's fake model answers by its rules", () => {
  assert.deepEqual(fakeModel(input(entry(3n, HistoryKind.USER, "What is Dex?"))), {
    toolCalls: [
      { callId: "call-3-1", tool: "lookup", arguments: { query: "What is Dex?" } },
      { callId: "call-3-2", tool: "save_note", arguments: { note: "What is Dex?" } },
    ],
  });
  assert.equal(fakeModel(input(entry(1n, HistoryKind.USER, "Email the team"))).toolCalls![0].tool, "send_email");
  assert.equal(fakeModel(input(entry(1n, HistoryKind.USER, "please ask me"))).toolCalls![0].tool, "ask_user");
  // "task" is not "ask": only the word counts.
  assert.equal(fakeModel(input(entry(1n, HistoryKind.USER, "a task"))).toolCalls![0].tool, "lookup");
  assert.deepEqual(fakeModel(input(entry(1n, HistoryKind.USER, "hi"), entry(2n, HistoryKind.ASSISTANT),
    entry(3n, HistoryKind.TOOL_RESULT, "found \"hi\"", "lookup"))), { text: "Done. lookup: found \"hi\"." });
  // The tools finish in any order; the answer follows the calls'.
  assert.deepEqual(fakeModel(input(entry(1n, HistoryKind.USER, "hi"), entry(2n, HistoryKind.ASSISTANT),
    entry(3n, HistoryKind.TOOL_RESULT, "saved note 1", "save_note", "call-1-2"),
    entry(4n, HistoryKind.TOOL_RESULT, "found \"hi\"", "lookup", "call-1-1"))), { text: "Done. lookup: found \"hi\". save_note: saved note 1." });
  assert.deepEqual(fakeModel(input(entry(1n, HistoryKind.SUMMARY, "s"))), { text: "Done." });
});

it("the first Worker says why and exits on a bad flag or target", async () => {
  const bad = await firstWorker("--bogus").exited;
  assert.equal(bad.code, 2);
  assert.match(bad.stderr, /^first-worker: Unknown option '--bogus'\nusage: /);
  const target = await firstWorker("--addr", "dex:///").exited;
  assert.deepEqual(target, { code: 1, stderr: 'first-worker: dex target "dex:///" names no address\n' });
});

describe("the first Worker against a real dexd", { skip: haveDexd ? false : `no dexd in ${binDir} (make build)` }, () => {
  let cl: Cluster;
  let ch: Channel;
  before(async () => {
    cl = await startCluster(1);
    ch = dial(cl.target, { token: "" });
  });
  after(async () => {
    ch?.close();
    await cl?.stop();
  });

  it("runs with no key: a plain message ends with its answer, an email waits for approval, an ask for an answer", async () => {
    const w = firstWorker("--addr", cl.target);
    const c = new Client(ch);
    const answers: string[] = [];
    try {
      const status = async (id: string, want: SessionStatus) => {
        const r = await c.getSession(id);
        return r.session?.status === want ? r : undefined;
      };
      const waitingStep = async (id: string, kind: StepKind) => {
        const r = await waitFor(`${id} to wait`, () => status(id, SessionStatus.WAITING));
        const st = r.steps.filter((s) => s.kind === kind && s.status === StepStatus.WAITING);
        assert.equal(st.length, 1);
        return st[0];
      };
      const plain = await c.createSession({ message: "What is Dex?" });
      const email = await c.createSession({ message: "Email the team that the build is green" });
      const ask = await c.createSession({ message: "Ask me which city" });
      const done = await waitFor("the plain session to end", () => status(plain.id, SessionStatus.IDLE));

      const approval = await waitingStep(email.id, StepKind.AWAIT_TOOL_APPROVAL);
      assert.equal(approval.tool, "send_email");
      const question = await waitingStep(ask.id, StepKind.AWAIT_QUESTION_ANSWER);
      assert.equal(question.prompt, "Which city should I look up?");
      await c.resolveApproval(approval.id, true);
      await c.answerQuestion(question.id, "Paris");
      const sent = await waitFor("the email session to end", () => status(email.id, SessionStatus.IDLE));
      const answered = await waitFor("the ask session to end", () => status(ask.id, SessionStatus.IDLE));
      for (const r of [done, sent, answered]) answers.push(r.session!.history.at(-1)!.text);
    } finally {
      w.p.kill("SIGTERM");
    }
    const { code, stderr } = await w.exited;
    assert.equal(code, 0, stderr);
    assert.deepEqual(answers, [
      "Done. lookup: found \"What is Dex?\". save_note: saved note 1.",
      "Done. send_email: sent to team@example.com.",
      "Done. ask_user: Paris.",
    ]);
    assert.match(stderr, /first-worker: email to team@example.com: Email the team that the build is green/);
  });

});

// A cluster of its own: the Worker stopped above stays live until its TTL.
describe("the first Worker against a dexd whose Worker serves send_email otherwise", {
  skip: haveDexd ? false : `no dexd in ${binDir} (make build)`,
}, () => {
  let cl: Cluster;
  let ch: Channel;
  before(async () => {
    cl = await startCluster(1);
    ch = dial(cl.target, { token: "" });
  });
  after(async () => {
    ch?.close();
    await cl?.stop();
  });

  it("is refused, says why and exits 1 when a live Worker serves send_email without approval", async () => {
    const other = new Worker(ch, {
      id: "other", pollWaitMs: 1000, shutdownGraceMs: 0,
      tools: [{ name: "send_email", access: "single_attempt", run: () => ({ content: "sent" }) }],
      model: { run: () => ({ text: "hello" }) },
    });
    const stop = new AbortController();
    const running = other.run(stop.signal);
    try {
      // Once it answered a session, it is registered.
      const c = new Client(ch);
      const s = await c.createSession({ message: "hi" });
      await waitFor("the other Worker to answer", async () => {
        const r = await c.getSession(s.id);
        return r.session?.status === SessionStatus.IDLE && r.session.history.length === 2 ? r : undefined;
      });
      const { code, stderr } = await firstWorker("--addr", cl.target).exited;
      assert.equal(code, 1, stderr);
      assert.match(stderr.trim().split("\n").at(-1)!, /tool "send_email" is served by live worker "other" as single_attempt/);
    } finally {
      stop.abort();
      await running;
    }
  });
});
