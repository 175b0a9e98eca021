// The two test lanes: test/*.test.ts run in make test (as in npm test) and
// start no process; the tests that start processes (dexd, Workers, dexchaos,
// node) are in test/e2e/ and run in make e2e (as in npm run test:e2e). A
// test file anywhere else would run in neither.
import { it } from "node:test";
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";

const testDir = join(import.meta.dirname, "../../test"); // the sources, from dist/test

function walk(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((d) => (d.isDirectory() ? walk(join(dir, d.name)) : [join(dir, d.name)]));
}

it("each test file is in one lane, and those of make test start no process", () => {
  const files = walk(testDir).filter((f) => f.endsWith(".ts")).map((f) => relative(testDir, f));
  assert.ok(files.includes("lanes.test.ts"), `no test sources in ${testDir}`);
  for (const f of files) {
    if (f.endsWith(".test.ts")) assert.match(f, /^(e2e\/)?[^/]+$/, `${f} is in neither test/ (make test) nor test/e2e/ (make e2e)`);
    if (f.includes("/")) continue;
    const src = readFileSync(join(testDir, f), "utf8");
    assert.doesNotMatch(src, /from "(node:)?child_process"/, `${f} starts processes: its tests belong in test/e2e/`);
    assert.doesNotMatch(src, /from "\.\/e2e\//, `${f} uses a helper of test/e2e/ (which starts processes): its tests belong in test/e2e/`);
  }
});
