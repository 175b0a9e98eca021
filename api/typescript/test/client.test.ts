// The client's session options: createSession's dispatch order (priority,
// fairness key and weight) and budget, setBudget; checked before any call,
// against an in-memory SessionService.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { create } from "@bufbuild/protobuf";
import { Code, ConnectError, createRouterTransport } from "@connectrpc/connect";
import { SessionService, type CreateSessionRequest, type SetBudgetRequest } from "../gen/dex/v1/sessions_pb.js";
import { BudgetSchema, SessionSchema } from "../gen/dex/v1/types_pb.js";
import { Client, maxFairnessKeyBytes, maxFairnessWeight, maxPriority } from "../src/index.js";

/** A client of an in-memory SessionService that keeps the requests it gets; refuse answers the next calls with an error. */
function fakeService() {
  const created: CreateSessionRequest[] = [];
  const budgets: SetBudgetRequest[] = [];
  const refuse: ConnectError[] = [];
  const transport = createRouterTransport(({ service }) => {
    service(SessionService, {
      createSession: (req) => {
        created.push(req);
        return {
          session: create(SessionSchema, {
            id: req.sessionId || "s-new", priority: req.priority || 3, fairnessKey: req.fairnessKey, fairnessWeight: req.fairnessWeight || 1,
            budget: req.budget,
          }),
        };
      },
      setBudget: (req) => {
        const e = refuse.shift();
        if (e) throw e;
        budgets.push(req);
        return { session: create(SessionSchema, { id: req.sessionId, budget: { maxTokens: req.change?.maxTokens ?? 0n } }) };
      },
    });
  });
  return { client: new Client(transport), created, budgets, refuse };
}

describe("createSession", () => {
  it("sends the priority, fairness key and weight, and a budget of numbers or bigints", async () => {
    const { client, created } = fakeService();
    const s = await client.createSession({
      message: "hello", priority: 5, fairnessKey: "tenant-a", fairnessWeight: 4,
      budget: { maxTokens: 100_000, maxCostMicros: 2_500_000n, maxModelCallsPerTurn: 8, loopLimit: 4 },
    });
    assert.deepEqual([s.priority, s.fairnessKey, s.fairnessWeight], [5, "tenant-a", 4]);
    const req = created[0];
    assert.deepEqual([req.message, req.priority, req.fairnessKey, req.fairnessWeight], ["hello", 5, "tenant-a", 4]);
    assert.deepEqual(
      [req.budget?.maxTokens, req.budget?.maxCostMicros, req.budget?.maxTurns, req.budget?.maxModelCallsPerTurn, req.budget?.maxToolCallsPerTurn, req.budget?.loopLimit],
      [100_000n, 2_500_000n, 0n, 8, 0, 4],
    );
  });

  it("leaves them out when not given (the parent's, else the defaults), and takes a Budget message", async () => {
    const { client, created } = fakeService();
    await client.createSession({ message: "hi" });
    assert.deepEqual([created[0].priority, created[0].fairnessKey, created[0].fairnessWeight, created[0].budget], [0, "", 0, undefined]);
    await client.createSession({ priority: 0, fairnessWeight: 0, budget: create(BudgetSchema, { maxTurns: 12n }) });
    assert.equal(created[1].budget?.maxTurns, 12n);
    await client.createSession({ priority: 1, fairnessWeight: maxFairnessWeight, fairnessKey: "k".repeat(maxFairnessKeyBytes) });
    assert.deepEqual([created[2].priority, created[2].fairnessWeight], [1, 1000]);
  });

  it("refuses an out-of-range priority, weight, key or budget before any call", async () => {
    const { client, created } = fakeService();
    const refused: [string, Parameters<Client["createSession"]>[0], RegExp][] = [
      ["priority 6", { priority: 6 }, /createSession: priority 6 is not between 1 and 5 \(0 or left out: the parent's, else 3\)/],
      ["priority -1", { priority: -1 }, /priority -1 is not between 1 and 5/],
      ["priority 2.5", { priority: 2.5 }, /priority 2.5 is not between 1 and 5/],
      ["priority NaN", { priority: Number.NaN }, /priority NaN is not between 1 and 5/],
      ["weight 1001", { fairnessWeight: 1001 }, /createSession: fairness weight 1001 is not between 1 and 1000 \(0 or left out: the parent's, else 1\)/],
      ["weight -3", { fairnessWeight: -3 }, /fairness weight -3 is not between 1 and 1000/],
      ["a priority as a string", { priority: "3" as never }, /createSession: the priority must be a number, not a string/],
      ["a weight as a bigint", { fairnessWeight: 2n as never }, /createSession: the fairness weight must be a number, not a bigint/],
      ["a long key", { fairnessKey: "é".repeat(129) }, /the fairness key is longer than 256 bytes/],
      ["a key not a string", { fairnessKey: 7 as never }, /the fairness key must be a string, not a number/],
      ["a negative budget", { budget: { maxTokens: -1 } }, /createSession: budget maxTokens must be a whole number from 0 to 18446744073709551615, not -1/],
      ["a fractional budget", { budget: { maxCostMicros: 1.5 } }, /budget maxCostMicros must be a whole number from 0 to 18446744073709551615, not 1.5/],
      ["a uint32 budget field too big", { budget: { loopLimit: 2 ** 32 } }, /budget loopLimit must be a whole number from 0 to 4294967295, not 4294967296/],
      ["a uint64 budget field too big", { budget: { maxTurns: 1n << 64n } }, /budget maxTurns must be a whole number from 0 to 18446744073709551615, not 18446744073709551616n/],
      ["a budget count as a string", { budget: { maxTokens: "5" as never } }, /budget maxTokens must be a whole number .*, not "5"/],
      ["an unknown budget field", { budget: { max_tokens: 5 } as never }, /createSession: budget: unknown field "max_tokens": want one of maxTokens, maxCostMicros/],
    ];
    for (const [name, req, want] of refused) await assert.rejects(client.createSession(req), want, name);
    await assert.rejects(client.createSession({ priority: 9 }), RangeError);
    await assert.rejects(client.createSession({ fairnessKey: 7 as never }), TypeError);
    assert.equal(created.length, 0, "no call went out");
    assert.deepEqual([maxPriority, maxFairnessWeight, maxFairnessKeyBytes], [5, 1000, 256]);
  });
});

describe("setBudget", () => {
  it("sends only the fields given, 0 among them (no limit), and resolves the session", async () => {
    const { client, budgets } = fakeService();
    const s = await client.setBudget("s1", { maxTokens: 0, maxTurns: 40n, maxToolCallsPerTurn: 6 });
    assert.equal(s.id, "s1");
    const c = budgets[0].change!;
    assert.equal(budgets[0].sessionId, "s1");
    assert.deepEqual([c.maxTokens, c.maxTurns, c.maxToolCallsPerTurn], [0n, 40n, 6]);
    // Left out: kept as they are.
    assert.deepEqual([c.maxCostMicros, c.maxModelCallsPerTurn, c.loopLimit], [undefined, undefined, undefined]);
  });

  it("is retried across a transient error: a repeat sets the same values", async () => {
    const { client, budgets, refuse } = fakeService();
    refuse.push(new ConnectError("no leader", Code.Unavailable));
    const s = await client.setBudget("s1", { maxTokens: 5000 });
    assert.equal(s.budget?.maxTokens, 5000n);
    assert.equal(budgets.length, 1);
  });

  it("refuses no field, or a bad one, before any call", async () => {
    const { client, budgets } = fakeService();
    await assert.rejects(client.setBudget("s1", {}), /setBudget: give at least one of maxTokens, maxCostMicros, maxTurns/);
    await assert.rejects(client.setBudget("s1", { maxTokens: undefined }), /give at least one of/);
    await assert.rejects(client.setBudget("s1", { maxModelCallsPerTurn: -1 }), /setBudget maxModelCallsPerTurn must be a whole number from 0 to 4294967295, not -1/);
    await assert.rejects(client.setBudget("s1", { turns: 3 } as never), /setBudget: unknown field "turns"/);
    await assert.rejects(client.setBudget("s1", null as never), /setBudget must be an object of budget fields/);
    assert.equal(budgets.length, 0, "no call went out");
  });
});
