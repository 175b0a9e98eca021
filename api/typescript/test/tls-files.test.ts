// TLS files are checked as they are read, at dial and at every reload: a file
// that is not PEM is refused naming it, and a reload of a channel without TLS
// says there is nothing to reload.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { dial } from "../src/index.js";

describe("TLS files", () => {
  it("that are not PEM are refused, naming the file", () => {
    const dir = mkdtempSync(join(tmpdir(), "dexts-tls-"));
    try {
      const garbage = join(dir, "garbage.pem");
      writeFileSync(garbage, "not a certificate\n");
      assert.throws(() => dial("127.0.0.1:1", { tls: { caFile: garbage, certFile: garbage, keyFile: garbage } }),
        new RegExp(`TLS: CA bundle ${garbage} holds no PEM certificate`));
      const missing = join(dir, "missing.pem");
      assert.throws(() => dial("127.0.0.1:1", { tls: { caFile: missing, certFile: garbage, keyFile: garbage } }),
        new RegExp(`TLS: CA bundle ${missing}: ENOENT`));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("cannot be reloaded on a channel without TLS", () => {
    const ch = dial("127.0.0.1:1", { token: "" });
    try {
      assert.equal(ch.usesTls, false);
      assert.throws(() => ch.reloadTls(), /does not use TLS/);
    } finally {
      ch.close();
    }
  });
});
