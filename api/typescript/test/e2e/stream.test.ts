// Live output end to end (docs/design/streaming.md): the TypeScript demo
// Worker --stream streams a scripted output 8 bytes every 10 ms to a real
// dexd; the TypeScript client watches with liveOutput. The watcher's text is
// the committed output, every delta at the offset the one before ended,
// across a leader's SIGKILL, and for sessions of every partition of a
// partitioned cluster streaming at once.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { Client, dial, HistoryKind, partitionOf, SessionStatus, type Channel } from "../../src/index.js";
import { binDir, haveDexd, oneNodeForSuite, startCluster, type Cluster } from "./cluster.js";

/** n numbered pieces of 10 bytes each, with a character of 2 and one of 3 bytes in each, so that deltas meet characters cut by the 8-byte pace. */
function numberedText(n: number): string {
  let s = "";
  for (let i = 1; i <= n; i++) s += `${String(i).padStart(3, "0")} é€ `;
  return s;
}

/** Spawns the demo Worker --stream against target with a script that answers "stream" with want. */
function startStreamingWorker(target: string, dir: string, want: string, extra: string[] = []) {
  const script = join(dir, "stream-script.json");
  writeFileSync(script, JSON.stringify({ turns: [{ match: "stream", outputs: [{ text: want }] }] }));
  const w = spawn("node", [
    join(import.meta.dirname, "../../demo/main.js"), "--addr", target, "--ledger", join(dir, "stream-ledger.jsonl"), "--script", script,
    "--stream", "--poll-wait", "2s", "--id", "ts-stream", ...extra,
  ], { stdio: ["ignore", "ignore", "pipe"] });
  let stderr = "";
  w.stderr!.on("data", (d) => (stderr += d));
  const exited = new Promise<number | null>((r) => w.once("exit", (code) => r(code)));
  return {
    async stop() {
      w.kill("SIGTERM");
      assert.equal(await exited, 0, stderr);
    },
  };
}

/**
 * Watches session id's live output until the first attempt of its first
 * Step ends, checking that each delta starts where the one before ended;
 * midway (once at least midwayBytes came) it calls midway once.
 */
async function watchOutput(c: Client, id: string, midwayBytes = 0, midway = async () => {}): Promise<{ text: string; deltas: number; ended: string; types: string[] }> {
  const step = `${id}-s1`;
  let text = "";
  let next = 0n;
  let deltas = 0;
  let ended = "";
  let called = false;
  const types: string[] = [];
  for await (const ev of c.watchSession(id, 0n, { signal: AbortSignal.timeout(60_000), liveOutput: true })) {
    types.push(ev.type);
    if (ev.stepId !== step || ev.output === undefined || ev.output.attempt !== 1) continue;
    if (ev.type !== "output") {
      ended = ev.type;
      break;
    }
    assert.equal(ev.output.offset, next, `a delta at ${ev.output.offset}; the one before ended at ${next}`);
    text += ev.output.text;
    next += BigInt(Buffer.byteLength(ev.output.text, "utf8"));
    deltas++;
    if (!called && midwayBytes > 0 && next >= BigInt(midwayBytes)) {
      called = true;
      await midway();
    }
  }
  return { text, deltas, ended, types };
}

/** The session's committed output (its last assistant entry), once the turn it ended is over. */
async function committedOutput(c: Client, id: string): Promise<string | undefined> {
  let got = await c.getSession(id);
  for (const deadline = Date.now() + 20_000; got.session?.status !== SessionStatus.IDLE && Date.now() < deadline;) {
    await new Promise((r) => setTimeout(r, 50));
    got = await c.getSession(id);
  }
  assert.equal(got.session?.status, SessionStatus.IDLE);
  return got.session!.history.filter((h) => h.kind === HistoryKind.ASSISTANT).at(-1)?.text;
}

const skip = haveDexd ? false : `no dexd in ${binDir} (make build)`;

describe("live output from the demo Worker --stream", { skip }, () => {
  let cl: Cluster;
  let ch: Channel;
  oneNodeForSuite((c, h) => ([cl, ch] = [c, h]));

  it("reaches the watcher whole, in order, and equals the committed output", async () => {
    const want = numberedText(60); // 600 bytes: under a second at 8 bytes every 10 ms
    const w = startStreamingWorker(cl.target, cl.dir, want);
    try {
      const c = new Client(ch);
      const s = await c.createSession({ message: "stream" });
      const got = await watchOutput(c, s.id);
      assert.equal(got.ended, "output_ended", `events: ${got.types.join(", ")}`);
      assert.ok(got.deltas > 1, `the output came in ${got.deltas} delta(s): it was not streamed`);
      assert.equal(got.text, want);
      assert.equal(await committedOutput(c, s.id), got.text);
      console.log(`${Buffer.byteLength(got.text, "utf8")} bytes streamed in ${got.deltas} deltas; the committed output is the same`);
    } finally {
      await w.stop();
    }
  });
});

describe("live output across a leader's SIGKILL", { skip }, () => {
  it("the watcher's text equals the committed output, every byte once", async () => {
    const cl = await startCluster(3);
    const ch = dial(cl.target, { token: "" });
    const want = numberedText(240); // 2,400 bytes: 3 s of streaming
    const w = startStreamingWorker(cl.target, cl.dir, want);
    try {
      const c = new Client(ch);
      const s = await c.createSession({ message: "stream" });
      const got = await watchOutput(c, s.id, want.length / 4, async () => {
        // Every healthy node answers /readyz; only the leader /readyz/leader.
        const ready = await Promise.all(cl.http.map((h) => fetch(`http://${h}/readyz/leader`).then((r) => r.ok, () => false)));
        const leader = ready.indexOf(true);
        assert.ok(leader >= 0, "no node leads");
        cl.procs[leader].kill("SIGKILL");
      });
      assert.equal(got.ended, "output_ended", `events: ${got.types.join(", ")}`);
      assert.equal(got.text, want);
      assert.equal(await committedOutput(c, s.id), got.text);
      console.log(`after the leader's SIGKILL: ${Buffer.byteLength(got.text, "utf8")} bytes in ${got.deltas} deltas; the committed output is the same`);
    } finally {
      await w.stop();
      ch.close();
      await cl.stop();
    }
  });
});

describe("live output of a cluster of 3 partitions", { skip }, () => {
  it("reaches each session's watcher whole: the Worker's calls of each partition go to its leader", { timeout: 120_000 }, async () => {
    const cl = await startCluster(3, ["--partitions", "3"]);
    const ch = dial(cl.target, { token: "" });
    // Two sessions in each partition, streaming at once through one Worker.
    const ids: string[] = [];
    for (let i = 0; ids.length < 6; i++) {
      const id = `live-${i}`;
      if (ids.filter((x) => partitionOf(x, 3) === partitionOf(id, 3)).length < 2) ids.push(id);
    }
    const want = numberedText(90); // 900 bytes: about a second of streaming
    const w = startStreamingWorker(cl.target, cl.dir, want, ["--concurrency", "12"]);
    try {
      const c = new Client(ch);
      for (const id of ids) {
        for (const deadline = Date.now() + 60_000; ;) {
          try {
            await c.createSession({ sessionId: id, message: "stream" });
            break;
          } catch (e) {
            if (Date.now() > deadline) throw e; // a partition with no leader yet
            await new Promise((r) => setTimeout(r, 200));
          }
        }
      }
      // A watch from offset 0 gets the output the leader holds, then the rest.
      const got = await Promise.all(ids.map((id) => watchOutput(c, id)));
      for (const [i, id] of ids.entries()) {
        assert.equal(got[i].ended, "output_ended", `${id}: events: ${got[i].types.join(", ")}`);
        assert.equal(got[i].text, want, id);
        assert.equal(await committedOutput(c, id), want, id);
      }
    } finally {
      await w.stop();
      ch.close();
      await cl.stop();
    }
  });
});
