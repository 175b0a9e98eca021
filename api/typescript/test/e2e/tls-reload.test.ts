// SIGHUP reloads the demo Worker's TLS files, as dexworker's: new connections
// use the new files; a reload that fails keeps the files in use and says why.
// Against a real dexd with mutual TLS, started again (same data dir and
// ports) with another CA, or the same, so that the Worker must connect again.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { dial } from "../../src/index.js";
import { binDir, haveDexd } from "./cluster.js";
import { clientFiles, DemoWorker, haveDexctl, install, makePki, runSession, TlsNode, type TlsFiles } from "./demo-worker.js";

const skip = !haveDexd || !haveDexctl ? `no dexd or dexctl in ${binDir} (make build)` : false;

/** Two CAs, A and B, and the Worker's own copies of A's client files, rotated in place. */
function setup(): { dir: string; a: string; b: string; files: TlsFiles } {
  const dir = mkdtempSync(join(tmpdir(), "dexts-tls-"));
  const a = makePki(join(dir, "pki-a"));
  const b = makePki(join(dir, "pki-b"));
  mkdirSync(join(dir, "worker-tls"));
  const files = { caFile: join(dir, "worker-tls", "ca.pem"), certFile: join(dir, "worker-tls", "client.pem"), keyFile: join(dir, "worker-tls", "client-key.pem") };
  install(clientFiles(a), files);
  return { dir, a, b, files };
}

function worker(node: TlsNode, dir: string, files: TlsFiles): DemoWorker {
  return new DemoWorker(["--addr", node.addr, "--ledger", join(dir, "ledger.jsonl"), "--id", "w-tls", "--poll-wait", "1s",
    "--tls-cert", files.certFile, "--tls-key", files.keyFile, "--tls-ca", files.caFile]);
}

describe("SIGHUP and the demo Worker's TLS files", { skip }, () => {
  it("makes the Worker connect with the new files", async () => {
    const { dir, a, b, files } = setup();
    let node = await TlsNode.start(dir, a);
    const w = worker(node, dir, files);
    try {
      await w.waitFor("registered with leader n1");
      assert.match(await runSession(node.addr, clientFiles(a)), /^Done:/);

      // The cluster moves to CA B: the Worker, on A's files, cannot reach it.
      await node.stop();
      node = await TlsNode.start(dir, b, node.ports);
      let answered = false;
      const left = runSession(node.addr, clientFiles(b), 60_000).finally(() => (answered = true));
      left.catch(() => {}); // awaited below
      await new Promise((r) => setTimeout(r, 2000));
      assert.equal(answered, false, "the Worker reached a cluster of another CA with its old files");

      install(clientFiles(b), files);
      const mark = w.lines.length;
      w.p.kill("SIGHUP");
      await w.waitFor("SIGHUP: TLS files reloaded", 10_000, mark);
      assert.match(await left, /^Done:/, "the Worker did not connect with the new files");
    } finally {
      assert.equal(await w.stop(), 0, w.text());
      await node.stop();
      rmSync(dir, { recursive: true, force: true });
    }
    assert.doesNotMatch(w.text(), /reloading the TLS files failed/);
  });

  it("that fails to reload keeps the files in use and says why", async () => {
    const { dir, a, files } = setup();
    let node = await TlsNode.start(dir, a);
    const w = worker(node, dir, files);
    try {
      await w.waitFor("registered with leader n1");
      for (const f of [files.caFile, files.certFile, files.keyFile]) writeFileSync(f, "garbage\n");
      const mark = w.lines.length;
      w.p.kill("SIGHUP");
      const failed = await w.waitFor("SIGHUP: reloading the TLS files failed; the current ones stay in use", 10_000, mark);
      assert.match(String(failed.error), new RegExp(`CA bundle ${files.caFile} holds no PEM certificate`));

      // A new connection (the cluster started again) still uses A's files.
      await node.stop();
      node = await TlsNode.start(dir, a, node.ports);
      assert.match(await runSession(node.addr, clientFiles(a)), /^Done:/);
      assert.equal(w.p.exitCode, null, "a failed reload stopped the Worker");
    } finally {
      assert.equal(await w.stop(), 0, w.text());
      await node.stop();
      rmSync(dir, { recursive: true, force: true });
    }
    assert.doesNotMatch(w.text(), /SIGHUP: TLS files reloaded/);
  });
});

describe("Channel.reloadTls", { skip }, () => {
  it("refuses a half-rotated pair, then takes the whole one", () => {
    const { dir, a, b, files } = setup();
    const ch = dial("127.0.0.1:1", { token: "", tls: files });
    try {
      // B's certificate with A's key (its key not yet written): no pair.
      install({ ...clientFiles(b), keyFile: clientFiles(a).keyFile }, files);
      assert.throws(() => ch.reloadTls(), new RegExp(`certificate ${files.certFile} / key ${files.keyFile}: not a PEM certificate and its key`));
      install(clientFiles(b), files);
      ch.reloadTls();
    } finally {
      ch.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
