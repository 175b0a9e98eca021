// A bulk cancel through the TypeScript Client against a real 3-node dexd
// cluster of 3 partitions: the job is started in every partition under one
// id, waited for with waitBulkJob, and acts on exactly the sessions of its
// label; a bad filter is refused with the cluster's InvalidArgument.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { createClient } from "@connectrpc/connect";
import { AdminService } from "../../gen/dex/v1/admin_pb.js";
import { BulkJobStatus, Client, Code, codeOf, dial, HistoryKind, partitionOf, SessionStatus, type BulkJob, type Session } from "../../src/index.js";
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

describe("bulk jobs against a real dexd cluster of 3 partitions", { skip: haveDexd ? false : `no dexd in ${binDir} (make build)` }, () => {
  it("a bulk cancel by label cancels the labelled sessions' turns and no other; a bad filter is refused", { timeout: 120_000 }, async () => {
    const cl = await startCluster(3, ["--partitions", String(partitions)]);
    const ch = dial(cl.target, { token: "" });
    try {
      // Every partition has a leader before the job is started in each.
      const admin = createClient(AdminService, ch);
      for (const deadline = Date.now() + 60_000; ;) {
        const st = await admin.status({}, { timeoutMs: 2000 }).catch(() => undefined);
        if (st !== undefined && st.partitions.length === partitions && st.partitions.every((p) => p.leaderGrpcAddress !== "")) break;
        if (Date.now() > deadline) throw new Error(`a partition has no leader: ${JSON.stringify(st?.partitions.map((p) => p.leaderGrpcAddress))}`);
        await new Promise((r) => setTimeout(r, 100));
      }
      const c = new Client(ch);
      // No Worker runs: each session's first turn waits for its model.
      const batch = idsInEveryPartition("batch", 2);
      const others = idsInEveryPartition("other", 1);
      for (const id of batch) await c.createSession({ sessionId: id, message: "work", labels: [{ key: "batch", value: "nightly" }] });
      for (const id of others) await c.createSession({ sessionId: id, message: "work", labels: [{ key: "batch", value: "weekly" }] });
      await c.createSession({ sessionId: "unlabelled", message: "work" });

      const started = await c.startBulkAction({ action: "cancel", filter: { labels: { batch: "nightly" } }, reason: "batch stopped" });
      assert.match(started.id, /^bulk-[0-9a-f]{16}$/);
      const reads: BulkJob[] = [];
      const job = await c.waitBulkJob(started.id, { intervalMs: 100, waitMs: 60_000, onProgress: (j) => reads.push(j) });
      assert.equal(job.status, BulkJobStatus.DONE, `job: ${job.status} after ${reads.length} reads`);
      assert.equal(job.acted, BigInt(batch.length));
      assert.equal(job.failed, 0n);
      assert.deepEqual(job.skipped.map((s) => [s.reason, s.count]), []);
      assert.equal(job.reason, "batch stopped");
      assert.deepEqual(job.filter?.labels.map((l) => [l.key, l.value]), [["batch", "nightly"]]);
      assert.equal(reads.at(-1)?.status, BulkJobStatus.DONE);

      const note = `The previous turn was cancelled by bulk job ${job.id}: batch stopped`;
      const session = async (id: string): Promise<Session> => (await c.getSession(id)).session!;
      for (const id of batch) {
        const s = await session(id);
        assert.equal(s.status, SessionStatus.IDLE, `${id} (partition ${partitionOf(id, partitions)})`);
        assert.equal(s.history.filter((h) => h.kind === HistoryKind.NOTE && h.text === note).length, 1, `${id}: ${s.history.map((h) => h.text).join(" | ")}`);
      }
      for (const id of [...others, "unlabelled"]) {
        const s = await session(id);
        assert.equal(s.status, SessionStatus.RUNNING, id);
        assert.ok(!s.history.some((h) => h.text.includes("bulk job")), `${id}: ${s.history.map((h) => h.text).join(" | ")}`);
      }

      // A created range that ends before it starts: the cluster refuses it,
      // and starts nothing in any partition.
      let refused: unknown;
      try {
        await c.startBulkAction({ action: "close", filter: { createdFromMs: 9, createdToMs: 1 } });
      } catch (e) {
        refused = e;
      }
      assert.equal(codeOf(refused), Code.InvalidArgument, String(refused));
      assert.match((refused as Error).message, /created time range: from \(9\) is later than to \(1\)/);
      assert.deepEqual((await c.listBulkJobs()).map((j) => j.id), [job.id]);
      for (const id of others) assert.equal((await session(id)).status, SessionStatus.RUNNING, `${id} after the refused close`);
    } finally {
      ch.close();
      await cl.stop();
    }
  });
});
