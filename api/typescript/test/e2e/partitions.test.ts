// The TypeScript Worker and Client against a real 3-node dexd cluster of 3
// partitions, each led by a different node: once the Worker has learned the
// partition map from its calls' trailers, it polls each partition and makes
// its tasks' calls at the partition's leader, and the Client makes each
// session's calls there, so no node forwards any of them.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { createClient } from "@connectrpc/connect";
import { AdminService } from "../../gen/dex/v1/admin_pb.js";
import { Client, dial, newSessionId, partitionOf, SessionStatus, Worker, type Channel } from "../../src/index.js";
import { binDir, haveDexd, startCluster, type Cluster } from "./cluster.js";

const partitions = 3;

async function waitUntil(what: string, f: () => Promise<string>, ms = 60_000): Promise<void> {
  const deadline = Date.now() + ms;
  for (;;) {
    const why = await f().catch((e: Error) => e.message);
    if (why === "") return;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}: ${why}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** The sum of dex_forwarded_calls_total over every node and partition of cl. */
async function forwardedCalls(cl: Cluster): Promise<number> {
  let total = 0;
  for (const h of cl.http) {
    const text = await (await fetch(`http://${h}/metrics`)).text();
    for (const line of text.split("\n")) {
      if (line.startsWith("dex_forwarded_calls_total{")) total += Number(line.slice(line.lastIndexOf(" ") + 1));
    }
  }
  return total;
}

/**
 * Waits until every node serves (/readyz 200) and names the same leader for
 * every partition, a different node for each; returns each partition's
 * leader's gRPC address.
 */
async function waitLeadersSpread(cl: Cluster, nodes: Channel[]): Promise<string[]> {
  let leaders: string[] = [];
  await waitUntil("one partition leader on each node, seen alike by every node", async () => {
    let first = "";
    for (const [i, ch] of nodes.entries()) {
      const r = await fetch(`http://${cl.http[i]}/readyz`);
      if (!r.ok) return `n${i + 1} /readyz ${r.status}`;
      const st = await createClient(AdminService, ch).status({}, { timeoutMs: 2000 });
      const ls = st.partitions.map((p) => p.leaderGrpcAddress);
      if (ls.length !== partitions || ls.includes("")) return `n${i + 1}: leaders ${JSON.stringify(ls)}`;
      if (i === 0) [first, leaders] = [ls.join(","), ls];
      else if (ls.join(",") !== first) return `n${i + 1} sees leaders ${ls} and n1 ${first}`;
    }
    return new Set(leaders).size === partitions ? "" : `leaders ${JSON.stringify(leaders)}`;
  });
  return leaders;
}

describe("against a real dexd cluster of 3 partitions", { skip: haveDexd ? false : `no dexd in ${binDir} (make build)` }, () => {
  it("the Worker calls each partition's leader directly: no node forwards its calls", { timeout: 240_000 }, async () => {
    const cl = await startCluster(3, ["--partitions", String(partitions)]);
    // One channel per node: the test's own calls go to the node they name.
    const nodes = cl.grpc.map((a) => dial(a, { token: "" }));
    const ch = dial(cl.target, { token: "" });
    const stop = new AbortController();
    let running: Promise<void> | undefined;
    try {
      const leaders = await waitLeadersSpread(cl, nodes);
      const w = new Worker(ch, {
        id: "ts-partition-leaders", pollWaitMs: 2000,
        tools: [{ name: "note", access: "read", run: (c) => ({ content: "noted " + c.arguments }) }],
        model: {
          run: (input) => {
            const last = input.history[input.history.length - 1];
            if (last.kind === 1 /* user */) return { toolCalls: [{ callId: "c1", tool: "note", arguments: { text: last.text } }] };
            return { text: "all noted" };
          },
        },
      });
      running = w.run(stop.signal);

      // Runs n sessions' turns (a model call, a tool call, a model call),
      // each created through a node in turn and read there: a session
      // created without an id lives in a partition that node leads, so the
      // test's own calls are not forwarded either.
      const turns = async (n: number): Promise<string[]> => {
        const made = await Promise.all(Array.from({ length: n }, async (_, i) => {
          const node = i % nodes.length;
          const s = await new Client(nodes[node]).createSession({ message: `hello ${i}` });
          return { id: s.id, node };
        }));
        for (const { id, node } of made) {
          const c = new Client(nodes[node]);
          await waitUntil(`session ${id} idle after its turn`, async () => {
            const s = (await c.getSession(id)).session!;
            return s.status === SessionStatus.IDLE && s.history.length >= 4 ? "" : SessionStatus[s.status];
          });
          assert.equal(leaders[partitionOf(id, partitions)], cl.grpc[node], `session ${id} lives in a partition its node leads`);
        }
        return made.map((m) => m.id);
      };
      // The first turns teach the Worker the map.
      await turns(9);
      const before = await forwardedCalls(cl);
      const ids = await turns(12);
      assert.equal(await forwardedCalls(cl) - before, 0,
        "the nodes forwarded calls of 12 sessions' turns; the Worker should have called each partition's leader");
      assert.equal(new Set(ids.map((id) => partitionOf(id, partitions))).size, partitions, "the sessions live in every partition");

      // The metric counts forwards: a read through a node that does not lead
      // the session's partition is forwarded.
      const other = ids.find((id) => leaders[partitionOf(id, partitions)] !== cl.grpc[0])!;
      const was = await forwardedCalls(cl);
      assert.equal((await new Client(nodes[0]).getSession(other)).session?.id, other);
      assert.ok(await forwardedCalls(cl) - was >= 1, "a read through a node that does not lead the session's partition was not forwarded");
    } finally {
      stop.abort();
      await running;
      ch.close();
      for (const n of nodes) n.close();
      await cl.stop();
    }
  });

  it("the Client calls each session's partition leader directly: no node forwards its calls", { timeout: 240_000 }, async () => {
    const cl = await startCluster(3, ["--partitions", String(partitions)]);
    const nodes = cl.grpc.map((a) => dial(a, { token: "" }));
    const ch = dial(cl.target, { token: "" });
    try {
      await waitLeadersSpread(cl, nodes);
      const client = new Client(ch);
      /** New session ids, perPartition of each partition. */
      const ids = (perPartition: number): string[] => {
        const out: string[] = [];
        for (let k = 0; k < partitions; k++) {
          while (out.length < (k + 1) * perPartition) {
            const id = newSessionId();
            if (partitionOf(id, partitions) === k) out.push(id);
          }
        }
        return out;
      };
      // A session's calls: created with its id, a message (its turn waits:
      // no Worker serves the model), read, watched, budgeted, and a child
      // created, read and closed.
      const use = async (id: string): Promise<void> => {
        await client.createSession({ sessionId: id });
        await client.sendMessage(id, "hello");
        assert.deepEqual((await client.getSession(id)).session?.history.map((h) => h.text), ["hello"]);
        for await (const ev of client.watchSession(id, 0n, { signal: AbortSignal.timeout(10_000) })) {
          assert.ok(ev.seq > 0n);
          break;
        }
        await client.setBudget(id, { maxTurns: 5 });
        const child = await client.createSession({ parentId: id });
        assert.equal(partitionOf(child.id, partitions), partitionOf(id, partitions));
        assert.equal((await client.getSession(child.id)).session?.parentId, id);
        await client.closeSession(child.id);
      };
      // The first calls teach the client the map.
      for (const id of ids(1)) await use(id);
      const warm = await forwardedCalls(cl);
      assert.ok(warm >= 1, "the first call of a partition another node leads went through the node in use");
      for (const id of ids(3)) await use(id);
      // Without an id the node in use draws one in a partition it leads.
      const made = await client.createSession({});
      await client.sendMessage(made.id, "hello");
      await client.getSession(made.id);
      assert.equal(await forwardedCalls(cl) - warm, 0,
        "the nodes forwarded the client's calls of 10 sessions; it should have called each partition's leader");
    } finally {
      ch.close();
      for (const n of nodes) n.close();
      await cl.stop();
    }
  });
});
