// The bulk job calls against a fake node on 127.0.0.1: the request's fields
// sent, the job resolved, a start retried after its answer was lost (with a
// job id given or drawn) resolves the job that try started, refusals thrown
// with their code, bad input refused before any call, waitBulkJob ending on
// done and on cancelled and giving up at its waitMs.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import http2 from "node:http2";
import type { AddressInfo } from "node:net";
import { create, equals } from "@bufbuild/protobuf";
import { Code, ConnectError, type HandlerContext, type ServiceImpl } from "@connectrpc/connect";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import {
  BulkAction, BulkFilterSchema, BulkJobSchema, BulkJobStatus, SessionService, type BulkJob, type StartBulkActionRequest,
} from "../gen/dex/v1/sessions_pb.js";
import { SessionStatus } from "../gen/dex/v1/types_pb.js";
import { Client, codeOf, dial, messageOf, type StartBulkActionInit } from "../src/index.js";

/**
 * Keeps jobs by id. A running job acts on 10 more sessions at each read and
 * is done after readsToEnd reads (0: never). lose starts and cancels are
 * made but answered Unavailable (the answer lost); unread calls are refused
 * as a follower refuses them, naming the leader (itself), before anything
 * is made. cancelAtRead cancels a job at that read of it, as another client
 * would. GetBulkJob answers NotFound for the ids in unreadable.
 */
class BulkNode {
  addr = "";
  starts: StartBulkActionRequest[] = [];
  gets: string[] = [];
  cancels: string[] = [];
  jobs = new Map<string, BulkJob>();
  private reads = new Map<string, number>();
  lose = 0;
  unread = 0;
  readsToEnd = 3;
  cancelAtRead = 0;
  unreadable = new Set<string>();
  private clock = 1767258000000n;
  private server?: http2.Http2Server;

  private refuseUnread(ctx: HandlerContext): void {
    if (this.unread > 0) {
      this.unread--;
      ctx.responseTrailer.set("dex-leader", this.addr);
      throw new ConnectError("not the leader", Code.Unavailable);
    }
  }

  private loseAnswer(): void {
    if (this.lose > 0) {
      this.lose--;
      throw new ConnectError("leadership lost", Code.Unavailable);
    }
  }

  private job(id: string): BulkJob {
    const j = this.jobs.get(id);
    if (j === undefined || this.unreadable.has(id)) throw new ConnectError(`bulk job "${id}" not found`, Code.NotFound);
    return j;
  }

  async start(): Promise<this> {
    const sessions: Partial<ServiceImpl<typeof SessionService>> = {
      startBulkAction: (req, ctx) => {
        this.starts.push(req);
        this.refuseUnread(ctx);
        if (this.jobs.has(req.jobId)) throw new ConnectError(`bulk job "${req.jobId}" already exists`, Code.AlreadyExists);
        const job = create(BulkJobSchema, {
          id: req.jobId, action: req.action, filter: req.filter, labels: req.labels, reason: req.reason, by: "ana",
          status: BulkJobStatus.RUNNING, createdAtMs: ++this.clock,
        });
        this.jobs.set(job.id, job);
        this.loseAnswer();
        return { job };
      },
      getBulkJob: (req, ctx) => {
        this.gets.push(req.jobId);
        this.refuseUnread(ctx);
        const job = this.job(req.jobId);
        if (job.status === BulkJobStatus.RUNNING) {
          const n = (this.reads.get(job.id) ?? 0) + 1;
          this.reads.set(job.id, n);
          if (n === this.cancelAtRead) {
            job.status = BulkJobStatus.CANCELLED;
            job.cancelledBy = "bob";
          } else {
            job.acted += 10n;
            job.steps += 1n;
            if (n === this.readsToEnd) job.status = BulkJobStatus.DONE;
          }
        }
        return { job };
      },
      listBulkJobs: () => ({ jobs: [...this.jobs.values()].sort((a, b) => Number(b.createdAtMs - a.createdAtMs)) }),
      cancelBulkJob: (req) => {
        this.cancels.push(req.jobId);
        const job = this.job(req.jobId);
        if (job.status === BulkJobStatus.RUNNING) {
          job.status = BulkJobStatus.CANCELLED;
          job.cancelledBy = "ana";
        }
        this.loseAnswer();
        return { job };
      },
    };
    this.server = http2.createServer(connectNodeAdapter({ grpc: true, connect: false, grpcWeb: false, routes: (r) => r.service(SessionService, sessions) }));
    await new Promise<void>((res) => this.server!.listen(0, "127.0.0.1", () => res()));
    this.addr = `127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this;
  }

  async stop(): Promise<void> {
    await new Promise<void>((res) => {
      this.server?.close(() => res());
      setTimeout(res, 200); // open sessions would keep close waiting
    });
  }
}

/** Runs body against a fresh fake node and a client of it. */
async function withNode(body: (client: Client, node: BulkNode) => Promise<void>): Promise<void> {
  const node = await new BulkNode().start();
  const ch = dial(node.addr, { token: "" });
  try {
    await body(new Client(ch), node);
  } finally {
    ch.close();
    await node.stop();
  }
}

/** The error p rejects with. */
async function failure(p: Promise<unknown>, name = ""): Promise<unknown> {
  try {
    await p;
  } catch (e) {
    return e;
  }
  assert.fail(`${name}: resolved; want a rejection`);
}

/** p, or a failure after ms (so that a wait that never ends fails the test rather than hang it). */
function within<T>(p: Promise<T>, ms = 5000): Promise<T> {
  let t: NodeJS.Timeout;
  const late = new Promise<never>((_, rej) => { t = setTimeout(() => rej(new Error(`not settled within ${ms} ms`)), ms); });
  return Promise.race([p, late]).finally(() => clearTimeout(t));
}

const labelsOf = (m: { labels: { key: string; value: string }[] }) => m.labels.map((l) => `${l.key}=${l.value}`);
const { RUNNING, DONE, CANCELLED } = BulkJobStatus;

describe("bulk jobs", () => {
  it("startBulkAction sends the fields given and resolves the job", async () => {
    await withNode(async (client, node) => {
      const cancel = await client.startBulkAction({
        action: "cancel", filter: { labels: { batch: "nightly" }, status: "running", agent: "support", createdFromMs: 1767000000000 },
        reason: "batch stopped", jobId: "b1",
      });
      const req = node.starts[0];
      assert.deepEqual([req.action, req.reason, req.jobId, req.all], [BulkAction.CANCEL, "batch stopped", "b1", false]);
      const f = req.filter!;
      assert.deepEqual([f.status, f.agent, f.createdFromMs, labelsOf(f)], [SessionStatus.RUNNING, "support", 1767000000000n, ["batch=nightly"]]);
      assert.deepEqual([cancel.id, cancel.action, cancel.status, cancel.reason], ["b1", BulkAction.CANCEL, RUNNING, "batch stopped"]);

      // No id given: the client drew one, so the call can be retried.
      const label = await client.startBulkAction({ action: "label", filter: { parentId: "p1", status: SessionStatus.IDLE }, labels: { owner: "ana", team: "a" } });
      const req2 = node.starts[1];
      assert.match(req2.jobId, /^bulk-[0-9a-f]{16}$/);
      assert.deepEqual([req2.action, req2.filter?.parentId, req2.filter?.status, labelsOf(req2)], [BulkAction.LABEL, "p1", SessionStatus.IDLE, ["owner=ana", "team=a"]]);
      assert.deepEqual([label.id, labelsOf(label)], [req2.jobId, ["owner=ana", "team=a"]]);

      const del = await client.startBulkAction({ action: "delete", all: true });
      const req3 = node.starts[2];
      assert.deepEqual([req3.action, req3.all], [BulkAction.DELETE, true]);
      assert.ok(req3.filter === undefined || equals(BulkFilterSchema, req3.filter, create(BulkFilterSchema)), "no filter sent");
      assert.equal(del.id, req3.jobId);
      assert.notEqual(del.id, label.id);
      assert.equal(node.starts.length, 3);
      assert.deepEqual(node.gets, []);
    });
  });

  it("getBulkJob, listBulkJobs and cancelBulkJob resolve the jobs", async () => {
    await withNode(async (client, node) => {
      const a = await client.startBulkAction({ action: "close", filter: { agent: "old" }, jobId: "a" });
      await client.startBulkAction({ action: "resume", filter: { status: "errored" }, jobId: "b" });
      assert.deepEqual([a.status, a.acted], [RUNNING, 0n]);
      const got = await client.getBulkJob("a");
      assert.deepEqual([got.id, got.action, got.filter?.agent, got.status, got.acted], ["a", BulkAction.CLOSE, "old", RUNNING, 10n]);
      assert.deepEqual((await client.listBulkJobs()).map((j) => j.id), ["b", "a"]); // newest first
      const cancelled = await client.cancelBulkJob("b");
      assert.deepEqual([cancelled.id, cancelled.status, cancelled.cancelledBy], ["b", CANCELLED, "ana"]);
      const again = await client.cancelBulkJob("b"); // an ended job is left as it is
      assert.deepEqual([again.status, again.cancelledBy], [CANCELLED, "ana"]);
      const unknown = await failure(client.getBulkJob("nobody"));
      assert.deepEqual([codeOf(unknown), messageOf(unknown)], [Code.NotFound, 'bulk job "nobody" not found']);
      assert.equal(codeOf(await failure(client.cancelBulkJob("nobody"))), Code.NotFound);
      assert.deepEqual(node.gets, ["a", "nobody"]); // a refusal is not repeated
      assert.deepEqual(node.cancels, ["b", "b", "nobody"]);
    });
  });

  for (const jobId of ["b1", undefined]) {
    it(`a start ${jobId ? "with" : "without"} a job id whose answer was lost resolves the job it started`, async () => {
      await withNode(async (client, node) => {
        node.lose = 1;
        const got = await client.startBulkAction({ action: "cancel", filter: { labels: { batch: "nightly" } }, jobId });
        // The lost answer, the repeat (same id) that met AlreadyExists, then
        // the read: one job started, the one resolved.
        const ids = node.starts.map((r) => r.jobId);
        assert.equal(ids.length, 2);
        assert.equal(ids[0], ids[1]);
        if (jobId) assert.equal(ids[0], jobId);
        assert.deepEqual([...node.jobs.keys()], [ids[0]]);
        assert.deepEqual(node.gets, [ids[0]]);
        assert.deepEqual([got.id, got.action, got.status], [ids[0], BulkAction.CANCEL, RUNNING]);
      });
    });
  }

  it("a start refused unread is repeated and starts one job", async () => {
    await withNode(async (client, node) => {
      node.unread = 2;
      const got = await client.startBulkAction({ action: "close", filter: { agent: "old" } });
      assert.equal(node.starts.length, 3);
      assert.deepEqual([...node.jobs.keys()], [got.id]);
      assert.deepEqual(node.gets, []);
    });
  });

  it("throws AlreadyExists unless the job of the id is this one", async () => {
    await withNode(async (client, node) => {
      // First try: the id is another job's, nothing of ours was tried.
      await client.startBulkAction({ action: "close", filter: { agent: "old" }, jobId: "taken" });
      const first = await failure(client.startBulkAction({ action: "close", filter: { agent: "old" }, jobId: "taken" }));
      assert.deepEqual([codeOf(first), messageOf(first)], [Code.AlreadyExists, 'bulk job "taken" already exists']);
      assert.deepEqual(node.gets, []);
      // A repeat meets a job of that id with another action, and one it cannot read.
      node.unread = 1;
      const other = await failure(client.startBulkAction({ action: "cancel", filter: { agent: "old" }, jobId: "taken" }));
      assert.deepEqual([codeOf(other), messageOf(other)], [Code.AlreadyExists, 'bulk job "taken" already exists']);
      await client.startBulkAction({ action: "close", filter: { agent: "old" }, jobId: "hidden" });
      node.unreadable.add("hidden");
      node.unread = 1;
      const hidden = await failure(client.startBulkAction({ action: "close", filter: { agent: "old" }, jobId: "hidden" }));
      assert.deepEqual([codeOf(hidden), messageOf(hidden)], [Code.AlreadyExists, 'bulk job "hidden" already exists']);
      assert.deepEqual(node.gets, ["taken", "hidden"]);
      assert.equal(node.jobs.get("taken")?.action, BulkAction.CLOSE);
    });
  });

  it("a cancel whose answer was lost is retried", async () => {
    await withNode(async (client, node) => {
      await client.startBulkAction({ action: "resume", jobId: "r" });
      node.lose = 1;
      const got = await client.cancelBulkJob("r");
      assert.deepEqual(node.cancels, ["r", "r"]);
      assert.deepEqual([got.id, got.status], ["r", CANCELLED]);
    });
  });

  it("waitBulkJob resolves the job when it is done", async () => {
    await withNode(async (client, node) => {
      await client.startBulkAction({ action: "cancel", filter: { labels: { batch: "nightly" } }, jobId: "w" });
      const seen: [BulkJobStatus, bigint][] = [];
      const got = await within(client.waitBulkJob("w", { intervalMs: 10, onProgress: (j) => seen.push([j.status, j.acted]) }));
      assert.deepEqual([got.id, got.status, got.acted, got.steps], ["w", DONE, 30n, 3n]);
      assert.deepEqual(seen, [[RUNNING, 10n], [RUNNING, 20n], [DONE, 30n]]);
      assert.deepEqual(node.gets, ["w", "w", "w"]); // no read after the job ended
    });
  });

  it("waitBulkJob resolves the job when it is cancelled", async () => {
    await withNode(async (client, node) => {
      node.readsToEnd = 0;
      node.cancelAtRead = 2;
      await client.startBulkAction({ action: "close", filter: { agent: "old" }, jobId: "w" });
      const got = await within(client.waitBulkJob("w", { intervalMs: 10 }));
      assert.deepEqual([got.status, got.cancelledBy, got.acted], [CANCELLED, "bob", 10n]);
      assert.deepEqual(node.gets, ["w", "w"]);
    });
  });

  it("waitBulkJob gives up at waitMs and leaves the job running", async () => {
    await withNode(async (client, node) => {
      node.readsToEnd = 0;
      await client.startBulkAction({ action: "close", filter: { agent: "old" }, jobId: "w" });
      const t0 = Date.now();
      const e = await within(failure(client.waitBulkJob("w", { intervalMs: 50, waitMs: 300 })));
      const took = Date.now() - t0;
      assert.equal(codeOf(e), Code.DeadlineExceeded);
      assert.match(messageOf(e), /^bulk job w still running after 300 ms \(\d+0 acted on, \d+ steps\)$/);
      assert.ok(took >= 290, `gave up after ${took} ms, before its 300`);
      assert.equal(node.jobs.get("w")?.status, RUNNING);
      assert.deepEqual(node.cancels, []);
      assert.ok(node.gets.length >= 1, `${node.gets.length} reads`);
    });
  });

  it("waitBulkJob throws Canceled when its signal aborts, and a read that fails", async () => {
    await withNode(async (client, node) => {
      node.readsToEnd = 0;
      await client.startBulkAction({ action: "close", filter: { agent: "old" }, jobId: "w" });
      const ac = new AbortController();
      setTimeout(() => ac.abort(), 100);
      const aborted = await within(failure(client.waitBulkJob("w", { intervalMs: 20 }, { signal: ac.signal })));
      assert.equal(codeOf(aborted), Code.Canceled);
      assert.match(messageOf(aborted), /^waitBulkJob: bulk job w: aborted$/);
      const unknown = await within(failure(client.waitBulkJob("nobody", { intervalMs: 10, waitMs: 5000 })));
      assert.deepEqual([codeOf(unknown), messageOf(unknown)], [Code.NotFound, 'bulk job "nobody" not found']);
    });
  });

  it("refuses bad input before any call", async () => {
    await withNode(async (client, node) => {
      const start = (init: Record<string, unknown>) => client.startBulkAction({ action: "close", ...init } as StartBulkActionInit);
      // Each call made in turn, so no rejection waits unhandled.
      const refused: [string, () => Promise<unknown>, ErrorConstructor, RegExp][] = [
        ["an unknown action", () => start({ action: "stop" }), RangeError, /^startBulkAction: action "stop": use cancel, resume, close, delete, label$/],
        ["no action", () => start({ action: undefined }), RangeError, /^startBulkAction: action undefined: use/],
        ["an inherited name", () => start({ action: "toString" }), RangeError, /^startBulkAction: action "toString"/],
        ["a label job without labels", () => start({ action: "label", filter: { agent: "a" } }), RangeError, /^startBulkAction: a label job needs labels/],
        ["a label job with no label", () => start({ action: "label", labels: {} }), RangeError, /^startBulkAction: a label job needs labels/],
        ["labels on a close", () => start({ labels: { a: "b" } }), RangeError, /^startBulkAction: labels are for a label job, not a close job$/],
        ["a reason on a resume", () => start({ action: "resume", reason: "why" }), RangeError, /^startBulkAction: a reason is for a cancel job, not a resume job$/],
        ["a delete of everything", () => start({ action: "delete" }), RangeError, /^startBulkAction: a delete with no filter deletes every session: set all: true/],
        ["a delete with an empty filter", () => start({ action: "delete", filter: { agent: "", labels: {} } }), RangeError, /a delete with no filter/],
        ["labels as a list", () => start({ action: "label", labels: ["a=b"] }), TypeError, /^startBulkAction: labels must be an object of key to value$/],
        ["a label value not a string", () => start({ action: "label", labels: { a: 1 } }), TypeError, /^startBulkAction: labels: "a"'s value must be a string, not number$/],
        ["an unknown filter field", () => start({ filter: { state: "running" } }), TypeError, /^startBulkAction: filter: unknown field "state": want one of/],
        ["an unknown status", () => start({ filter: { status: "asleep" } }), RangeError, /^startBulkAction: filter status "asleep": use idle, running/],
        ["an inherited status name", () => start({ filter: { status: "toString" } }), RangeError, /^startBulkAction: filter status "toString": use idle, running/],
        ["a status number not one", () => start({ filter: { status: 99 } }), TypeError, /^startBulkAction: filter status must be a name or a SessionStatus, not 99$/],
        ["an agent not a string", () => start({ filter: { agent: 3 } }), TypeError, /^startBulkAction: filter agent must be a string, not number$/],
        ["a time below 0", () => start({ filter: { createdFromMs: -1 } }), RangeError, /^startBulkAction: filter createdFromMs \(Unix ms\) must be a whole number from 0/],
        ["filter labels a string", () => start({ filter: { labels: "a=b" } }), TypeError, /^startBulkAction: filter labels must be an object/],
        ["a filter string", () => start({ filter: "label=a=b" }), TypeError, /^startBulkAction: filter must be an object of BulkFilterInit fields$/],
        ["a reason not a string", () => start({ action: "cancel", reason: null }), TypeError, /^startBulkAction: reason must be a string, not null$/],
        ["a job id not a string", () => start({ jobId: 5 }), TypeError, /^startBulkAction: jobId must be a string, not number$/],
        ["all not a boolean", () => start({ action: "delete", all: "yes" }), TypeError, /^startBulkAction: all must be a boolean, not string$/],
        ["no init", () => client.startBulkAction(undefined as never), TypeError, /^startBulkAction: give \{ action, filter, \.\.\. \}$/],
        ["a wait interval of 0", () => client.waitBulkJob("w", { intervalMs: 0 }), RangeError, /^waitBulkJob: intervalMs must be a number above 0, not 0$/],
        ["a wait below 0", () => client.waitBulkJob("w", { waitMs: -1 }), RangeError, /^waitBulkJob: waitMs must be a number from 0, not -1$/],
      ];
      for (const [name, p, type, want] of refused) {
        const e = await failure(p(), name);
        assert.ok(e instanceof type, `${name}: ${String(e)} is not a ${type.name}`);
        assert.match((e as Error).message, want, name);
      }
      assert.equal(node.starts.length, 0, "no start went out");
      assert.equal(node.gets.length, 0, "no read went out");
    });
  });
});
