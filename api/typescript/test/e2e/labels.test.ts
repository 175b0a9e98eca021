// Labels and the server-side session search through the TypeScript Client
// against a real 3-node dexd cluster of 3 partitions: labelled sessions in
// every partition are found by label and agent (whole lists, a limit, page
// by page), one is relabelled with setLabels and is then found by its new
// labels only, and a bad label key is refused with the cluster's
// InvalidArgument.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { createClient } from "@connectrpc/connect";
import { AdminService } from "../../gen/dex/v1/admin_pb.js";
import { Client, Code, codeOf, dial, partitionOf, SessionStatus, type SessionSummary } from "../../src/index.js";
import { binDir, haveDexd, startCluster } from "./cluster.js";

const partitions = 3;

/** perPartition ids of each partition, named prefix-N. */
function idsInEveryPartition(prefix: string, perPartition: number): string[] {
  const ids: string[] = [];
  for (let i = 0; ids.length < partitions * perPartition; i++) {
    const id = `${prefix}-${i}`;
    if (ids.filter((x) => partitionOf(x, partitions) === partitionOf(id, partitions)).length < perPartition) ids.push(id);
  }
  return ids;
}

const idsOf = (ss: SessionSummary[]) => ss.map((s) => s.id).sort();

describe("labels and session search against a real dexd cluster of 3 partitions", { skip: haveDexd ? false : `no dexd in ${binDir} (make build)` }, () => {
  it("finds labelled sessions by label and agent, and by their new labels after setLabels", { timeout: 120_000 }, async () => {
    const cl = await startCluster(3, ["--partitions", String(partitions)]);
    const ch = dial(cl.target, { token: "" });
    try {
      // Every partition has a leader before sessions are made in each.
      const admin = createClient(AdminService, ch);
      for (const deadline = Date.now() + 60_000; ;) {
        const st = await admin.status({}, { timeoutMs: 2000 }).catch(() => undefined);
        if (st !== undefined && st.partitions.length === partitions && st.partitions.every((p) => p.leaderGrpcAddress !== "")) break;
        if (Date.now() > deadline) throw new Error(`a partition has no leader: ${JSON.stringify(st?.partitions.map((p) => p.leaderGrpcAddress))}`);
        await new Promise((r) => setTimeout(r, 100));
      }
      const c = new Client(ch);
      // No message: each session stays idle.
      const redCoders = idsInEveryPartition("red-coder", 2);
      const redWriters = idsInEveryPartition("red-writer", 1);
      const blueCoders = idsInEveryPartition("blue-coder", 1);
      const made = async (ids: string[], agent: string, team: string) => {
        for (const id of ids) await c.createSession({ sessionId: id, agent, labels: [{ key: "team", value: team }, { key: "env", value: "prod" }] });
      };
      await made(redCoders, "coder", "red");
      await made(redWriters, "writer", "red");
      await made(blueCoders, "coder", "blue");
      await c.createSession({ sessionId: "plain", agent: "coder" });
      const all = [...redCoders, ...redWriters, ...blueCoders, "plain"].sort();

      assert.deepEqual(idsOf(await c.listSessions()), all);
      assert.deepEqual(idsOf(await c.listSessions({ labels: { team: "red" }, agent: "coder" })), [...redCoders].sort());
      assert.deepEqual(idsOf(await c.listSessions({ labels: { team: "red" } })), [...redCoders, ...redWriters].sort());
      assert.deepEqual(idsOf(await c.listSessions({ labels: { team: "red", env: "prod" }, agent: "writer", status: "idle" })), [...redWriters].sort());
      assert.deepEqual(idsOf(await c.listSessions({ agent: "coder", status: "running" })), []);
      // Newest first, across partitions; a limit stops the reading.
      const newest = await c.listSessions({ agent: "coder", order: "created", descending: true });
      assert.deepEqual(idsOf(newest), [...redCoders, ...blueCoders, "plain"].sort());
      for (let i = 1; i < newest.length; i++) assert.ok(newest[i - 1].createdAtMs >= newest[i].createdAtMs, `${newest[i - 1].id} before ${newest[i].id}`);
      const two = await c.listSessions({ agent: "coder", order: "created", descending: true, limit: 2 });
      assert.deepEqual(two.map((s) => s.id), newest.slice(0, 2).map((s) => s.id));
      // A time range: every session made since the first.
      const first = newest.at(-1)!.createdAtMs;
      assert.deepEqual(idsOf(await c.listSessions({ agent: "coder", createdAfter: first })), idsOf(newest));
      assert.deepEqual(idsOf(await c.listSessions({ agent: "coder", createdBefore: first })), []);

      // Page by page, two at most to a page: the same sessions, each once.
      const paged: SessionSummary[] = [];
      let pages = 0;
      for (let token = ""; ;) {
        const page = await c.listSessionsPage({ labels: { team: "red" }, pageSize: 2, pageToken: token });
        assert.ok(page.sessions.length <= 2, `page of ${page.sessions.length}`);
        paged.push(...page.sessions);
        pages++;
        if (page.nextPageToken === "") break;
        token = page.nextPageToken;
      }
      assert.deepEqual(paged.map((s) => s.id).sort(), [...redCoders, ...redWriters].sort());
      assert.ok(pages >= 5, `${pages} pages`);

      // Relabel one red coder: it leaves the red list and is found by its new labels.
      const moved = redCoders[0];
      const s = await c.setLabels(moved, { team: "blue", tier: "1" }, ["env"]);
      assert.deepEqual(s.labels.map((l) => `${l.key}=${l.value}`), ["team=blue", "tier=1"]);
      assert.equal(s.status, SessionStatus.IDLE);
      assert.deepEqual(idsOf(await c.listSessions({ labels: { team: "red" }, agent: "coder" })), redCoders.slice(1).sort());
      assert.deepEqual(idsOf(await c.listSessions({ labels: { team: "blue" }, agent: "coder" })), [...blueCoders, moved].sort());
      assert.deepEqual(idsOf(await c.listSessions({ labels: { tier: "1" } })), [moved]);
      const summary = (await c.listSessions({ labels: { tier: "1" } }))[0];
      assert.deepEqual(summary.labels.map((l) => `${l.key}=${l.value}`), ["team=blue", "tier=1"]);
      // The same change again changes nothing.
      assert.deepEqual((await c.setLabels(moved, { team: "blue", tier: "1" }, ["env"])).labels.map((l) => `${l.key}=${l.value}`), ["team=blue", "tier=1"]);

      // Keys the cluster refuses: nothing changes.
      for (const [what, p] of [
        ["setLabels", () => c.setLabels(moved, { Team: "x" })],
        ["listSessions", () => c.listSessions({ labels: { "-bad": "x" } })],
        ["setLabels of an unknown session", () => c.setLabels("nobody", { team: "x" })],
      ] as const) {
        let refused: unknown;
        try {
          await p();
        } catch (e) {
          refused = e;
        }
        assert.equal(codeOf(refused), what.endsWith("unknown session") ? Code.NotFound : Code.InvalidArgument, `${what}: ${String(refused)}`);
      }
      assert.deepEqual(idsOf(await c.listSessions({ labels: { tier: "1" } })), [moved]);
    } finally {
      ch.close();
      await cl.stop();
    }
  });
});
