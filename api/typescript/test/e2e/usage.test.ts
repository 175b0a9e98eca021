// The demo Worker's usage on a real dexd: run as bin/dexworker-typescript
// runs it, alone and through each framework adapter, a session answered by
// the built-in demo totals cmd/dexworker's fixed usage per model call, and
// one whose script output gives "usage" totals that. Its --help says so.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { Client, SessionStatus, StepKind, type Channel, type GetSessionResponse } from "../../src/index.js";
import { binDir, haveDexd, type Cluster, oneNodeForSuite } from "./cluster.js";

const main = join(import.meta.dirname, "../../demo/main.js");

async function waitFor<T>(what: string, f: () => Promise<T | undefined>, ms = 30_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await f();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

it("the demo Worker's --help says what usage it reports", async () => {
  const p = spawn("node", [main, "--help"], { stdio: ["ignore", "ignore", "pipe"] });
  let stderr = "";
  p.stderr!.on("data", (d) => (stderr += d));
  const code = await new Promise<number | null>((r) => p.once("exit", (c) => r(c)));
  assert.equal(code, 0);
  assert.match(stderr.replace(/\s+/g, " "),
    /Each scripted model call reports a fixed usage \(100 input and 20 output tokens, cost 150 micro-units, model "dex-demo"\) unless its script output gives "usage"/);
});

describe("the demo Worker's usage on a real dexd", { skip: haveDexd ? false : `no dexd in ${binDir} (make build)` }, () => {
  let cl: Cluster;
  let ch: Channel;
  oneNodeForSuite((c, h) => ([cl, ch] = [c, h]));

  for (const adapter of ["", "ai-sdk", "openai-agents", "claude-agent-sdk"]) {
    it(`is totalled per session${adapter ? ` through --adapter ${adapter}` : ""}`, async () => {
      const name = adapter || "plain";
      const script = join(cl.dir, `script-${name}.json`);
      writeFileSync(script, JSON.stringify({
        turns: [{ match: `pricey ${name}`, outputs: [{ text: "expensive", usage: { input_tokens: 400, output_tokens: 100, cost_micros: 900 } }] }],
      }));
      const p = spawn("node", [main, "--addr", cl.target, "--ledger", join(cl.dir, `ledger-${name}.jsonl`), "--script", script, "--id", `usage-${name}`,
        "--poll-wait", "1s", "--shutdown-grace", "1s", ...(adapter ? ["--adapter", adapter] : [])], { stdio: ["ignore", "ignore", "pipe"] });
      let stderr = "";
      p.stderr!.on("data", (d) => (stderr += d));
      const exited = new Promise<number | null>((r) => p.once("exit", (code) => r(code)));
      let pricey: GetSessionResponse;
      let plain: GetSessionResponse;
      try {
        const c = new Client(ch);
        const idle = (id: string, entries: number) => waitFor(`session ${id} to end`, async () => {
          const r = await c.getSession(id);
          return r.session?.status === SessionStatus.IDLE && r.session.history.length >= entries ? r : undefined;
        });
        const a = await c.createSession({ message: `pricey ${name}` });
        const b = await c.createSession({ message: "hello" });
        pricey = await idle(a.id, 2);
        plain = await idle(b.id, 6);
      } finally {
        p.kill("SIGTERM");
      }
      assert.equal(await exited, 0, stderr);
      const n = (x: bigint | undefined) => Number(x ?? 0n);
      const totals = (r: GetSessionResponse) => {
        const u = r.session!.usage;
        return [n(u?.modelCalls), n(u?.toolCalls), n(u?.inputTokens), n(u?.outputTokens), n(u?.costMicros)];
      };
      assert.deepEqual(totals(pricey), [1, 0, 400, 100, 900]);
      // The built-in demo: a model call with three tool calls, then its answer.
      assert.deepEqual(totals(plain), [2, 3, 200, 40, 300]);
      const steps = plain.steps.filter((st) => st.kind === StepKind.RUN_MODEL);
      assert.deepEqual(steps.map((st) => [n(st.usage?.inputTokens), n(st.usage?.outputTokens), n(st.usage?.costMicros), st.usage?.model]),
        [[100, 20, 150, "dex-demo"], [100, 20, 150, "dex-demo"]]);
    });
  }
});
