// The schedule calls against a fake node on 127.0.0.1: the request's fields
// sent, the schedule resolved, a create retried after its answer was lost
// resolves the schedule that try made, refusals thrown with their code, a
// bad policy name refused before any call.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import http2 from "node:http2";
import type { AddressInfo } from "node:net";
import { create } from "@bufbuild/protobuf";
import { Code, ConnectError, type ServiceImpl } from "@connectrpc/connect";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import {
  ScheduleCatchUp, ScheduleOverlap, ScheduleSchema, ScheduleService, type CreateScheduleRequest, type Schedule,
} from "../gen/dex/v1/schedules_pb.js";
import { Client, codeOf, dial } from "../src/index.js";

class ScheduleNode {
  addr = "";
  requests: CreateScheduleRequest[] = [];
  schedules = new Map<string, Schedule>();
  lose = 0;
  triggers = 0;
  private server?: http2.Http2Server;

  private get(id: string): Schedule {
    const s = this.schedules.get(id);
    if (s === undefined) throw new ConnectError(`schedule "${id}" not found`, Code.NotFound);
    return s;
  }

  async start(): Promise<this> {
    const impl: Partial<ServiceImpl<typeof ScheduleService>> = {
      createSchedule: (req) => {
        this.requests.push(req);
        if (req.cron === "61 * * * *") throw new ConnectError('bad cron expression "61 * * * *"', Code.InvalidArgument);
        if (this.schedules.has(req.scheduleId)) throw new ConnectError(`schedule "${req.scheduleId}" already exists`, Code.AlreadyExists);
        const s = create(ScheduleSchema, {
          id: req.scheduleId, cron: req.cron, timeZone: req.timeZone, intervalMs: req.intervalMs, message: req.message,
          labels: req.labels, overlap: req.overlap, catchUp: req.catchUp, nextSlotMs: 1767258000000n,
        });
        this.schedules.set(s.id, s);
        if (this.lose > 0) {
          this.lose--;
          throw new ConnectError("leadership lost", Code.Unavailable);
        }
        return { schedule: s };
      },
      getSchedule: (req) => ({ schedule: this.get(req.scheduleId) }),
      listSchedules: () => ({ schedules: [...this.schedules.values()] }),
      pauseSchedule: (req) => {
        const s = this.get(req.scheduleId);
        s.paused = true;
        s.nextSlotMs = 0n;
        return { schedule: s };
      },
      resumeSchedule: (req) => {
        const s = this.get(req.scheduleId);
        s.paused = false;
        s.nextSlotMs = 1767261600000n;
        return { schedule: s };
      },
      deleteSchedule: (req) => {
        this.get(req.scheduleId);
        this.schedules.delete(req.scheduleId);
        return {};
      },
      triggerSchedule: (req) => {
        this.get(req.scheduleId);
        this.triggers++;
        return { sessionId: `${req.scheduleId}-1767258000000` };
      },
    };
    this.server = http2.createServer(connectNodeAdapter({ grpc: true, connect: false, grpcWeb: false, routes: (r) => r.service(ScheduleService, impl) }));
    await new Promise<void>((res) => this.server!.listen(0, "127.0.0.1", () => res()));
    this.addr = `127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this;
  }

  async stop(): Promise<void> {
    await new Promise<void>((res) => {
      this.server?.close(() => res());
      setTimeout(res, 200);
    });
  }
}

async function withNode(body: (client: Client, node: ScheduleNode) => Promise<void>): Promise<void> {
  const node = await new ScheduleNode().start();
  const ch = dial(node.addr, { token: "" });
  try {
    await body(new Client(ch), node);
  } finally {
    ch.close();
    await node.stop();
  }
}

async function failure(p: Promise<unknown>): Promise<unknown> {
  try {
    await p;
  } catch (e) {
    return e;
  }
  assert.fail("resolved; want a rejection");
}

describe("schedules", () => {
  it("sends the fields given and resolves the answers", async () => {
    await withNode(async (client, node) => {
      node.lose = 1;
      const created = await client.createSchedule({
        scheduleId: "nightly", cron: "0 9 * * 1-5", timeZone: "Europe/Paris", message: "write the report",
        labels: { team: "ops" }, overlap: "queue_one", catchUp: "latest",
      });
      const req = node.requests[0];
      assert.deepEqual([req.scheduleId, req.cron, req.timeZone, req.message, req.overlap, req.catchUp],
        ["nightly", "0 9 * * 1-5", "Europe/Paris", "write the report", ScheduleOverlap.QUEUE_ONE, ScheduleCatchUp.LATEST]);
      assert.deepEqual(req.labels.map((l) => `${l.key}=${l.value}`), ["team=ops"]);
      // The first try's answer was lost; the retry found the schedule it made.
      assert.equal(node.requests.length, 2);
      assert.equal(created.nextSlotMs, 1767258000000n);
      assert.deepEqual((await client.listSchedules()).map((s) => s.id), ["nightly"]);
      assert.equal((await client.pauseSchedule("nightly")).nextSlotMs, 0n);
      assert.equal((await client.resumeSchedule("nightly")).nextSlotMs, 1767261600000n);
      assert.equal(await client.triggerSchedule("nightly"), "nightly-1767258000000");
      assert.equal(node.triggers, 1);
      await client.deleteSchedule("nightly");
      assert.equal(codeOf(await failure(client.getSchedule("nightly"))), Code.NotFound);
    });
  });

  it("throws refusals with their code and refuses a bad policy before any call", async () => {
    await withNode(async (client, node) => {
      assert.equal(codeOf(await failure(client.createSchedule({ scheduleId: "s", cron: "61 * * * *" }))), Code.InvalidArgument);
      await assert.rejects(client.createSchedule({ scheduleId: "s", intervalMs: 1000, overlap: "sometimes" as "skip" }), RangeError);
      await assert.rejects(client.createSchedule({ scheduleId: "s", intervalMs: 1000, catchUp: "never" as "skip" }), RangeError);
      assert.equal(codeOf(await failure(client.triggerSchedule("nope"))), Code.NotFound);
      assert.equal(node.requests.length, 1);
      assert.equal(node.schedules.size, 0);
    });
  });
});
