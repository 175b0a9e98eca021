// listSessions with a filter, listSessionsPage and setLabels against a fake
// node on 127.0.0.1: each filter field reaches the request, a filtered list
// follows the tokens through short and empty pages until the token is empty,
// a limit stops the reading, listSessions(o) with call options alone still
// lists everything, setLabels sends set and remove and is retried after an
// Unavailable, and bad input is refused before any call.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import http2 from "node:http2";
import type { AddressInfo } from "node:net";
import { create } from "@bufbuild/protobuf";
import { Code, ConnectError, type HandlerContext, type ServiceImpl } from "@connectrpc/connect";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import {
  ListSessionsRequestSchema, SessionOrder, SessionService, SessionSummarySchema, type ListSessionsRequest, type SetLabelsRequest,
} from "../gen/dex/v1/sessions_pb.js";
import { SessionSchema, SessionStatus, type Session } from "../gen/dex/v1/types_pb.js";
import { Client, codeOf, dial, messageOf } from "../src/index.js";

/** One page the node answers for a token: the ids of its sessions and the next token. */
interface Page {
  ids: string[];
  next: string;
}

/**
 * Answers ListSessions from pages, by the token asked (an unknown token is
 * InvalidArgument, as the cluster answers it), recording each request and
 * the deadline it came with. Keeps session "s1" (labels team=red, env=prod)
 * for SetLabels: lose changes are made but answered Unavailable (the answer
 * lost); unavailable calls are refused Unavailable before anything is made.
 */
class ListNode {
  addr = "";
  lists: ListSessionsRequest[] = [];
  /** Each ListSessions call's deadline (ms left) as the node saw it. */
  deadlines: (number | undefined)[] = [];
  pages = new Map<string, Page>([["", { ids: [], next: "" }]]);
  listUnavailable = 0;
  sets: SetLabelsRequest[] = [];
  lose = 0;
  unavailable = 0;
  session: Session = create(SessionSchema, { id: "s1", labels: [{ key: "env", value: "prod" }, { key: "team", value: "red" }] });
  private server?: http2.Http2Server;

  private list(req: ListSessionsRequest, ctx: HandlerContext) {
    this.lists.push(req);
    this.deadlines.push(ctx.timeoutMs());
    if (this.listUnavailable > 0) {
      this.listUnavailable--;
      throw new ConnectError("leadership lost", Code.Unavailable);
    }
    const page = this.pages.get(req.pageToken);
    if (page === undefined) throw new ConnectError(`page_token: not a token of this list`, Code.InvalidArgument);
    return { sessions: page.ids.map((id) => create(SessionSummarySchema, { id })), nextPageToken: page.next };
  }

  private setLabels(req: SetLabelsRequest) {
    this.sets.push(req);
    if (this.unavailable > 0) {
      this.unavailable--;
      throw new ConnectError("no leader", Code.Unavailable);
    }
    if (req.sessionId !== this.session.id) throw new ConnectError(`session "${req.sessionId}" not found`, Code.NotFound);
    // As the cluster applies it: the removed keys go, the set ones are put, sorted by key.
    const kept = this.session.labels.filter((l) => !req.remove.includes(l.key) && !req.set.some((s) => s.key === l.key));
    this.session.labels = [...kept, ...req.set].sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
    if (this.lose > 0) {
      this.lose--;
      throw new ConnectError("leadership lost", Code.Unavailable);
    }
    return { session: this.session };
  }

  async start(): Promise<this> {
    const sessions: Partial<ServiceImpl<typeof SessionService>> = {
      listSessions: (req, ctx) => this.list(req, ctx),
      setLabels: (req) => this.setLabels(req),
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
async function withNode(body: (client: Client, node: ListNode) => Promise<void>): Promise<void> {
  const node = await new ListNode().start();
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

/** A request's filter and order fields, the page's own left out. */
function filterOf(r: ListSessionsRequest) {
  return {
    status: r.status, agent: r.agent, labels: labelsOf(r), parentId: r.parentId, forkedFrom: r.forkedFrom,
    createdAfterMs: r.createdAfterMs, createdBeforeMs: r.createdBeforeMs, updatedAfterMs: r.updatedAfterMs, updatedBeforeMs: r.updatedBeforeMs,
    orderBy: r.orderBy, descending: r.descending,
  };
}

/** A request with no filter: what listSessions sent before it took one. */
const bare = filterOf(create(ListSessionsRequestSchema, {}));

describe("listSessions and listSessionsPage", () => {
  it("send every filter field given, and nothing else", async () => {
    await withNode(async (client, node) => {
      const want = {
        status: SessionStatus.IDLE, agent: "coder", labels: ["team=red", "env="], parentId: "p1", forkedFrom: "f0",
        createdAfterMs: 1767225600000n, createdBeforeMs: 1767312000000n, updatedAfterMs: 5n, updatedBeforeMs: 9007199254740993n,
        orderBy: SessionOrder.UPDATED, descending: true,
      };
      const filter = {
        status: "idle", agent: "coder", labels: { team: "red", env: "" }, parentId: "p1", forkedFrom: "f0",
        createdAfter: new Date("2026-01-01T00:00:00Z"), createdBefore: 1767312000000, updatedAfter: 5n, updatedBefore: 9007199254740993n,
        order: "updated", descending: true,
      } as const;
      await client.listSessions(filter);
      await client.listSessionsPage({ ...filter, pageSize: 50, pageToken: "" });
      assert.equal(node.lists.length, 2);
      assert.deepEqual(filterOf(node.lists[0]), want);
      assert.deepEqual(filterOf(node.lists[1]), want);
      assert.deepEqual([node.lists[0].pageSize, node.lists[1].pageSize], [0, 50]);

      // Each field alone: only it is set; a status as a SessionStatus, the other order.
      const one: [Parameters<Client["listSessions"]>[0], Partial<typeof want>][] = [
        [{ status: SessionStatus.CLOSED }, { status: SessionStatus.CLOSED }],
        [{ status: "running" }, { status: SessionStatus.RUNNING }],
        [{ agent: "support@2" }, { agent: "support@2" }],
        [{ labels: { batch: "nightly" } }, { labels: ["batch=nightly"] }],
        [{ parentId: "p2" }, { parentId: "p2" }],
        [{ forkedFrom: "src" }, { forkedFrom: "src" }],
        [{ createdAfter: 7 }, { createdAfterMs: 7n }],
        [{ createdBefore: new Date(8) }, { createdBeforeMs: 8n }],
        [{ updatedAfter: 9n }, { updatedAfterMs: 9n }],
        [{ updatedBefore: 10 }, { updatedBeforeMs: 10n }],
        [{ order: "created" }, { orderBy: SessionOrder.CREATED }],
        [{ descending: true }, { descending: true }],
        // Left out, empty or zero: no filter.
        [{ agent: undefined, labels: {}, createdAfter: 0, descending: false }, {}],
      ];
      for (const [i, [f, fields]] of one.entries()) {
        await client.listSessions(f);
        assert.deepEqual(filterOf(node.lists[2 + i]), { ...bare, ...fields }, JSON.stringify(f, (_, v) => (typeof v === "bigint" ? `${v}n` : v)));
      }
    });
  });

  it("without a filter, or with call options alone, send the request they always sent", async () => {
    await withNode(async (client, node) => {
      node.pages = new Map([["", { ids: ["a", "b"], next: "t1" }], ["t1", { ids: ["c"], next: "" }]]);
      assert.deepEqual((await client.listSessions()).map((s) => s.id), ["a", "b", "c"]);
      assert.deepEqual((await client.listSessions({})).map((s) => s.id), ["a", "b", "c"]);
      // Call options as the first argument, as listSessions took them
      // before it took a filter: their deadline reaches the calls.
      assert.deepEqual((await client.listSessions({ timeoutMs: 4000 })).map((s) => s.id), ["a", "b", "c"]);
      assert.deepEqual((await client.listSessions({ signal: new AbortController().signal, timeoutMs: 3000 })).map((s) => s.id), ["a", "b", "c"]);
      assert.equal(node.lists.length, 8);
      for (const r of node.lists) {
        assert.deepEqual(filterOf(r), bare);
        assert.equal(r.pageSize, 0);
      }
      assert.deepEqual(node.lists.map((r) => r.pageToken), ["", "t1", "", "t1", "", "t1", "", "t1"]);
      const [d10, d4, d3] = [node.deadlines[0]!, node.deadlines[4]!, node.deadlines[6]!];
      assert.ok(d10 > 4000 && d10 <= 10_000, `default deadline ${d10}`);
      assert.ok(d4 > 3000 && d4 <= 4000, `timeoutMs 4000: ${d4}`);
      assert.ok(d3 > 2000 && d3 <= 3000, `timeoutMs 3000: ${d3}`);
      // And as the second argument, after a filter.
      await client.listSessions({ agent: "x" }, { timeoutMs: 2000 });
      assert.ok(node.deadlines[8]! <= 2000, `timeoutMs 2000: ${node.deadlines[8]}`);
      // An aborted signal alone is taken as call options too: the call is cancelled, not sent as a filter.
      const ac = new AbortController();
      ac.abort();
      assert.equal(codeOf(await failure(client.listSessions({ signal: ac.signal }))), Code.Canceled);
    });
  });

  it("follow the tokens through short and empty pages until the token is empty", async () => {
    await withNode(async (client, node) => {
      node.pages = new Map([
        ["", { ids: ["a", "b"], next: "t1" }],
        ["t1", { ids: [], next: "t2" }],
        ["t2", { ids: ["c"], next: "t3" }],
        ["t3", { ids: [], next: "t4" }],
        ["t4", { ids: [], next: "" }],
      ]);
      node.listUnavailable = 1; // the first page is read again after a takeover
      const got = await client.listSessions({ labels: { team: "red" }, order: "created", descending: true });
      assert.deepEqual(got.map((s) => s.id), ["a", "b", "c"]);
      assert.deepEqual(node.lists.map((r) => r.pageToken), ["", "", "t1", "t2", "t3", "t4"]);
      for (const r of node.lists) {
        assert.deepEqual(filterOf(r), { ...bare, labels: ["team=red"], orderBy: SessionOrder.CREATED, descending: true });
        assert.equal(r.pageSize, 0);
      }

      // One page at a time: what the node answered, the token included, and
      // an empty page with a token is not the end.
      node.lists = [];
      const first = await client.listSessionsPage({ labels: { team: "red" } });
      assert.deepEqual([first.sessions.map((s) => s.id), first.nextPageToken], [["a", "b"], "t1"]);
      const empty = await client.listSessionsPage({ labels: { team: "red" }, pageToken: first.nextPageToken, pageSize: 2 });
      assert.deepEqual([empty.sessions.map((s) => s.id), empty.nextPageToken], [[], "t2"]);
      assert.deepEqual(node.lists.map((r) => [r.pageToken, r.pageSize]), [["", 0], ["t1", 2]]);
      // A token the cluster refuses is thrown with its code.
      const bad = await failure(client.listSessionsPage({ pageToken: "nope" }));
      assert.deepEqual([codeOf(bad), messageOf(bad)], [Code.InvalidArgument, "page_token: not a token of this list"]);
    });
  });

  it("stop reading once the limit is reached", async () => {
    await withNode(async (client, node) => {
      node.pages = new Map([
        ["", { ids: ["a", "b"], next: "t1" }],
        ["t1", { ids: [], next: "t2" }],
        ["t2", { ids: ["c", "d"], next: "t3" }],
        ["t3", { ids: ["e"], next: "" }],
      ]);
      // Three of five: the third page holds the third, so the fourth is never read.
      assert.deepEqual((await client.listSessions({ agent: "coder", limit: 3 })).map((s) => s.id), ["a", "b", "c"]);
      // Each page asks for no more than the limit still needs.
      assert.deepEqual(node.lists.map((r) => [r.pageToken, r.pageSize]), [["", 3], ["t1", 1], ["t2", 1]]);
      assert.ok(node.lists.every((r) => r.agent === "coder"));
      node.lists = [];
      assert.deepEqual((await client.listSessions({ limit: 2 })).map((s) => s.id), ["a", "b"]);
      assert.equal(node.lists.length, 1);
      // A limit beyond what there is, and 0: every page, to the empty token.
      node.lists = [];
      assert.deepEqual((await client.listSessions({ limit: 100 })).map((s) => s.id), ["a", "b", "c", "d", "e"]);
      assert.deepEqual((await client.listSessions({ limit: 0 })).map((s) => s.id), ["a", "b", "c", "d", "e"]);
      assert.equal(node.lists.length, 8);
    });
  });
});

describe("setLabels", () => {
  it("sends set and remove and resolves the session with its labels", async () => {
    await withNode(async (client, node) => {
      const s = await client.setLabels("s1", { team: "blue", tier: "1" }, ["env"]);
      assert.deepEqual([node.sets[0].sessionId, labelsOf({ labels: node.sets[0].set }), node.sets[0].remove], ["s1", ["team=blue", "tier=1"], ["env"]]);
      assert.deepEqual([s.id, labelsOf(s)], ["s1", ["team=blue", "tier=1"]]);
      // Set only, remove only.
      assert.deepEqual(labelsOf(await client.setLabels("s1", { owner: "ana" })), ["owner=ana", "team=blue", "tier=1"]);
      assert.deepEqual(labelsOf(await client.setLabels("s1", undefined, ["tier", "owner"])), ["team=blue"]);
      assert.deepEqual(node.sets.slice(1).map((r) => [labelsOf({ labels: r.set }), r.remove]), [[["owner=ana"], []], [[], ["tier", "owner"]]]);
    });
  });

  it("is retried after an Unavailable, whether or not the change was made", async () => {
    await withNode(async (client, node) => {
      // Refused before it was made, twice: made on the third try.
      node.unavailable = 2;
      assert.deepEqual(labelsOf(await client.setLabels("s1", { team: "blue" }, ["env"])), ["team=blue"]);
      assert.equal(node.sets.length, 3);
      // Made, its answer lost: the repeat finds the same end state.
      node.lose = 1;
      assert.deepEqual(labelsOf(await client.setLabels("s1", { tier: "2" }, ["team"])), ["tier=2"]);
      assert.equal(node.sets.length, 5);
      assert.deepEqual(node.sets.map((r) => labelsOf({ labels: r.set })), [["team=blue"], ["team=blue"], ["team=blue"], ["tier=2"], ["tier=2"]]);
      // A refusal is thrown with its code, once.
      const e = await failure(client.setLabels("nobody", { a: "b" }));
      assert.deepEqual([codeOf(e), messageOf(e)], [Code.NotFound, 'session "nobody" not found']);
      assert.equal(node.sets.length, 6);
    });
  });
});

describe("bad input", () => {
  it("is refused before any call, naming the argument", async () => {
    await withNode(async (client, node) => {
      const list = (f: unknown) => () => client.listSessions(f as never);
      const page = (p: unknown) => () => client.listSessionsPage(p as never);
      const label = (id: unknown, set?: unknown, remove?: unknown) => () => client.setLabels(id as never, set as never, remove as never);
      // Each call made in turn, so no rejection waits unhandled.
      const refused: [string, () => Promise<unknown>, ErrorConstructor, RegExp][] = [
        ["a filter not an object", list("team=red"), TypeError, /^listSessions: filter must be an object of SessionFilter fields$/],
        ["a filter null", list(null), TypeError, /^listSessions: filter must be an object/],
        ["an unknown field", list({ label: { team: "red" } }), TypeError, /^listSessions: filter: unknown field "label": want one of status, agent, labels, .*, limit$/],
        ["call options mixed in", list({ agent: "a", timeoutMs: 5 }), TypeError, /unknown field "timeoutMs": .*; call options \(signal, timeoutMs\) go in the argument after it$/],
        ["a page field", list({ pageSize: 10 }), TypeError, /unknown field "pageSize": .*for one page use listSessionsPage$/],
        ["an unknown status", list({ status: "asleep" }), RangeError, /^listSessions: filter status "asleep": use idle, running, waiting, errored, paused, closed or a SessionStatus$/],
        ["a status not an enum value", list({ status: 42 }), RangeError, /^listSessions: filter status 42 is not a SessionStatus$/],
        ["a status of a wrong type", list({ status: true }), TypeError, /^listSessions: filter status must be a name or a SessionStatus, not boolean$/],
        ["a status that is an object's key", list({ status: "toString" }), RangeError, /status "toString": use idle/],
        ["an unknown order", list({ order: "newest" }), RangeError, /^listSessions: filter order "newest": use "created" or "updated"$/],
        ["an order as a number", list({ order: 1 }), TypeError, /^listSessions: filter order must be "created" or "updated", not number$/],
        ["descending not a boolean", list({ descending: "yes" }), TypeError, /^listSessions: filter descending must be a boolean, not string$/],
        ["an agent not a string", list({ agent: 3 }), TypeError, /^listSessions: filter agent must be a string, not number$/],
        ["a parent not a string", list({ parentId: null }), TypeError, /^listSessions: filter parentId must be a string, not null$/],
        ["forkedFrom not a string", list({ forkedFrom: ["x"] }), TypeError, /^listSessions: filter forkedFrom must be a string, not object$/],
        ["labels as a list", list({ labels: ["team=red"] }), TypeError, /^listSessions: filter labels must be an object of key to value$/],
        ["labels as a Map", list({ labels: new Map([["team", "red"]]) }), TypeError, /labels must be an object of key to value$/],
        ["an empty label key", list({ labels: { "": "red" } }), RangeError, /^listSessions: filter labels: a label key is empty$/],
        ["a label value not a string", list({ labels: { team: 1 } }), TypeError, /^listSessions: filter labels: label "team"'s value must be a string, not number$/],
        ["a negative time", list({ createdAfter: -1 }), RangeError, /^listSessions: filter createdAfter \(Unix ms\) must be a whole number from 0 to 9223372036854775807, not -1$/],
        ["a time not whole", list({ updatedBefore: 1.5 }), RangeError, /updatedBefore \(Unix ms\) must be a whole number .*, not 1.5$/],
        ["a time as a string", list({ createdBefore: "2026-01-01" }), TypeError, /^listSessions: filter createdBefore must be a Date or Unix milliseconds, not string$/],
        ["an invalid Date", list({ updatedAfter: new Date("never") }), RangeError, /^listSessions: filter updatedAfter is an invalid Date$/],
        ["a Date before 1970", list({ createdAfter: new Date(-1000) }), RangeError, /createdAfter \(a Date\) must be a whole number from 0 .*, not -1000$/],
        ["a negative limit", list({ limit: -1 }), RangeError, /^listSessions: filter limit must be a whole number from 0 to 9007199254740991, not -1$/],
        ["a limit not whole", list({ limit: 2.5 }), RangeError, /limit must be a whole number .*, not 2.5$/],
        ["a limit as a string", list({ limit: "10" }), RangeError, /limit must be a whole number .*, not "10"$/],
        ["a page not an object", page(5), TypeError, /^listSessionsPage: page must be an object of SessionPageRequest fields$/],
        ["a negative page size", page({ pageSize: -1 }), RangeError, /^listSessionsPage: page pageSize must be a whole number from 0 to 4294967295, not -1$/],
        ["a page size past uint32", page({ pageSize: 2 ** 32 }), RangeError, /pageSize must be a whole number from 0 to 4294967295, not 4294967296$/],
        ["a page token not a string", page({ pageToken: 7 }), TypeError, /^listSessionsPage: page pageToken must be a string, not number$/],
        ["a limit on a page", page({ limit: 5 }), TypeError, /^listSessionsPage: page: unknown field "limit": .*; a page is bounded by pageSize$/],
        ["a page's unknown status", page({ status: "gone" }), RangeError, /^listSessionsPage: page status "gone"/],
        ["a page's empty label key", page({ labels: { "": "x" } }), RangeError, /^listSessionsPage: page labels: a label key is empty$/],
        ["no session id", label("", { a: "b" }), RangeError, /^setLabels: sessionId is empty: give the id of the session to label$/],
        ["a session id not a string", label(7, { a: "b" }), TypeError, /^setLabels: sessionId must be a string, not number$/],
        ["nothing to change", label("s1"), RangeError, /^setLabels: give labels to set \(\{ key: value \}\) or keys to remove$/],
        ["nothing to change, empty", label("s1", {}, []), RangeError, /^setLabels: give labels to set/],
        ["set as a list", label("s1", [["a", "b"]]), TypeError, /^setLabels: set must be an object of key to value$/],
        ["set null", label("s1", null, ["a"]), TypeError, /^setLabels: set must be an object of key to value$/],
        ["an empty key to set", label("s1", { "": "x" }), RangeError, /^setLabels: set: a label key is empty$/],
        ["a value not a string", label("s1", { a: 1 }), TypeError, /^setLabels: set: label "a"'s value must be a string, not number$/],
        ["remove as a string", label("s1", {}, "env"), TypeError, /^setLabels: remove must be an array of label keys, not string$/],
        ["a key to remove not a string", label("s1", {}, ["env", 3]), TypeError, /^setLabels: remove\[1\] must be a string, not number$/],
        ["an empty key to remove", label("s1", {}, [""]), RangeError, /^setLabels: remove: a label key is empty$/],
        ["a key removed twice", label("s1", {}, ["env", "tier", "env"]), RangeError, /^setLabels: remove: label "env" is given twice$/],
        ["a key set and removed", label("s1", { env: "dev" }, ["env"]), RangeError, /^setLabels: label "env" is both in set and in remove$/],
      ];
      for (const [name, p, type, want] of refused) {
        const e = await failure(p(), name);
        assert.ok(e instanceof type, `${name}: ${String(e)} is not a ${type.name}`);
        assert.match((e as Error).message, want, name);
      }
      assert.deepEqual([node.lists.length, node.sets.length], [0, 0], "no call went out");
    });
  });
});
