import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { Client, Code, codeOf, SessionStatus, Worker, type Channel } from "../../src/index.js";
import { binDir, haveDexd, type Cluster, oneNodeForSuite } from "./cluster.js";

async function waitFor<T>(what: string, f: () => Promise<T | undefined>, ms = 30_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await f();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe("against a real dexd", { skip: haveDexd ? false : `no dexd in ${binDir} (make build)` }, () => {
  let cl: Cluster;
  let ch: Channel;
  oneNodeForSuite((c, h) => ([cl, ch] = [c, h]));

  it("a library Worker runs a session's model and tool Steps end to end, with the idempotency key", async () => {
    const keys: string[] = [];
    const w = new Worker(ch, {
      id: "ts-e2e",
      tools: [{
        name: "note", access: "idempotent_write", run: (call) => {
          keys.push(call.idempotencyKey);
          return { content: "noted " + call.arguments };
        },
      }],
      model: {
        run: (input) => {
          const last = input.history[input.history.length - 1];
          if (last.kind === 1 /* user */) return { toolCalls: [{ callId: "c1", tool: "note", arguments: { text: last.text } }] };
          return { text: "all noted" };
        },
      },
      pollWaitMs: 1000,
    });
    const stop = new AbortController();
    const running = w.run(stop.signal);
    const c = new Client(ch);
    const s = await c.createSession({ message: "remember milk" });
    const got = await waitFor("the turn to end", async () => {
      const r = await c.getSession(s.id);
      return r.session?.status === SessionStatus.IDLE && r.session.history.length >= 4 ? r : undefined;
    });
    stop.abort();
    await running;
    const texts = got.session!.history.map((h) => h.text);
    assert.equal(texts[texts.length - 1], "all noted");
    assert.deepEqual(keys.length, 1);
    assert.ok(keys[0] !== "", "a write's handler is handed its idempotency key");
    assert.ok((await c.listSessions()).some((x) => x.id === s.id));
  });

  it("the demo Worker writes dexworker's ledger lines and stops with exit 0 on SIGTERM", async () => {
    const ledger = join(cl.dir, "ledger.jsonl");
    const p = spawn("node", [join(import.meta.dirname, "../../demo/main.js"), "--addr", cl.target, "--ledger", ledger, "--id", "demo-ts",
      "--poll-wait", "1s"], { stdio: ["ignore", "ignore", "pipe"] });
    let stderr = "";
    p.stderr!.on("data", (d) => (stderr += d));
    const exited = new Promise<number | null>((r) => p.once("exit", (code) => r(code)));
    try {
      const c = new Client(ch);
      const s = await c.createSession({ message: "hello" });
      await waitFor("the demo turn to end", async () => {
        const r = await c.getSession(s.id);
        return r.session?.status === SessionStatus.IDLE && r.session.history.length >= 6 ? r : undefined;
      });
      const lines = readFileSync(ledger, "utf8").trim().split("\n").map((l) => JSON.parse(l)).filter((e) => e.session === s.id);
      assert.equal(lines[0].tool, "model");
      const tools = lines.filter((e) => e.kind === "tool");
      assert.deepEqual(tools.map((e) => e.tool).sort(), ["lookup", "save_note", "send_email"]);
      assert.deepEqual(tools.map((e) => e.call_id).sort(), ["call-1-1", "call-1-2", "call-1-3"]);
      assert.equal(lines.filter((e) => e.kind === "model").length, 2);
      for (const e of lines) {
        assert.deepEqual(Object.keys(e).slice(0, 7), ["session", "call_id", "tool", "attempt", "idempotency_key", "pid", "time"]);
        assert.equal(e.worker, "demo-ts");
        assert.equal(e.pid, p.pid);
      }
    } finally {
      p.kill("SIGTERM");
    }
    assert.equal(await exited, 0, stderr);
  });

  it("the README's example Worker runs a session end to end (its LLM API faked on 127.0.0.1)", async () => {
    // The fake provider calls save_note once, then answers.
    let requests = 0;
    const llm = createServer((req, res) => {
      let body = "";
      req.on("data", (d) => (body += d));
      req.on("end", () => {
        requests++;
        const msgs = JSON.parse(body).messages as { role: string; content: { type: string }[] }[];
        const last = msgs[msgs.length - 1];
        const content = last.content.some((b) => b.type === "tool_result")
          ? [{ type: "text", text: "Saved it." }]
          : [{ type: "tool_use", id: "toolu_1", name: "save_note", input: { note: "buy milk" } }];
        res.setHeader("content-type", "application/json");
        res.end(JSON.stringify({ content }));
      });
    });
    await new Promise<void>((r) => llm.listen(0, "127.0.0.1", () => r()));
    const cwd = mkdtempSync(join(cl.dir, "agent-"));
    const p = spawn("node", [join(import.meta.dirname, "../../examples/agent.js")], {
      cwd, stdio: ["ignore", "ignore", "pipe"],
      env: { ...process.env, DEX_ADDR: cl.target, ANTHROPIC_API_KEY: "test", ANTHROPIC_BASE_URL: `http://127.0.0.1:${(llm.address() as AddressInfo).port}` },
    });
    let stderr = "";
    p.stderr!.on("data", (d) => (stderr += d));
    const exited = new Promise<number | null>((r) => p.once("exit", (code) => r(code)));
    try {
      const c = new Client(ch);
      const s = await c.createSession({ message: "remember to buy milk" });
      const got = await waitFor("the agent's turn to end", async () => {
        const r = await c.getSession(s.id);
        return r.session?.status === SessionStatus.IDLE && r.session.history.length >= 4 ? r : undefined;
      });
      assert.equal(got.session!.history.at(-1)!.text, "Saved it.");
      assert.match(readFileSync(join(cwd, "notes.txt"), "utf8"), /\{"note":"buy milk"\}/);
      assert.equal(requests, 2);
    } finally {
      p.kill("SIGTERM");
      llm.close();
    }
    assert.equal(await exited, 0, stderr);
  });

  it("the client watches a session to the end of its turn, cancels nothing idle, and deletes it", async () => {
    const w = new Worker(ch, { id: "ts-watch", model: { run: () => ({ text: "hello back" }) }, pollWaitMs: 1000 });
    const stop = new AbortController();
    const running = w.run(stop.signal);
    try {
      const c = new Client(ch);
      const s = await c.createSession({ message: "hello" });
      const types: string[] = [];
      const watching = new AbortController();
      for await (const ev of c.watchSession(s.id, 0n, { signal: watching.signal })) {
        types.push(ev.type);
        if (ev.type === "turn_completed" || ev.type === "turn_ended" || types.length > 50) break;
        const got = await c.getSession(s.id);
        if (got.session?.status === SessionStatus.IDLE && got.session.history.length >= 2) break;
      }
      assert.ok(types.length > 0, "events were delivered");
      await waitFor("the session to be idle", async () => ((await c.getSession(s.id)).session?.status === SessionStatus.IDLE ? true : undefined));
      await c.deleteSession(s.id);
      await assert.rejects(c.getSession(s.id), (e: unknown) => codeOf(e) === Code.NotFound);
      await assert.rejects(c.sendMessage("no-such-session", "hi"), (e: unknown) => codeOf(e) === Code.NotFound);
    } finally {
      stop.abort();
      await running;
    }
  });
});
