// What a person starting a Worker sees: why it cannot register (repeated,
// spaced out), where it registered, that a Worker stopped with SIGTERM
// leaves the Worker list at once, and that an idle one exits at once. The
// Workers run as real processes, stopped by their PID.
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createClient } from "@connectrpc/connect";
import { AdminService } from "../../gen/dex/v1/admin_pb.js";
import { type Channel } from "../../src/index.js";
import { binDir, freePort, haveDexd, type Cluster, oneNodeForSuite } from "./cluster.js";

const graceMs = 5000; // the library's default shutdown grace

// A Worker with no logger, as a user's first script would be.
const plainWorker = `
import { dial, Worker } from ${JSON.stringify(join(import.meta.dirname, "../../src/index.js"))};
const ch = dial(process.argv[1]);
const w = new Worker(ch, { id: "w1", tools: [{ name: "lookup", access: "read", run: () => ({ content: "found" }) }] });
const stop = new AbortController();
process.on("SIGTERM", () => stop.abort());
await w.run(stop.signal);
ch.close();
`;

class Proc {
  readonly p: ChildProcess;
  stderr = "";
  readonly exited: Promise<number | null>;
  constructor(args: string[]) {
    this.p = spawn("node", args, { stdio: ["ignore", "ignore", "pipe"] });
    this.p.stderr!.on("data", (d) => (this.stderr += d));
    this.exited = new Promise((r) => this.p.once("exit", (code) => r(code)));
  }
  /** Waits (bounded) until stderr holds want n times. */
  async waitCount(want: string, n: number, withinMs: number): Promise<void> {
    const deadline = Date.now() + withinMs;
    while (this.stderr.split(want).length - 1 < n) {
      if (Date.now() > deadline) throw new Error(`${JSON.stringify(want)} not seen ${n} times within ${withinMs} ms; stderr:\n${this.stderr}`);
      if (this.p.exitCode !== null) throw new Error(`exited ${this.p.exitCode}; stderr:\n${this.stderr}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }
  /** SIGTERM; resolves with the exit code and how long the exit took. */
  async stop(): Promise<{ code: number | null; ms: number }> {
    const start = Date.now();
    this.p.kill("SIGTERM");
    const killer = setTimeout(() => this.p.kill("SIGKILL"), 20_000);
    const code = await this.exited;
    clearTimeout(killer);
    return { code, ms: Date.now() - start };
  }
}

const startPlain = (target: string) => new Proc(["--input-type=module", "-e", plainWorker, target]);
const closedAddr = async () => `127.0.0.1:${await freePort()}`; // bound and closed: nothing listens

describe("a Worker that cannot reach the cluster", () => {
  it("with no logger says why on stderr within seconds, and again after a gap", async () => {
    const addr = await closedAddr();
    const w = startPlain(addr);
    try {
      const want = `dex worker w1: cannot register with ${addr}: connection refused; retrying`;
      await w.waitCount(want, 1, 10_000);
      await w.waitCount(want, 2, 20_000);
    } finally {
      const { code } = await w.stop();
      assert.equal(code, 0, w.stderr);
    }
    console.log(w.stderr);
    assert.ok(!w.stderr.includes("deregister"), "a Worker that never registered has nothing to deregister");
  });

  it("the demo Worker says it in its log", async () => {
    const addr = await closedAddr();
    const dir = mkdtempSync(join(tmpdir(), "dexts-lines-"));
    const w = new Proc([join(import.meta.dirname, "../../demo/main.js"), "--addr", addr, "--ledger", join(dir, "ledger.jsonl"), "--id", "w1"]);
    try {
      await w.waitCount(`"msg":"cannot register with ${addr}: connection refused; retrying"`, 1, 10_000);
    } finally {
      await w.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("a Worker against a real dexd", { skip: haveDexd ? false : `no dexd in ${binDir} (make build)` }, () => {
  let cl: Cluster;
  let ch: Channel;
  oneNodeForSuite((c, h) => ([cl, ch] = [c, h]));

  const listed = async (id: string) => {
    const r = await createClient(AdminService, ch).listWorkers({});
    return r.workers.some((ws) => ws.worker?.id === id);
  };

  it("says its leader; on SIGTERM, idle, it exits well within its grace and leaves the Worker list", async () => {
    const w = startPlain(cl.target);
    let stopped;
    try {
      await w.waitCount(`dex worker w1: registered with leader n1 at ${cl.grpc[0]}\n`, 1, 20_000);
      assert.ok(await listed("w1"), "registered but not listed");
      // Idle: its long poll is open and no task runs.
      await new Promise((r) => setTimeout(r, 500));
    } finally {
      stopped = await w.stop();
    }
    console.log(`the idle Worker exited ${stopped.ms} ms after SIGTERM (grace ${graceMs} ms)`);
    assert.equal(stopped.code, 0, w.stderr);
    assert.ok(stopped.ms < graceMs / 2, `took ${stopped.ms} ms to exit; its grace is ${graceMs} ms and it held no task`);
    assert.ok(w.stderr.includes("dex worker w1: deregistered\n"), w.stderr);
    assert.ok(!(await listed("w1")), "a Worker stopped with SIGTERM is still listed (its TTL is a minute)");
  });
});
