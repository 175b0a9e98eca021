// The first Worker (examples/first-worker.ts) run as a process: its bad
// flags, and, run as the README says against a real dexd with no
// provider key, a session that finishes, one that waits for approval and one
// that waits for an answer; beside the Go demo Worker of make run
// (cmd/dexworker), it registers the same policies and a deploy waits for
// approval.
import { before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { createClient } from "@connectrpc/connect";
import { Client, SessionStatus, StepKind, StepStatus, ToolAccess, Worker, type Channel, type ToolSpec } from "../../src/index.js";
import { AdminService } from "../../gen/dex/v1/admin_pb.js";
import { binDir, haveDexd, type Cluster, oneNodeForSuite } from "./cluster.js";

const script = join(import.meta.dirname, "../../examples/first-worker.js");

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
  oneNodeForSuite((c, h) => ([cl, ch] = [c, h]));

  it("runs with no key: a plain message ends with its answer, a deploy waits for approval, an ask for an answer", async () => {
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
      const deploy = await c.createSession({ message: "Deploy the app" });
      const ask = await c.createSession({ message: "Ask me which city" });
      const done = await waitFor("the plain session to end", () => status(plain.id, SessionStatus.IDLE));

      const approval = await waitingStep(deploy.id, StepKind.AWAIT_TOOL_APPROVAL);
      assert.equal(approval.tool, "deploy");
      const question = await waitingStep(ask.id, StepKind.AWAIT_QUESTION_ANSWER);
      assert.equal(question.prompt, "Which city should I look up?");
      await c.resolveApproval(approval.id, true);
      await c.answerQuestion(question.id, "Paris");
      const deployed = await waitFor("the deploy session to end", () => status(deploy.id, SessionStatus.IDLE));
      const answered = await waitFor("the ask session to end", () => status(ask.id, SessionStatus.IDLE));
      for (const r of [done, deployed, answered]) answers.push(r.session!.history.at(-1)!.text);
    } finally {
      w.p.kill("SIGTERM");
    }
    const { code, stderr } = await w.exited;
    assert.equal(code, 0, stderr);
    assert.deepEqual(answers, [
      "Done. lookup: found \"What is Dex?\". save_note: saved note 1.",
      "Done. deploy: deployed demo.",
      "Done. ask_user: Paris.",
    ]);
    assert.match(stderr, /first-worker: deploying demo: Deploy the app/);
  });

});

// A cluster of its own: the Worker stopped above stays live until its TTL.
describe("the first Worker against a dexd whose Worker serves send_email otherwise", {
  skip: haveDexd ? false : `no dexd in ${binDir} (make build)`,
}, () => {
  let cl: Cluster;
  let ch: Channel;
  oneNodeForSuite((c, h) => ([cl, ch] = [c, h]));

  it("is refused, says why and exits 1 when a live Worker serves send_email with approval (the Go demo's needs none)", async () => {
    const other = new Worker(ch, {
      id: "other", pollWaitMs: 1000, shutdownGraceMs: 0,
      tools: [{ name: "send_email", access: "single_attempt", needsApproval: true, run: () => ({ content: "sent" }) }],
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
      assert.match(stderr.trim().split("\n").at(-1)!, /tool "send_email" is served by live worker "other" as single_attempt, needs approval;/);
    } finally {
      stop.abort();
      await running;
    }
  });
});

/** A tool's policy: its registration without its name, description and agents. */
function policy(spec: ToolSpec) {
  const { name: _name, description: _description, agents: _agents, ...rest } = spec;
  return rest;
}

const haveDexworker = existsSync(join(binDir, "dexworker"));

// make run serves the Go demo Worker; a user runs the first Worker beside it.
describe("the first Worker beside the Go demo Worker", {
  skip: haveDexd && haveDexworker ? false : `no dexd or dexworker in ${binDir} (make build)`,
}, () => {
  let cl: Cluster;
  let ch: Channel;
  oneNodeForSuite((c, h) => ([cl, ch] = [c, h]));

  it("registers the Go demo's very policies for the tools they share, and a deploy waits for approval", async () => {
    const admin = createClient(AdminService, ch);
    const toolsOf = async (id: string) => {
      const r = await admin.listWorkers({});
      const w = r.workers.find((ws) => ws.worker?.id === id)?.worker;
      return w ? new Map(w.tools.map((t) => [t.name, t])) : undefined;
    };
    const demo = spawn(join(binDir, "dexworker"), [
      "--addr", cl.target, "--ledger", join(cl.dir, "ledger.jsonl"), "--id", "demo-go", "--poll-wait", "1s", "--shutdown-grace", "1s",
    ], { stdio: ["ignore", "ignore", "pipe"] });
    let demoErr = "";
    demo.stderr!.on("data", (d) => (demoErr += d));
    const demoExited = new Promise<number | null>((r) => demo.once("exit", (code) => r(code)));
    let first: ReturnType<typeof firstWorker> | undefined;
    let firstErr = "";
    try {
      const goTools = await waitFor("the Go demo Worker to register", async () => {
        if (demo.exitCode !== null) throw new Error(`the Go demo Worker exited ${demo.exitCode}: ${demoErr}`);
        return toolsOf("demo-go");
      });
      const fw = firstWorker("--addr", cl.target, "--id", "first");
      first = fw;
      fw.p.stderr!.on("data", (d) => (firstErr += d));
      const firstTools = await waitFor("the first Worker to register", async () => {
        if (fw.p.exitCode !== null) throw new Error(`the first Worker exited ${fw.p.exitCode}: ${firstErr}`);
        return toolsOf("first");
      });
      assert.deepEqual([...firstTools.keys()].sort(), ["deploy", "lookup", "save_note", "send_email"]);
      for (const [name, spec] of firstTools) {
        const go = goTools.get(name);
        assert.ok(go, `the Go demo Worker does not serve ${name}`);
        assert.deepEqual(policy(spec), policy(go), name);
      }
      assert.deepEqual([goTools.get("send_email")!.access, goTools.get("send_email")!.needsApproval], [ToolAccess.SINGLE_ATTEMPT, false]);
      assert.deepEqual([goTools.get("deploy")!.access, goTools.get("deploy")!.needsApproval], [ToolAccess.IDEMPOTENT_WRITE, true]);

      const c = new Client(ch);
      const s = await c.createSession({ message: "deploy the app" });
      const waiting = await waitFor("the deploy session to wait", async () => {
        const r = await c.getSession(s.id);
        return r.session?.status === SessionStatus.WAITING ? r : undefined;
      });
      const steps = waiting.steps.filter((st) => st.status === StepStatus.WAITING);
      assert.deepEqual(steps.map((st) => [st.kind, st.tool]), [[StepKind.AWAIT_TOOL_APPROVAL, "deploy"]]);
      await c.resolveApproval(steps[0].id, true);
      await waitFor("the approved deploy session to end", async () => {
        const r = await c.getSession(s.id);
        return r.session?.status === SessionStatus.IDLE ? r : undefined;
      });
      assert.ok(await toolsOf("demo-go"), "the Go demo Worker left the cluster during the session");
      assert.ok(await toolsOf("first"), "the first Worker left the cluster during the session");
    } finally {
      first?.p.kill("SIGTERM");
      demo.kill("SIGTERM");
      await Promise.all([first?.exited, demoExited]);
    }
    assert.equal((await first.exited).code, 0, firstErr);
    assert.equal(await demoExited, 0, demoErr);
  });
});
