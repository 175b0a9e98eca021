// The client on a partitioned cluster: a call that names a session (or a
// Step, or a create's parent or id) goes to the leader of the session's
// partition once the channel has learned it from the trailers of its calls;
// a create without an id goes to the node in use. Against fake nodes on
// 127.0.0.1 that set the trailers a real node sets; the route table mirrored
// from api/wirerules/routes.go.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import http2 from "node:http2";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { create } from "@bufbuild/protobuf";
import { Code, ConnectError, type HandlerContext, type ServiceImpl } from "@connectrpc/connect";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import { SessionService } from "../gen/dex/v1/sessions_pb.js";
import { EventSchema, SessionSchema } from "../gen/dex/v1/types_pb.js";
import { Health, HealthCheckResponse_ServingStatus } from "../gen/grpc/health/v1/health_pb.js";
import { type Channel } from "../src/channel.js";
import { Client, dial, newSessionId, partitionOf } from "../src/index.js";
import { parentField, sessionOfRequest, sessionRoutes } from "../src/partitions.js";

const routesGo = join(import.meta.dirname, "../../../wirerules/routes.go");

describe("the route table", () => {
  it("mirrors the cluster's for the SessionService", { skip: existsSync(routesGo) ? false : "api/wirerules/routes.go is not beside this library" }, () => {
    const text = readFileSync(routesGo, "utf8");
    const go = new Map<string, { kind: string; field?: number }>();
    for (const m of text.matchAll(/"(\/dex\.v1\.SessionService\/\w+)":\s*\{Kind:\s*(\w+)(?:,\s*Field:\s*(\d+))?\}/g)) {
      go.set(m[1], { kind: m[2], field: m[3] === undefined ? undefined : Number(m[3]) });
    }
    assert.equal(go.size, SessionService.methods.length, "routes.go should route every SessionService method");
    const named = [...go].filter(([, r]) => ["BySession", "ByStep", "Create"].includes(r.kind));
    assert.deepEqual([...sessionRoutes.keys()].sort(), named.map(([m]) => m).sort());
    for (const [path, r] of named) {
      const method = SessionService.methods.find((m) => `/dex.v1.SessionService/${m.name}` === path)!;
      assert.equal(sessionRoutes.get(path)?.kind, r.kind, path);
      assert.equal(method.input.fields.find((f) => f.number === r.field)?.name, sessionRoutes.get(path)?.field, path);
    }
    const parent = /ParentField protoreflect\.FieldNumber = (\d+)/.exec(text);
    assert.ok(parent);
    assert.equal(SessionService.method.createSession.input.fields.find((f) => f.number === Number(parent[1]))?.name, parentField);
  });

  it("computes the cluster's partition of a session", () => {
    // api/wirerules/partitions_test.go's vectors.
    assert.equal(partitionOf("a", 3), 0xe40c292c % 3);
    assert.equal(partitionOf("", 7), 0x811c9dc5 % 7);
    assert.equal(partitionOf("foobar", 64), 0xbf9cf968 % 64);
    assert.equal(partitionOf("ses-0123456789abcdef", 1), 0);
  });

  it("reads the session a request names", () => {
    // api/wirerules/routes_test.go's cases, for the SessionService.
    const m = SessionService.method;
    const cases: [Parameters<typeof sessionOfRequest>[0], object, string][] = [
      [m.createSession, { sessionId: "ses-child", parentId: "ses-parent" }, "ses-parent"],
      [m.createSession, { sessionId: "ses-root" }, "ses-root"],
      [m.createSession, { message: "hi" }, ""],
      [m.answerQuestion, { stepId: "ses-a-s12" }, "ses-a"],
      [m.answerQuestion, { stepId: "ses-a-s012" }, ""],
      [m.resolveApproval, { stepId: "ses-b-s2-s3" }, "ses-b-s2"],
      [m.reconcileOutcome, { stepId: "-s1" }, ""],
      [m.reconcileOutcome, { stepId: "ses-a-s18446744073709551616" }, ""],
      [m.sendMessage, { sessionId: "ses-c", text: "hi" }, "ses-c"],
      [m.watchSession, { sessionId: "ses-d" }, "ses-d"],
      [m.listSessions, {}, ""],
    ];
    assert.deepEqual(cases.map(([method, req]) => sessionOfRequest(method, req)), cases.map(([, , want]) => want));
  });
});

const partitions = 3;

/** A new session id of partition k. */
function idIn(k: number): string {
  for (;;) {
    const id = newSessionId();
    if (partitionOf(id, partitions) === k) return id;
  }
}

/** A call a node got: the node, the method and the session it names. */
interface Call {
  addr: string;
  method: string;
  session: string;
}

/**
 * One node of a fake cluster of count partitions, each led by the node
 * leaders names (node k leads partition k): it serves every call and sets
 * the trailers a real node sets, naming the partition's leader when it is
 * another node. refuse answers its next calls with an error instead.
 */
class SessionNode {
  addr = "";
  count = partitions;
  leaders: string[] = [];
  refuse: ConnectError[] = [];
  private server?: http2.Http2Server;

  constructor(private readonly calls: Call[]) {}

  /** Records a call and sets its trailers: one of session (or partition k) is forwarded when this node does not lead it. */
  private route(ctx: HandlerContext, method: string, session: string, k = session === "" ? -1 : partitionOf(session, this.count)): void {
    this.calls.push({ addr: this.addr, method, session });
    const e = this.refuse.shift();
    if (e) throw e;
    if (k < 0) return;
    ctx.responseTrailer.set("dex-partitions", String(this.count));
    if (this.leaders[k] !== this.addr) ctx.responseTrailer.set("dex-partition-leader", this.leaders[k]);
  }

  /** A watch: one event after afterSeq, then the end of the stream. */
  private async *watch(sessionId: string, afterSeq: bigint, ctx: HandlerContext) {
    this.route(ctx, "watchSession", sessionId);
    yield create(EventSchema, { seq: afterSeq + 1n });
  }

  async start(): Promise<void> {
    const sessions: Partial<ServiceImpl<typeof SessionService>> = {
      createSession: (req, ctx) => {
        if (req.parentId === "" && req.sessionId === "") {
          // No id: this node draws one in the partition it leads.
          const mine = this.leaders.indexOf(this.addr);
          this.route(ctx, "createSession", "", mine);
          return { session: create(SessionSchema, { id: idIn(mine) }) };
        }
        this.route(ctx, "createSession", req.parentId || req.sessionId);
        return { session: create(SessionSchema, { id: req.sessionId || idIn(partitionOf(req.parentId, partitions)), parentId: req.parentId }) };
      },
      sendMessage: (req, ctx) => {
        this.route(ctx, "sendMessage", req.sessionId);
        return {};
      },
      getSession: (req, ctx) => {
        this.route(ctx, "getSession", req.sessionId);
        return { session: create(SessionSchema, { id: req.sessionId }) };
      },
      resolveApproval: (req, ctx) => {
        this.route(ctx, "resolveApproval", req.stepId.slice(0, req.stepId.lastIndexOf("-s")));
        return {};
      },
      listSessions: (_req, ctx) => {
        this.route(ctx, "listSessions", "");
        return {};
      },
      watchSession: (req, ctx) => this.watch(req.sessionId, req.afterSeq, ctx),
    };
    const health: Partial<ServiceImpl<typeof Health>> = { check: () => ({ status: HealthCheckResponse_ServingStatus.SERVING }) };
    this.server = http2.createServer(connectNodeAdapter({
      grpc: true, connect: false, grpcWeb: false,
      routes: (r) => {
        r.service(SessionService, sessions);
        r.service(Health, health);
      },
    }));
    await new Promise<void>((res) => this.server!.listen(0, "127.0.0.1", () => res()));
    this.addr = `127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  async stop(): Promise<void> {
    await new Promise<void>((res) => {
      this.server?.close(() => res());
      setTimeout(res, 200); // open sessions would keep close waiting
    });
  }
}

/** Runs body against three fresh nodes and a client given all three (or, with one, the first only). */
async function withNodes(body: (nodes: SessionNode[], calls: Call[], client: Client, ch: Channel) => Promise<void>, one = false): Promise<void> {
  const calls: Call[] = [];
  const nodes = [new SessionNode(calls), new SessionNode(calls), new SessionNode(calls)];
  await Promise.all(nodes.map((n) => n.start()));
  for (const n of nodes) n.leaders = nodes.map((x) => x.addr);
  const ch = dial(one ? nodes[0].addr : `dex:///${nodes.map((n) => n.addr).join(",")}`, { token: "" });
  try {
    await body(nodes, calls, new Client(ch), ch);
  } finally {
    ch.close();
    await Promise.all(nodes.map((n) => n.stop()));
  }
}

/** The node each call since index n went to. */
function where(calls: Call[], n: number): string[] {
  return calls.slice(n).map((c) => c.addr);
}

/** Every event of a watch (the fake's ends after one). */
async function watched(client: Client, sessionId: string): Promise<bigint[]> {
  const seqs: bigint[] = [];
  for await (const ev of client.watchSession(sessionId)) seqs.push(ev.seq);
  return seqs;
}

describe("a client on a partitioned cluster", () => {
  it("sends a session's calls to its partition's leader once learned", async () => {
    await withNodes(async (nodes, calls, client, ch) => {
      const [a, b, c] = nodes.map((n) => n.addr);
      const [s0, s1, s2] = [idIn(0), idIn(1), idIn(2)];
      // The first call goes to the node in use, A, which forwards it and
      // names B: its trailers give the count and B at once.
      await client.createSession({ sessionId: s1 });
      await client.sendMessage(s1, "hi");
      await client.getSession(s1);
      assert.deepEqual(where(calls, 0), [a, b, b]);
      assert.equal(ch.partitionLeader(1), b);
      // Partition 2: not known yet, so through A once, then at C; a Step's
      // call goes with its session.
      let n = calls.length;
      await client.getSession(s2);
      await client.getSession(s2);
      await client.resolveApproval(`${s2}-s4`, true);
      assert.deepEqual(where(calls, n), [a, c, c]);
      // A served partition 0's call itself: it leads it.
      n = calls.length;
      await client.sendMessage(s0, "hi");
      await client.getSession(s0);
      assert.deepEqual(where(calls, n), [a, a]);
      // A child goes to its parent's partition, whatever its own id.
      n = calls.length;
      const child = await client.createSession({ parentId: s2 });
      await client.createSession({ sessionId: "ses-chosen-child", parentId: s1 });
      assert.equal(child.parentId, s2);
      assert.deepEqual(where(calls, n), [c, b]);
      // A create without an id, and a call of no session, go to the node in
      // use (A draws the id in a partition it leads).
      n = calls.length;
      const made = await client.createSession({ message: "hello" });
      await client.listSessions();
      assert.deepEqual(where(calls, n), [a, a]);
      assert.equal(partitionOf(made.id, partitions), 0);
      // A watch of a session is opened at its partition's leader.
      n = calls.length;
      assert.deepEqual(await watched(client, s2), [1n]);
      assert.deepEqual(where(calls, n), [c]);
    });
  });

  it("sends every call to the node in use while no partition count is known", async () => {
    await withNodes(async (nodes, calls, client, ch) => {
      const a = nodes[0].addr;
      // A node of one partition says dex-partitions: 1.
      nodes[0].count = 1;
      nodes[0].leaders = [a];
      const s1 = idIn(1);
      await client.createSession({ sessionId: s1 });
      await client.getSession(s1);
      await client.sendMessage(s1, "hi");
      assert.deepEqual(where(calls, 0), [a, a, a]);
      assert.equal(ch.partitionLeader(1), "");
    });
  });

  it("forgets a partition's leader that fails, and learns it again", async () => {
    await withNodes(async (nodes, calls, client, ch) => {
      const [a, b] = nodes.map((n) => n.addr);
      const s1 = idIn(1);
      await client.getSession(s1);
      await client.getSession(s1);
      assert.deepEqual(where(calls, 0), [a, b]);
      // B does not answer: the retry goes to the node in use, A, which
      // forwards it and names B again; the next call goes to B.
      nodes[1].refuse.push(new ConnectError("connection reset", Code.Unavailable));
      let n = calls.length;
      await client.getSession(s1);
      assert.deepEqual(where(calls, n), [b, a]);
      assert.equal(ch.partitionLeader(1), b);
      await client.sendMessage(s1, "hi");
      assert.deepEqual(where(calls, n), [b, a, b]);
      // A refusal that is not the leader's failure keeps it.
      nodes[1].refuse.push(new ConnectError("no session", Code.NotFound, { "dex-partitions": "3" }));
      await assert.rejects(client.getSession(s1), (e: ConnectError) => e.code === Code.NotFound);
      assert.equal(ch.partitionLeader(1), b);
      // A watch broken by the leader goes again through A, whose trailers
      // name B when the stream ends.
      nodes[1].refuse.push(new ConnectError("connection reset", Code.Unavailable));
      n = calls.length;
      assert.deepEqual(await watched(client, s1), [1n]);
      assert.deepEqual(where(calls, n), [b, a]);
      assert.equal(ch.partitionLeader(1), b);
    });
  });

  it("given one address (a load balancer), sends every session call there", async () => {
    await withNodes(async (nodes, calls, client) => {
      for (const k of [1, 2, 1]) {
        const id = idIn(k);
        await client.createSession({ sessionId: id });
        await client.getSession(id);
      }
      assert.deepEqual(new Set(where(calls, 0)), new Set([nodes[0].addr]));
    }, true);
  });
});
