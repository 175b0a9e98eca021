// The certify example's Workers (docs/examples/typescript), run as
// dexchaos certify runs them: their own processes, configured by the
// environment only, the model the scripted provider behind the real SDKs.
// Each sends an invoice (its effect keyed by the idempotency key) and
// charges a card (a single-attempt Step, its effect unkeyed). Needs the
// example's packages (npm ci there; make test-typescript does it).
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { createInterface } from "node:readline";
import { Client, SessionStatus, StepKind, type Channel } from "../../src/index.js";
import { binDir, haveDexd, type Cluster, oneNodeForSuite } from "./cluster.js";

const example = resolve(import.meta.dirname, "../../../../../docs/examples/typescript");
const lib = resolve(import.meta.dirname, "../../..");
const skip = !haveDexd || !existsSync(join(binDir, "dexchaos")) ? `no dexd or dexchaos in ${binDir} (make build)`
  : !existsSync(join(example, "node_modules")) ? `no packages in ${example} (npm ci there)` : false;

// The Claude Agent SDK's Worker runs the Claude Code CLI the SDK installs
// for this platform (an optional package of the SDK's).
const sdk = join(example, "node_modules/@anthropic-ai");
const haveCli = existsSync(sdk) && readdirSync(sdk).some((d) => d.startsWith(`claude-agent-sdk-${process.platform}-${process.arch}`));
const workers = ["worker.js", "worker-openai-agents.js", "worker-claude-agent-sdk.js"];
const skipWorker = (file: string) => file === "worker-claude-agent-sdk.js" && !haveCli ? `no Claude Code CLI for ${process.platform}-${process.arch} in ${sdk}` : false;
const script = {
  turns: workers.flatMap((_, i) => [
    { contains: `certify ${2 * i + 1}: call send_invoice`, outputs: [
      { tool_calls: [{ name: "send_invoice", arguments: { order_id: "A-1001", amount_cents: 1250 } }] }, { text: "done" }] },
    { contains: `certify ${2 * i + 2}: call charge_card`, outputs: [
      { tool_calls: [{ name: "charge_card", arguments: { order_id: "A-1001", amount_cents: 1250 } }] }, { text: "done" }] },
  ]),
};

function stop(p: ChildProcess): Promise<void> {
  return new Promise((res) => {
    if (p.exitCode !== null || p.signalCode !== null) return res();
    p.once("exit", () => res());
    p.kill("SIGTERM");
  });
}

describe("the certify example's Workers", { skip }, () => {
  let cl: Cluster;
  let ch: Channel;
  oneNodeForSuite((c, h) => ([cl, ch] = [c, h]));
  let dir: string;
  let provider: ChildProcess;
  const env: Record<string, string> = {};

  before(async () => {
    // The example holds a copy of this library (installed as from a
    // registry): bring it up to date with this build, then build the example.
    const copy = join(example, "node_modules/@dexhq/dex");
    for (const d of ["dist/src", "dist/gen"]) cpSync(join(lib, d), join(copy, d), { recursive: true });
    const b = spawnSync(process.execPath, [join(example, "node_modules/typescript/bin/tsc"), "-p", example], { encoding: "utf8" });
    assert.equal(b.status, 0, `tsc in the example: ${b.stdout}${b.stderr}`);

    dir = mkdtempSync(join(tmpdir(), "dexexample-"));
    writeFileSync(join(dir, "script.json"), JSON.stringify(script));
    provider = spawn(join(binDir, "dexchaos"), ["provider", "--script", join(dir, "script.json"), "--addr", "127.0.0.1:0", "--log", join(dir, "calls.jsonl")],
      { stdio: ["ignore", "pipe", "inherit"] });
    for await (const line of createInterface({ input: provider.stdout! })) {
      const [k, v] = line.split("=", 2);
      env[k] = v;
      if (env.OPENAI_BASE_URL && env.ANTHROPIC_BASE_URL) break;
    }
  });

  after(async () => {
    if (provider) await stop(provider);
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  for (const [i, file] of workers.entries()) {
    it(`${file}: an invoice keyed by the idempotency key, a card charged once`, { skip: skipWorker(file) }, async () => {
      const wdir = join(dir, file);
      mkdirSync(wdir);
      const ledger = join(wdir, "ledger.jsonl");
      const w = spawn("node", [join(example, "dist", file)], {
        cwd: wdir,
        env: {
          ...process.env, ...env, DEX_ADDR: cl.target, DEX_WORKER_ID: `w${i + 1}`, DEX_LEDGER: ledger,
          OPENAI_API_KEY: "dex-certify", ANTHROPIC_API_KEY: "dex-certify",
        },
        stdio: ["ignore", "ignore", "pipe"],
      });
      let stderr = "";
      w.stderr!.on("data", (d) => (stderr += d));
      try {
        const c = new Client(ch);
        const sessions = await Promise.all([
          c.createSession({ message: `certify ${2 * i + 1}: call send_invoice` }),
          c.createSession({ message: `certify ${2 * i + 2}: call charge_card` }),
        ]);
        const got = [];
        for (const s of sessions) {
          const deadline = Date.now() + 20_000;
          for (;;) {
            const r = await c.getSession(s.id);
            if (r.session?.status === SessionStatus.IDLE && r.steps.length >= 3) {
              got.push(r);
              break;
            }
            assert.ok(Date.now() < deadline, `session ${s.id} did not end: ${SessionStatus[r.session?.status ?? 0]}, steps ${r.steps.map((x) => `${StepKind[x.kind]} ${x.tool} ${x.status}`).join(", ")}; Worker stderr:\n${stderr}\nmodel calls:\n${readFileSync(join(dir, "calls.jsonl"), "utf8")}`);
            await new Promise((res) => setTimeout(res, 50));
          }
        }
        const [invoice, charge] = got;
        assert.deepEqual(invoice.session?.history.map((h) => h.text), ["certify " + (2 * i + 1) + ": call send_invoice", "", "invoice sent for A-1001: 1250 cents", "done"]);
        assert.deepEqual(charge.steps.map((s) => s.kind), [StepKind.RUN_MODEL, StepKind.CALL_SINGLE_ATTEMPT_TOOL, StepKind.RUN_MODEL]);
        assert.equal(charge.session?.history[2].text, "charged 1250 cents for A-1001");

        const lines = readFileSync(ledger, "utf8").trim().split("\n").map((l) => JSON.parse(l));
        const effects = lines.filter((l) => l.phase === "effect").map((l) => [l.tool, l.effect, l.effect_key === l.idempotency_key, l.effect_key === ""]);
        assert.deepEqual(effects.sort(), [["charge_card", "charge", false, true], ["send_invoice", "invoice", true, false]]);
        assert.ok(lines.every((l) => l.worker === `w${i + 1}`));
        const key = lines.find((l) => l.effect === "invoice").effect_key;
        assert.deepEqual(readdirSync(join(wdir, "store/invoices")), [encodeURIComponent(key) + ".json"]);
      } finally {
        await stop(w);
      }
    });
  }
});
