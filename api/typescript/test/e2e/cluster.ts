// Starts real dexd nodes from $DEX_BIN (make e2e-typescript sets it) on
// 127.0.0.1 free ports in a temp dir, and stops them by PID.
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync, existsSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { after, before } from "node:test";

import { dial, type Channel } from "../../src/index.js";

export const binDir = resolve(process.env.DEX_BIN ?? join(import.meta.dirname, "../../../../../bin"));
export const haveDexd = existsSync(join(binDir, "dexd"));

/** A port free on 127.0.0.1 right now. */
export async function freePort(): Promise<number> {
  return new Promise((res, rej) => {
    const s = createServer();
    s.once("error", rej);
    s.listen(0, "127.0.0.1", () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => res(port));
    });
  });
}

export interface Cluster {
  dir: string;
  grpc: string[];
  /** Each node's HTTP address (/readyz, /metrics). */
  http: string[];
  target: string;
  procs: ChildProcess[];
  stop(): Promise<void>;
}

/** Starts n dexd nodes and waits until one of them reports ready (/readyz). */
export async function startCluster(n = 1, extra: string[] = []): Promise<Cluster> {
  const dir = mkdtempSync(join(tmpdir(), "dexts-"));
  const raft: string[] = [];
  const grpc: string[] = [];
  const http: string[] = [];
  for (let i = 0; i < n; i++) {
    raft.push(`127.0.0.1:${await freePort()}`);
    grpc.push(`127.0.0.1:${await freePort()}`);
    http.push(`127.0.0.1:${await freePort()}`);
  }
  const peers = raft.map((r, i) => `n${i + 1}=${r}`).join(",");
  const procs = raft.map((r, i) => spawn(join(binDir, "dexd"), [
    "--id", `n${i + 1}`, "--data-dir", join(dir, `n${i + 1}`), "--raft-addr", r, "--grpc-addr", grpc[i], "--http-addr", http[i],
    "--peers", peers, "--log-level", "warn", ...extra,
  ], { stdio: ["ignore", "ignore", "ignore"] }));
  const c: Cluster = {
    dir, grpc, http, target: n === 1 ? grpc[0] : `dex:///${grpc.join(",")}`, procs,
    async stop() {
      await Promise.all(procs.map((p) => new Promise<void>((res) => {
        if (p.exitCode !== null || p.signalCode !== null) return res();
        p.once("exit", () => res());
        p.kill("SIGTERM");
      })));
      rmSync(dir, { recursive: true, force: true });
    },
  };
  const deadline = Date.now() + 30_000;
  for (;;) {
    for (const h of http) {
      try {
        const r = await fetch(`http://${h}/readyz`);
        if (r.ok) return c;
      } catch {
        // not up yet
      }
    }
    if (Date.now() > deadline) {
      await c.stop();
      throw new Error("the cluster never became ready");
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}

/**
 * A one-node cluster and a channel to it for the tests of the enclosing
 * describe block: started before them (set receives both), stopped after.
 */
export function oneNodeForSuite(set: (cl: Cluster, ch: Channel) => void): void {
  let cl: Cluster | undefined;
  let ch: Channel | undefined;
  before(async () => {
    cl = await startCluster(1);
    ch = dial(cl.target, { token: "" });
    set(cl, ch);
  });
  after(async () => {
    ch?.close();
    await cl?.stop();
  });
}
