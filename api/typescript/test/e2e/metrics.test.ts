// The demo Worker's --metrics-addr, as a process: it serves /metrics on the
// port it chose (and logged) before the cluster answers, and its task
// counters move as it runs a session against a real dexd.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { binDir, freePort, haveDexd, type Cluster, oneNodeForSuite } from "./cluster.js";
import { DemoWorker, runSession, sample, scrape } from "./demo-worker.js";

describe("the demo Worker's metrics", () => {
  it("are served before the cluster answers", async () => {
    const nothing = `127.0.0.1:${await freePort()}`; // bound and closed: nothing listens
    const dir = mkdtempSync(join(tmpdir(), "dexts-metrics-"));
    const w = new DemoWorker(["--addr", nothing, "--ledger", join(dir, "ledger.jsonl"), "--metrics-addr", "127.0.0.1:0"]);
    let served, body;
    try {
      served = await w.waitFor("serving metrics", 10_000);
      await w.waitFor(`cannot register with ${nothing}`, 10_000);
      body = await scrape(String(served.addr));
    } finally {
      assert.equal(await w.stop(), 0, w.text());
      rmSync(dir, { recursive: true, force: true });
    }
    assert.match(String(served.addr), /^127\.0\.0\.1:[1-9]\d*$/);
    // The Go Worker's families, and the process's own.
    assert.match(body, /^# TYPE dex_worker_tasks_total counter$/m);
    assert.match(body, /^# TYPE dex_worker_handler_duration_seconds histogram$/m);
    assert.match(body, /^process_cpu_seconds_total /m);
  });

  it("refuse a busy port at start", async () => {
    const dir = mkdtempSync(join(tmpdir(), "dexts-metrics-"));
    const taken = new DemoWorker(["--addr", "127.0.0.1:1", "--ledger", join(dir, "a.jsonl"), "--metrics-addr", "127.0.0.1:0"]);
    try {
      const addr = String((await taken.waitFor("serving metrics", 10_000)).addr);
      const w = new DemoWorker(["--addr", "127.0.0.1:1", "--ledger", join(dir, "b.jsonl"), "--metrics-addr", addr]);
      assert.equal(await w.exited, 1, w.text());
      assert.match(w.text(), new RegExp(`dexworker: --metrics-addr ${addr}: listen on ${addr}: EADDRINUSE`));
    } finally {
      await taken.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("the demo Worker's metrics against a real dexd", { skip: haveDexd ? false : `no dexd in ${binDir} (make build)` }, () => {
  let cl: Cluster;
  oneNodeForSuite((c) => (cl = c));

  it("count the tasks it runs", async () => {
    const dir = mkdtempSync(join(tmpdir(), "dexts-metrics-"));
    const w = new DemoWorker(["--addr", cl.target, "--ledger", join(dir, "ledger.jsonl"), "--id", "w-metrics", "--poll-wait", "1s",
      "--metrics-addr", "127.0.0.1:0"]);
    let before, after, text;
    try {
      const addr = String((await w.waitFor("serving metrics", 10_000)).addr);
      await w.waitFor("registered with leader n1", 20_000);
      before = await scrape(addr);
      text = await runSession(cl.target);
      after = await scrape(addr);
    } finally {
      assert.equal(await w.stop(), 0, w.text());
      rmSync(dir, { recursive: true, force: true });
    }
    assert.match(text, /^Done:/);
    const completed = { kind: "run_model", outcome: "completed" };
    assert.equal(sample(before, "dex_worker_tasks_total", completed), 0);
    // The demo model's two calls: one asking for the tools, one answering.
    assert.equal(sample(after, "dex_worker_tasks_total", completed), 2);
    assert.ok(sample(after, "dex_worker_tasks_total", { kind: "call_tool", outcome: "completed" }) >= 1, after);
    assert.equal(sample(after, "dex_worker_handler_duration_seconds_count", { kind: "run_model", outcome: "ok" }), 2);
  });
});
