// The first Worker's fake model (examples/first-worker.ts) and its rules; the
// first Worker run as a process is in e2e/first-worker.test.ts.
import { it } from "node:test";
import assert from "node:assert/strict";
import { create } from "@bufbuild/protobuf";
import { HistoryEntrySchema, HistoryKind, type HistoryEntry, type ModelInput } from "../src/index.js";
import { fakeModel } from "../examples/first-worker.js";

const entry = (seq: bigint, kind: HistoryKind, text = "", tool = "", callId = ""): HistoryEntry =>
  create(HistoryEntrySchema, { seq, kind, text, tool, callId });
const input = (...history: HistoryEntry[]) => ({ history }) as unknown as ModelInput;

it("the first Worker's fake model answers by its rules", () => {
  assert.deepEqual(fakeModel(input(entry(3n, HistoryKind.USER, "What is Dex?"))), {
    toolCalls: [
      { callId: "call-3-1", tool: "lookup", arguments: { query: "What is Dex?" } },
      { callId: "call-3-2", tool: "save_note", arguments: { note: "What is Dex?" } },
    ],
  });
  assert.deepEqual(fakeModel(input(entry(1n, HistoryKind.USER, "Deploy the app"))), {
    toolCalls: [{ callId: "call-1-1", tool: "deploy", arguments: { service: "demo", request: "Deploy the app" } }],
  });
  assert.equal(fakeModel(input(entry(1n, HistoryKind.USER, "please ask me"))).toolCalls![0].tool, "ask_user");
  // The words of the Go demo Worker: runs of letters, "deploy" before "ask".
  assert.deepEqual(fakeModel(input(entry(1n, HistoryKind.USER, "ask, then deploy_2"))).toolCalls!.map((c) => c.tool), ["deploy"]);
  for (const other of ["a task", "redeploy it", "Email the team"]) {
    assert.deepEqual(fakeModel(input(entry(1n, HistoryKind.USER, other))).toolCalls!.map((c) => c.tool), ["lookup", "save_note"], other);
  }
  assert.deepEqual(fakeModel(input(entry(1n, HistoryKind.USER, "hi"), entry(2n, HistoryKind.ASSISTANT),
    entry(3n, HistoryKind.TOOL_RESULT, "found \"hi\"", "lookup"))), { text: "Done. lookup: found \"hi\"." });
  // The tools finish in any order; the answer follows the calls'.
  assert.deepEqual(fakeModel(input(entry(1n, HistoryKind.USER, "hi"), entry(2n, HistoryKind.ASSISTANT),
    entry(3n, HistoryKind.TOOL_RESULT, "saved note 1", "save_note", "call-1-2"),
    entry(4n, HistoryKind.TOOL_RESULT, "found \"hi\"", "lookup", "call-1-1"))), { text: "Done. lookup: found \"hi\". save_note: saved note 1." });
  assert.deepEqual(fakeModel(input(entry(1n, HistoryKind.SUMMARY, "s"))), { text: "Done." });
});
