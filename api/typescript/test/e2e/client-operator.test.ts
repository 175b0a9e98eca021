// Against a real dexd: the operator's calls of the Go client, reconcileOutcome,
// editHistory and closeSession, with the statuses the cluster answers on bad use.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { Client, Code, codeOf, HistoryKind, Outcome, SessionStatus, Worker, type Channel, type GetSessionResponse, type WorkerOptions } from "../../src/index.js";
import { binDir, haveDexd, type Cluster, oneNodeForSuite } from "./cluster.js";

async function waitFor<T>(what: string, f: () => Promise<T | undefined>, ms = 30_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await f();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function codeOfCall(p: Promise<unknown>): Promise<Code | undefined> {
  try {
    await p;
  } catch (e) {
    return codeOf(e);
  }
  assert.fail("the call succeeded");
}

describe("operator calls against a real dexd", { skip: haveDexd ? false : `no dexd in ${binDir} (make build)` }, () => {
  let cl: Cluster;
  let ch: Channel;
  oneNodeForSuite((c, h) => ([cl, ch] = [c, h]));

  /** Runs a Worker with opts while body drives the cluster, then stops it. */
  async function withWorker<T>(opts: WorkerOptions, body: (c: Client) => Promise<T>): Promise<T> {
    const w = new Worker(ch, { pollWaitMs: 1000, shutdownGraceMs: 1000, ...opts });
    const stop = new AbortController();
    const running = w.run(stop.signal);
    try {
      return await body(new Client(ch));
    } finally {
      stop.abort();
      await running;
    }
  }

  const idle = (c: Client, id: string) => waitFor(`session ${id} to be idle`, async () => {
    const r = await c.getSession(id);
    return r.session?.status === SessionStatus.IDLE && r.session.history.length > 0 ? r : undefined;
  });

  it("reconcileOutcome settles a call whose outcome is unknown, and is refused on a bad outcome or step", async () => {
    await withWorker({
      id: "ts-reconcile",
      tools: [{
        name: "send_email", access: "single_attempt", run: () => {
          throw new Error("the mail server hung up"); // it may have sent: outcome_unknown
        },
      }],
      model: {
        run: (input) => input.history.some((h) => h.kind === HistoryKind.TOOL_RESULT)
          ? { text: "Reported." }
          : { toolCalls: [{ callId: "c1", tool: "send_email", arguments: { to: "ops" } }] },
      },
    }, async (c) => {
      const s = await c.createSession({ message: "mail ops" });
      const step = (await idle(c, s.id)).steps.find((st) => st.tool === "send_email")!;
      assert.equal(step.outcome, Outcome.UNKNOWN);
      assert.equal(await codeOfCall(c.reconcileOutcome(step.id, Outcome.UNSPECIFIED)), Code.InvalidArgument);
      assert.equal(await codeOfCall(c.reconcileOutcome("no-such-step", Outcome.SUCCEEDED)), Code.NotFound);
      await c.reconcileOutcome(step.id, Outcome.SUCCEEDED, "The mail log shows it went out.");
      assert.equal(await codeOfCall(c.reconcileOutcome(step.id, Outcome.FAILED)), Code.FailedPrecondition);
      const got = await c.getSession(s.id);
      assert.equal(got.steps.find((st) => st.id === step.id)!.outcome, Outcome.SUCCEEDED);
      const note = got.session!.history.at(-1)!;
      assert.equal(note.kind, HistoryKind.NOTE);
      assert.equal(note.text, "An operator reconciled call c1 of send_email: it succeeded. The mail log shows it went out.");
    });
  });

  it("editHistory truncates a session's history and adds a note, and is refused on a busy, empty or unknown edit", async () => {
    await withWorker({ id: "ts-edit", model: { run: () => ({ text: "Paris is in Germany." }) } }, async (c) => {
      const s = await c.createSession({ message: "where is Paris?" });
      const answer = (await idle(c, s.id)).session!.history.find((h) => h.kind === HistoryKind.ASSISTANT)!;
      const resp = await c.editHistory(s.id, answer.seq, "The last answer was wrong.");
      assert.equal(resp.historyCount, 2n);
      assert.ok(resp.historySize > 0n);
      const got: GetSessionResponse = await c.getSession(s.id);
      assert.deepEqual(got.session!.history.map((h) => [h.kind, h.text]), [
        [HistoryKind.USER, "where is Paris?"],
        [HistoryKind.NOTE, "The last answer was wrong."],
      ]);
      // A session whose turn runs (its agent's model has no Worker) is refused.
      const busy = await c.createSession({ message: "hello", agent: "nobody-serves-this" });
      assert.equal(await codeOfCall(c.editHistory(busy.id, 0n, "x")), Code.FailedPrecondition);
      assert.equal(await codeOfCall(c.editHistory(s.id)), Code.InvalidArgument);
      assert.equal(await codeOfCall(c.editHistory("no-such-session", 0n, "x")), Code.NotFound);
    });
  });

  it("closeSession closes a session for good: a second close succeeds, a message is refused, an unknown session is NotFound", async () => {
    await withWorker({ id: "ts-close", model: { run: () => ({ text: "Done." }) } }, async (c) => {
      const s = await c.createSession({ message: "one question", retentionMs: 3_600_000n });
      await idle(c, s.id);
      const closed = await c.closeSession(s.id);
      assert.equal(closed?.status, SessionStatus.CLOSED);
      assert.ok(closed!.deleteAtMs > 0n, "a closed session with a retention has a deletion time");
      assert.equal((await c.closeSession(s.id))?.status, SessionStatus.CLOSED);
      assert.equal(await codeOfCall(c.sendMessage(s.id, "one more")), Code.FailedPrecondition);
      assert.equal((await c.getSession(s.id)).session!.history.length, 2);
      assert.equal(await codeOfCall(c.closeSession("no-such-session")), Code.NotFound);
    });
  });

  it("createSession's dispatch order and budget reach the session, a child takes its parent's, and setBudget changes the fields given", async () => {
    const c = new Client(ch);
    const parent = await c.createSession({
      priority: 5, fairnessKey: "tenant-a", fairnessWeight: 4, budget: { maxTokens: 100_000, maxTurns: 20n, loopLimit: 4 },
    });
    assert.deepEqual([parent.priority, parent.fairnessKey, parent.fairnessWeight], [5, "tenant-a", 4]);
    assert.deepEqual([parent.budget?.maxTokens, parent.budget?.maxTurns, parent.budget?.loopLimit], [100_000n, 20n, 4]);
    const child = await c.createSession({ parentId: parent.id });
    assert.deepEqual([child.priority, child.fairnessKey, child.fairnessWeight], [5, "tenant-a", 4]);

    const changed = await c.setBudget(parent.id, { maxTokens: 0, maxCostMicros: 2_000_000 });
    assert.deepEqual([changed.budget?.maxTokens, changed.budget?.maxCostMicros, changed.budget?.maxTurns], [0n, 2_000_000n, 20n]);
    assert.equal((await c.getSession(parent.id)).session?.budget?.maxCostMicros, 2_000_000n);
    assert.equal(await codeOfCall(c.setBudget("no-such-session", { maxTurns: 1 })), Code.NotFound);
  });
});
