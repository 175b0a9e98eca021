// Against a real dexd (its default agent's provider named "openai") and the
// chaos harness's scripted model (dexchaos provider, docs/provider.md): a
// model handler calls the provider through the openai package, which throws
// its RateLimitError with the provider's Retry-After header; the Worker
// reports it with the rate_limit failure, the cluster holds the provider
// until then, and the Step's next attempt waits for it.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { createInterface } from "node:readline";
import OpenAI from "openai";
import { Client, dial, HistoryKind, SessionStatus, Worker, type Channel, type Event, type ModelInput } from "../../src/index.js";
import { binDir, haveDexd, startCluster, type Cluster } from "./cluster.js";

const repo = resolve(import.meta.dirname, "../../../../..");
const canBuild = existsSync(join(repo, "go.mod")) && spawnSync("go", ["version"], { stdio: "ignore" }).status === 0;
const haveChaos = existsSync(join(binDir, "dexchaos"));
const skip = !haveDexd ? `no dexd in ${binDir} (make build)` : haveChaos || canBuild ? false : `no dexchaos in ${binDir} and no go to build one`;

/** The first model call of the conversation is refused with 429 and Retry-After: 2 (seconds); the next answers. */
const retryAfterSeconds = 2;
const script = {
  turns: [{ contains: "limited", errors: [{ output: 0, status: 429, retry_after: retryAfterSeconds }], outputs: [{ text: "after the hold" }] }],
};

describe("a provider's Retry-After through the openai package, against a real dexd", { skip }, () => {
  let dir: string;
  let provider: ChildProcess;
  let openai: OpenAI;
  let cl: Cluster;
  let ch: Channel;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), "dexretryafter-"));
    let bin = join(binDir, "dexchaos");
    if (!haveChaos) {
      bin = join(dir, "dexchaos");
      const b = spawnSync("go", ["build", "-o", bin, "./cmd/dexchaos"], { cwd: repo, encoding: "utf8", timeout: 600_000 });
      assert.equal(b.status, 0, `go build ./cmd/dexchaos: ${b.stderr}`);
    }
    writeFileSync(join(dir, "script.json"), JSON.stringify(script));
    provider = spawn(bin, ["provider", "--script", join(dir, "script.json"), "--addr", "127.0.0.1:0"], { stdio: ["ignore", "pipe", "inherit"] });
    let baseURL = "";
    for await (const line of createInterface({ input: provider.stdout! })) {
      const [k, v] = line.split("=", 2);
      if (k === "OPENAI_BASE_URL") {
        baseURL = v;
        break;
      }
    }
    // The SDK's own retries are off: Dex retries the attempt.
    openai = new OpenAI({ apiKey: "unused", baseURL, maxRetries: 0 });
    cl = await startCluster(1, ["--agent-provider", "default=openai"]);
    ch = dial(cl.target, { token: "" });
  });

  after(async () => {
    ch?.close();
    await cl?.stop();
    if (provider && provider.exitCode === null && provider.signalCode === null) {
      await new Promise<void>((res) => { provider.once("exit", () => res()); provider.kill("SIGTERM"); });
    }
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("holds the session's provider and delays the next attempt until the Retry-After has passed", async () => {
    const calls: { attempt: number; at: number }[] = [];
    const run = async (input: ModelInput) => {
      calls.push({ attempt: input.attempt, at: Date.now() });
      const user = input.history.filter((h) => h.kind === HistoryKind.USER).map((h) => h.text);
      const r = await openai.chat.completions.create({ model: "m", messages: user.map((content) => ({ role: "user" as const, content })) }, { signal: input.signal });
      return { text: r.choices[0].message.content ?? "" };
    };
    const w = new Worker(ch, { id: "ts-retry-after", pollWaitMs: 1000, shutdownGraceMs: 1000, model: { run } });
    const stop = new AbortController();
    const running = w.run(stop.signal);
    try {
      const c = new Client(ch);
      const s = await c.createSession({ message: "limited, please" });
      assert.equal(s.provider, "openai");
      const events: Event[] = [];
      const watching = new AbortController();
      const timer = setTimeout(() => watching.abort(), 30_000);
      try {
        for await (const ev of c.watchSession(s.id, 0n, { signal: watching.signal })) {
          events.push(ev);
          if (ev.type === "turn_completed" || ev.type === "session_errored") break;
        }
      } finally {
        clearTimeout(timer);
      }
      const held = events.find((e) => e.type === "provider_held");
      assert.ok(held, `a provider_held event among ${JSON.stringify(events.map((e) => e.type))}`);
      assert.match(held.detail, new RegExp(`^openai until .* \\(Retry-After ${retryAfterSeconds * 1000} ms\\)$`));

      const got = await c.getSession(s.id);
      assert.equal(got.session?.status, SessionStatus.IDLE);
      assert.equal(got.session?.history.at(-1)?.text, "after the hold");
      assert.deepEqual(calls.map((x) => x.attempt), [1, 2]);
      assert.ok(calls[1].at - calls[0].at >= retryAfterSeconds * 1000 - 100,
        `the second attempt came ${calls[1].at - calls[0].at} ms after the first, before the Retry-After of ${retryAfterSeconds} s`);
    } finally {
      stop.abort();
      await running;
    }
  });
});
