// Helpers of the e2e tests of --metrics-addr and SIGHUP: the demo Worker as
// a process (its JSON log lines collected as they come, stopped by its PID),
// a single dexd with mutual TLS that can be started again on the same ports
// and data dir, certificates made by bin/dexctl, a session run to its end and
// a /metrics scrape.
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync, renameSync } from "node:fs";
import { join } from "node:path";
import { Client, dial, HistoryKind, SessionStatus, type TlsOptions } from "../../src/index.js";
import { binDir, freePort } from "./cluster.js";

export const haveDexctl = existsSync(join(binDir, "dexctl"));

/** The demo Worker (dist/demo/main.js) with these flags. */
export class DemoWorker {
  readonly p: ChildProcess;
  lines: string[] = [];
  private partial = "";
  readonly exited: Promise<number | null>;

  constructor(args: string[]) {
    this.p = spawn("node", [join(import.meta.dirname, "../../demo/main.js"), ...args], { stdio: ["ignore", "ignore", "pipe"] });
    this.p.stderr!.setEncoding("utf8");
    this.p.stderr!.on("data", (d: string) => {
      const parts = (this.partial + d).split("\n");
      this.partial = parts.pop()!;
      this.lines.push(...parts);
    });
    this.exited = new Promise((r) => this.p.once("exit", (code) => r(code)));
  }

  text(): string {
    return this.lines.join("\n") + this.partial;
  }

  /** The first log record from line index after on whose msg starts with msg, waiting (bounded) for it. */
  async waitFor(msg: string, withinMs = 20_000, after = 0): Promise<Record<string, unknown>> {
    const deadline = Date.now() + withinMs;
    for (;;) {
      for (const line of this.lines.slice(after)) {
        let r: Record<string, unknown>;
        try {
          r = JSON.parse(line);
        } catch {
          continue;
        }
        if (String(r.msg ?? "").startsWith(msg)) return r;
      }
      if (Date.now() > deadline) throw new Error(`${JSON.stringify(msg)} not logged within ${withinMs} ms; stderr:\n${this.text()}`);
      if (this.p.exitCode !== null) throw new Error(`exited ${this.p.exitCode}; stderr:\n${this.text()}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  /** SIGTERM (SIGKILL after 20 s); the exit code. */
  async stop(): Promise<number | null> {
    if (this.p.exitCode !== null || this.p.signalCode !== null) return this.p.exitCode;
    this.p.kill("SIGTERM");
    const killer = setTimeout(() => this.p.kill("SIGKILL"), 20_000);
    const code = await this.exited;
    clearTimeout(killer);
    return code;
  }
}

/** A new CA in dir with a server certificate for n1 (127.0.0.1) and a client one for w1, made by bin/dexctl. */
export function makePki(dir: string): string {
  mkdirSync(dir, { recursive: true });
  for (const args of [["ca", "create"], ["cert", "create", "--server", "n1", "--ip", "127.0.0.1"], ["cert", "create", "--client", "w1"]]) {
    execFileSync(join(binDir, "dexctl"), ["tls", ...args], { cwd: dir, stdio: "ignore" });
  }
  return dir;
}

export interface TlsFiles {
  caFile: string;
  certFile: string;
  keyFile: string;
}

export function clientFiles(pki: string): TlsFiles {
  return { caFile: join(pki, "dex-ca.pem"), certFile: join(pki, "w1-client.pem"), keyFile: join(pki, "w1-client-key.pem") };
}

/** Copies src's files over dst's, each replaced whole (as a rotation does). */
export function install(src: TlsFiles, dst: TlsFiles): void {
  for (const k of ["caFile", "certFile", "keyFile"] as const) {
    copyFileSync(src[k], dst[k] + ".new");
    renameSync(dst[k] + ".new", dst[k]);
  }
}

/** A single dexd with mutual TLS from pki, its data in dir; ports given: started again where an earlier one ran. */
export class TlsNode {
  readonly addr: string;
  private p?: ChildProcess;
  private constructor(readonly dir: string, readonly ports: { raft: number; grpc: number; http: number }) {
    this.addr = `127.0.0.1:${ports.grpc}`;
  }

  static async start(dir: string, pki: string, ports?: { raft: number; grpc: number; http: number }): Promise<TlsNode> {
    const n = new TlsNode(dir, ports ?? { raft: await freePort(), grpc: await freePort(), http: await freePort() });
    const raft = `127.0.0.1:${n.ports.raft}`;
    n.p = spawn(join(binDir, "dexd"), [
      "--id", "n1", "--data-dir", join(dir, "n1"), "--raft-addr", raft, "--grpc-addr", n.addr, "--http-addr", `127.0.0.1:${n.ports.http}`,
      "--peers", `n1=${raft}`, "--log-level", "warn", "--heartbeat-interval", "300ms", "--heartbeat-timeout", "3s",
      "--tls-cert", join(pki, "n1-server.pem"), "--tls-key", join(pki, "n1-server-key.pem"), "--tls-ca", join(pki, "dex-ca.pem"),
    ], { stdio: ["ignore", "ignore", "ignore"] });
    const deadline = Date.now() + 30_000;
    for (;;) {
      try {
        if ((await fetch(`http://127.0.0.1:${n.ports.http}/readyz`)).ok) return n;
      } catch {
        // not up yet
      }
      if (Date.now() > deadline || n.p.exitCode !== null) {
        await n.stop();
        throw new Error("dexd never became ready");
      }
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  async stop(): Promise<void> {
    const p = this.p;
    if (!p || p.exitCode !== null || p.signalCode !== null) return;
    await new Promise<void>((res) => {
      p.once("exit", () => res());
      p.kill("SIGTERM");
    });
  }
}

/** Creates a session and waits (bounded) until a Worker answered it: the session's last assistant text. */
export async function runSession(addr: string, tls?: TlsOptions, withinMs = 30_000): Promise<string> {
  const ch = dial(addr, { token: "", tls });
  try {
    const c = new Client(ch);
    const s = await c.createSession({ message: "hi" });
    const deadline = Date.now() + withinMs;
    for (;;) {
      const r = await c.getSession(s.id);
      const last = r.session?.history.at(-1);
      if (r.session?.status === SessionStatus.IDLE && last?.kind === HistoryKind.ASSISTANT) return last.text;
      if (Date.now() > deadline) throw new Error(`session ${s.id} was not answered within ${withinMs} ms`);
      await new Promise((res) => setTimeout(res, 50));
    }
  } finally {
    ch.close();
  }
}

/** The /metrics text at addr. */
export async function scrape(addr: string): Promise<string> {
  const r = await fetch(`http://${addr}/metrics`);
  if (r.status !== 200) throw new Error(`/metrics answered ${r.status}`);
  return r.text();
}

/** The value of the sample of name with exactly these labels (0: none). */
export function sample(body: string, name: string, labels: Record<string, string>): number {
  const want = `${name}{${Object.entries(labels).map(([k, v]) => `${k}="${v}"`).join(",")}}`;
  for (const line of body.split("\n")) {
    const sp = line.lastIndexOf(" ");
    if (line.slice(0, sp) === want) return Number(line.slice(sp + 1));
  }
  return 0;
}
