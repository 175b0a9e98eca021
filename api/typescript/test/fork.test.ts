// forkSession against a fake node on 127.0.0.1: the request's fields sent,
// the fork resolved, a fork with an id retried after its answer was lost
// resolves the fork that try made, one without an id is repeated only when a
// node refused it unread, refusals thrown with their code, bad input refused
// before any call.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import http2 from "node:http2";
import type { AddressInfo } from "node:net";
import { create } from "@bufbuild/protobuf";
import { Code, ConnectError, type HandlerContext, type ServiceImpl } from "@connectrpc/connect";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import { SessionService, type ForkSessionRequest } from "../gen/dex/v1/sessions_pb.js";
import { SessionSchema, SessionStatus, type Session } from "../gen/dex/v1/types_pb.js";
import { Client, codeOf, dial, messageOf, type ForkSessionInit } from "../src/index.js";

/**
 * Knows session "src" (entries 1 to 4, agent bot@1, label team=red) and
 * "taken" (not a fork). lose forks are made but answered Unavailable (the
 * answer lost); unread calls are refused as a follower refuses them, naming
 * the leader (itself), before anything is made. GetSession answers NotFound
 * for the ids in unreadable.
 */
class ForkNode {
  addr = "";
  requests: ForkSessionRequest[] = [];
  gets: string[] = [];
  lose = 0;
  unread = 0;
  unreadable = new Set<string>();
  private drawn = 0;
  sessions = new Map<string, Session>([
    ["src", create(SessionSchema, { id: "src", agent: "bot@1", labels: [{ key: "team", value: "red" }] })],
    ["taken", create(SessionSchema, { id: "taken", agent: "bot@1" })],
  ]);
  private server?: http2.Http2Server;

  private fork(req: ForkSessionRequest, ctx: HandlerContext): { session: Session } {
    this.requests.push(req);
    if (this.unread > 0) {
      this.unread--;
      ctx.responseTrailer.set("dex-leader", this.addr);
      throw new ConnectError("not the leader", Code.Unavailable);
    }
    const src = this.sessions.get(req.sourceSessionId);
    if (src === undefined || src.forkedFrom !== "") throw new ConnectError(`session "${req.sourceSessionId}" not found`, Code.NotFound);
    if (req.atSeq > 4n) throw new ConnectError(`session src has no history entry ${req.atSeq}: its entries go up to 4`, Code.InvalidArgument);
    if (this.sessions.has(req.sessionId)) throw new ConnectError(`session "${req.sessionId}" already exists`, Code.AlreadyExists);
    const id = req.sessionId || `ses-drawn${++this.drawn}`;
    const fork = create(SessionSchema, {
      id, agent: req.agent || src.agent, forkedFrom: src.id, forkedAtSeq: req.atSeq,
      status: req.message ? SessionStatus.RUNNING : SessionStatus.IDLE, labels: req.labels.length > 0 ? req.labels : src.labels,
    });
    this.sessions.set(id, fork);
    if (this.lose > 0) {
      this.lose--;
      throw new ConnectError("leadership lost", Code.Unavailable);
    }
    return { session: fork };
  }

  async start(): Promise<this> {
    const sessions: Partial<ServiceImpl<typeof SessionService>> = {
      forkSession: (req, ctx) => this.fork(req, ctx),
      getSession: (req) => {
        this.gets.push(req.sessionId);
        const s = this.sessions.get(req.sessionId);
        if (s === undefined || this.unreadable.has(req.sessionId)) throw new ConnectError(`session "${req.sessionId}" not found`, Code.NotFound);
        return { session: s };
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
async function withNode(body: (client: Client, node: ForkNode) => Promise<void>): Promise<void> {
  const node = await new ForkNode().start();
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

const labelsOf = (s: { labels: { key: string; value: string }[] }) => s.labels.map((l) => `${l.key}=${l.value}`);

describe("forkSession", () => {
  it("sends the fields given and resolves the fork", async () => {
    await withNode(async (client, node) => {
      const full = await client.forkSession({
        sourceSessionId: "src", atSeq: 3, message: "try the other library", labels: { team: "blue", env: "prod" }, agent: "bot@2", sessionId: "f1",
      });
      const req = node.requests[0];
      assert.deepEqual([req.sourceSessionId, req.atSeq, req.message, req.agent, req.sessionId], ["src", 3n, "try the other library", "bot@2", "f1"]);
      assert.deepEqual(labelsOf(req), ["team=blue", "env=prod"]);
      assert.deepEqual([full.id, full.forkedFrom, full.forkedAtSeq, full.agent, full.status], ["f1", "src", 3n, "bot@2", SessionStatus.RUNNING]);
      assert.deepEqual(labelsOf(full), ["team=blue", "env=prod"]);

      // Nothing optional given: nothing sent for it, so the fork has the
      // source's agent and labels and an id the cluster drew; a bigint seq.
      const bare = await client.forkSession({ sourceSessionId: "src", atSeq: 4n });
      const req2 = node.requests[1];
      assert.deepEqual([req2.atSeq, req2.message, req2.agent, req2.sessionId, req2.labels.length], [4n, "", "", "", 0]);
      assert.deepEqual([bare.id, bare.forkedFrom, bare.forkedAtSeq, bare.agent, bare.status], ["ses-drawn1", "src", 4n, "bot@1", SessionStatus.IDLE]);
      assert.deepEqual(labelsOf(bare), ["team=red"]);
      assert.equal(node.requests.length, 2);
      assert.deepEqual(node.gets, []);
    });
  });

  it("with an id, resolves the fork an earlier try made when its answer was lost", async () => {
    await withNode(async (client, node) => {
      node.lose = 1;
      const got = await client.forkSession({ sourceSessionId: "src", atSeq: 3, sessionId: "f1" });
      assert.deepEqual([got.id, got.forkedFrom, got.forkedAtSeq], ["f1", "src", 3n]);
      // The lost answer, the repeat that met AlreadyExists, then the read.
      assert.deepEqual(node.requests.map((r) => r.sessionId), ["f1", "f1"]);
      assert.deepEqual(node.gets, ["f1"]);
      assert.deepEqual([...node.sessions.keys()].sort(), ["f1", "src", "taken"]); // one fork made
    });
  });

  it("without an id, is repeated only when nothing was made", async () => {
    await withNode(async (client, node) => {
      // The answer was lost after the fork was made: a repeat would make a
      // second one, so the error is thrown after one try.
      node.lose = 1;
      const lost = await failure(client.forkSession({ sourceSessionId: "src", atSeq: 3 }));
      assert.equal(codeOf(lost), Code.Unavailable);
      assert.equal(node.requests.length, 1);
      // A follower's refusal changed nothing: repeated, one fork made.
      node.unread = 1;
      const got = await client.forkSession({ sourceSessionId: "src", atSeq: 2 });
      assert.equal(node.requests.length, 3);
      assert.deepEqual([got.id, got.forkedAtSeq], ["ses-drawn2", 2n]);
      assert.deepEqual(node.gets, []);
    });
  });

  it("throws AlreadyExists unless the session of the id is this fork", async () => {
    await withNode(async (client, node) => {
      // First try: the id is someone else's, nothing of ours was tried.
      const first = await failure(client.forkSession({ sourceSessionId: "src", atSeq: 3, sessionId: "taken" }));
      assert.equal(codeOf(first), Code.AlreadyExists);
      assert.deepEqual(node.gets, []);
      // A repeat meets a session of that id that is not this fork: one that
      // is not a fork, a fork at another entry, a fork that cannot be read.
      node.sessions.set("f-old", create(SessionSchema, { id: "f-old", forkedFrom: "src", forkedAtSeq: 2n }));
      node.sessions.set("f-gone", create(SessionSchema, { id: "f-gone", forkedFrom: "src", forkedAtSeq: 3n }));
      node.unreadable.add("f-gone");
      for (const id of ["taken", "f-old", "f-gone"]) {
        node.unread = 1;
        const e = await failure(client.forkSession({ sourceSessionId: "src", atSeq: 3, sessionId: id }));
        assert.deepEqual([codeOf(e), messageOf(e)], [Code.AlreadyExists, `session "${id}" already exists`], id);
      }
      assert.deepEqual(node.gets, ["taken", "f-old", "f-gone"]);
    });
  });

  it("throws a refusal with its code, without repeating it", async () => {
    await withNode(async (client, node) => {
      const unknown = await failure(client.forkSession({ sourceSessionId: "nobody", atSeq: 1, sessionId: "f2" }));
      assert.deepEqual([codeOf(unknown), messageOf(unknown)], [Code.NotFound, 'session "nobody" not found']);
      const beyond = await failure(client.forkSession({ sourceSessionId: "src", atSeq: 9, sessionId: "f3" }));
      assert.deepEqual([codeOf(beyond), messageOf(beyond)], [Code.InvalidArgument, "session src has no history entry 9: its entries go up to 4"]);
      assert.equal(node.requests.length, 2);
      assert.deepEqual([...node.sessions.keys()].sort(), ["src", "taken"]);
    });
  });

  it("refuses bad input before any call", async () => {
    await withNode(async (client, node) => {
      const fork = (init: Partial<ForkSessionInit> & Record<string, unknown>) => client.forkSession({ sourceSessionId: "src", atSeq: 3, ...init } as ForkSessionInit);
      // Each call made in turn, so no rejection waits unhandled.
      const refused: [string, () => Promise<unknown>, ErrorConstructor, RegExp][] = [
        ["atSeq 0", () => fork({ atSeq: 0 }), RangeError, /^forkSession: atSeq must be a whole number from 1 to 18446744073709551615, not 0$/],
        ["atSeq -2", () => fork({ atSeq: -2 }), RangeError, /atSeq must be a whole number from 1 to .*, not -2$/],
        ["atSeq 2^64", () => fork({ atSeq: 1n << 64n }), RangeError, /atSeq must be a whole number .*, not 18446744073709551616n$/],
        ["atSeq 2.5", () => fork({ atSeq: 2.5 }), RangeError, /atSeq must be a whole number .*, not 2.5$/],
        ["atSeq a string", () => fork({ atSeq: "3" as never }), RangeError, /atSeq must be a whole number .*, not "3"$/],
        ["atSeq left out", () => fork({ atSeq: undefined }), RangeError, /atSeq must be a whole number .*, not undefined$/],
        ["an empty source", () => fork({ sourceSessionId: "" }), RangeError, /^forkSession: sourceSessionId is empty: give the id of the session to fork$/],
        ["a source not a string", () => fork({ sourceSessionId: 5 as never }), TypeError, /^forkSession: sourceSessionId must be a string, not number$/],
        ["empty labels", () => fork({ labels: {} }), RangeError, /^forkSession: labels is empty: a fork has the source's labels \(left out\)/],
        ["labels as a list", () => fork({ labels: ["team=red"] as never }), TypeError, /^forkSession: labels must be an object of key to value$/],
        ["labels as a Map", () => fork({ labels: new Map([["team", "red"]]) as never }), TypeError, /labels must be an object of key to value/],
        ["a label value not a string", () => fork({ labels: { team: 5 } as never }), TypeError, /^forkSession: label "team"'s value must be a string, not number$/],
        ["a message not a string", () => fork({ message: Buffer.from("hi") as never }), TypeError, /^forkSession: message must be a string, not object$/],
        ["an agent not a string", () => fork({ agent: 2 as never }), TypeError, /^forkSession: agent must be a string, not number$/],
        ["an id not a string", () => fork({ sessionId: 12 as never }), TypeError, /^forkSession: sessionId must be a string, not number$/],
        ["no init", () => client.forkSession(undefined as never), TypeError, /^forkSession: give \{ sourceSessionId, atSeq, \.\.\. \}$/],
      ];
      for (const [name, p, type, want] of refused) {
        const e = await failure(p(), name);
        assert.ok(e instanceof type, `${name}: ${String(e)} is not a ${type.name}`);
        assert.match((e as Error).message, want, name);
      }
      assert.equal(node.requests.length, 0, "no call went out");
    });
  });
});
