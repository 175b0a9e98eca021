import { randomBytes } from "node:crypto";
import { Code, ConnectError, createClient, type Client as ConnectClient, type Transport } from "@connectrpc/connect";
import {
  BulkJobStatus, SessionService, type BulkJob, type CancelSessionResponse, type CreateSessionRequest, type EditHistoryResponse, type GetSessionResponse,
  type ListSessionsResponse, type SessionSummary,
} from "../gen/dex/v1/sessions_pb.js";
import { Outcome, ResumeChoice, type BudgetSchema, type Event, type HistoryEntry, type Session, type Step } from "../gen/dex/v1/types_pb.js";
import type { MessageInitShape } from "@bufbuild/protobuf";
import type { CreateSessionRequestSchema } from "../gen/dex/v1/sessions_pb.js";
import {
  ScheduleCatchUp, ScheduleOverlap, ScheduleService, type Schedule,
} from "../gen/dex/v1/schedules_pb.js";
import { bulkRequest, type StartBulkActionInit, type WaitBulkJobOptions } from "./bulk.js";
import { inSession } from "./channel.js";
import { isCallOptions, listRequest, setLabelsRequest, type SessionFilter, type SessionPageRequest } from "./list.js";
import { isRecord, str, whole } from "./check.js";
import { codeOf } from "./errors.js";
import { LiveOffsets } from "./live.js";
import { Backoff, notApplied, sleep, transient } from "./retry.js";

export interface CallOptions {
  signal?: AbortSignal;
  /** Bounds one try (default 10 s); calls are repeated across a takeover until signal aborts. */
  timeoutMs?: number;
}

/**
 * Dispatch order (docs/flow-control.md): a session's priority is 1 (lowest)
 * to maxPriority, its fairness weight 1 to maxFairnessWeight (0 for either:
 * the parent's, else priority 3 and weight 1); a fairness key is at most
 * maxFairnessKeyBytes bytes.
 */
export const maxPriority = 5;
export const maxFairnessWeight = 1000;
export const maxFairnessKeyBytes = 256;

/**
 * A session's budget (docs/budgets.md), its counts as numbers or bigints.
 * In createSession each field given (non-zero) replaces the agent's default;
 * in setBudget each field given replaces the session's (0: no limit) and a
 * field left out keeps its value.
 */
export interface BudgetInit {
  /** Input and output tokens, the session's own and its children's. */
  maxTokens?: number | bigint;
  /** Cost in millionths of a currency unit, its own and its children's. */
  maxCostMicros?: number | bigint;
  /** Turns started. */
  maxTurns?: number | bigint;
  maxModelCallsPerTurn?: number | bigint;
  maxToolCallsPerTurn?: number | bigint;
  /** The same tool call this many times in one turn pauses the session (0: the default, 3). */
  loopLimit?: number | bigint;
}

/** What createSession takes: CreateSessionRequest's fields, with a BudgetInit as its budget. */
export type CreateSessionInit = Omit<MessageInitShape<typeof CreateSessionRequestSchema>, "budget"> & { budget?: BudgetInit };

const maxUint32 = 0xffffffffn;
const maxUint64 = (1n << 64n) - 1n;
/** A budget's fields and the largest value of each (uint64 or uint32 on the wire). */
const budgetFields: Record<keyof BudgetInit, bigint> = {
  maxTokens: maxUint64, maxCostMicros: maxUint64, maxTurns: maxUint64, maxModelCallsPerTurn: maxUint32, maxToolCallsPerTurn: maxUint32,
  loopLimit: maxUint32,
};

/**
 * The budget fields given in b, checked (known names, whole numbers in
 * range): the uint64 ones as bigints, the uint32 ones as numbers. A field
 * left out (undefined) stays out.
 */
function budgetFieldsOf(what: string, b: unknown): Record<string, bigint | number> {
  if (typeof b !== "object" || b === null || Array.isArray(b)) throw new TypeError(`${what} must be an object of budget fields`);
  const out: Record<string, bigint | number> = {};
  for (const [k, v] of Object.entries(b)) {
    if (k.startsWith("$") || v === undefined) continue; // a message's $typeName; a field left out
    const hi = budgetFields[k as keyof BudgetInit];
    if (hi === undefined) throw new TypeError(`${what}: unknown field ${JSON.stringify(k)}: want one of ${Object.keys(budgetFields).join(", ")}`);
    const n = whole(`${what} ${k}`, v, 0n, hi);
    out[k] = hi === maxUint64 ? n : Number(n);
  }
  return out;
}

/** Checks that v, a priority or fairness weight (what, its default when 0), is a whole number from 1 to hi, or 0 or left out. */
function checkOrderNumber(what: string, v: unknown, hi: number, byDefault: string): void {
  if (v === undefined || v === 0) return;
  if (typeof v !== "number") throw new TypeError(`createSession: the ${what} must be a number, not a ${typeof v}`);
  if (!Number.isInteger(v) || v < 1 || v > hi) {
    throw new RangeError(`createSession: ${what} ${v} is not between 1 and ${hi} (0 or left out: the parent's, else ${byDefault})`);
  }
}

/** Checks a new session's dispatch order: a RangeError or TypeError naming the field, before any call. */
function checkDispatchOrder(req: CreateSessionInit): void {
  checkOrderNumber("priority", req.priority, maxPriority, "3");
  checkOrderNumber("fairness weight", req.fairnessWeight, maxFairnessWeight, "1");
  if (req.fairnessKey !== undefined) {
    if (typeof req.fairnessKey !== "string") throw new TypeError(`createSession: the fairness key must be a string, not a ${typeof req.fairnessKey}`);
    if (Buffer.byteLength(req.fairnessKey, "utf8") > maxFairnessKeyBytes) {
      throw new RangeError(`createSession: the fairness key is longer than ${maxFairnessKeyBytes} bytes`);
    }
  }
}

/**
 * What forkSession takes (docs/forks.md): the session forked and the entry
 * (seq, from 1) its copied history ends with; the rest optional.
 */
export interface ForkSessionInit {
  sourceSessionId: string;
  /** The source's history entry the fork's history ends with (inclusive). */
  atSeq: number | bigint;
  /** The fork's first message, which starts its first turn. */
  message?: string;
  /** The fork's labels ({ key: value }), replacing the source's (left out: the source's). */
  labels?: Record<string, string>;
  /** The fork's agent, NAME or NAME@VERSION (left out: the source's). */
  agent?: string;
  /** The fork's id, of the source's partition (left out: the cluster draws one, and the call is not retried). */
  sessionId?: string;
}

/**
 * What createSchedule takes (docs/schedules.md): the schedule's id and one
 * of cron (with timeZone, IANA; left out: UTC) or intervalMs; the rest optional.
 */
export interface CreateScheduleInit {
  scheduleId: string;
  cron?: string;
  timeZone?: string;
  intervalMs?: number | bigint;
  /** The template of each slot's session. */
  agent?: string;
  message?: string;
  labels?: Record<string, string>;
  /** A slot while the previous slot's session runs (default skip). */
  overlap?: "skip" | "queue_one" | "allow";
  /** Slots missed while the cluster was down (default skip). */
  catchUp?: "skip" | "latest" | "all";
  paused?: boolean;
}

const overlaps = { skip: ScheduleOverlap.SKIP, queue_one: ScheduleOverlap.QUEUE_ONE, allow: ScheduleOverlap.ALLOW } as const;
const catchUps = { skip: ScheduleCatchUp.SKIP, latest: ScheduleCatchUp.LATEST, all: ScheduleCatchUp.ALL } as const;

/** A fork's labels as the request's ([]: the source's). The cluster checks keys and values (docs/labels.md). */
function forkLabels(labels: unknown): { key: string; value: string }[] {
  if (labels === undefined) return [];
  if (!isRecord(labels)) {
    throw new TypeError("forkSession: labels must be an object of key to value");
  }
  const out = Object.entries(labels).map(([key, value]) => ({ key, value: str(`forkSession: label ${JSON.stringify(key)}'s value`, value) }));
  // No label on the wire keeps the source's: say so rather than keep them when asked for none.
  if (out.length === 0) throw new RangeError("forkSession: labels is empty: a fork has the source's labels (left out) or the ones given; it cannot drop them all");
  return out;
}

/** A fresh session id. */
export function newSessionId(): string {
  return "s-" + randomBytes(8).toString("hex");
}

/** A fresh idempotency key for sendMessage. */
export function newIdempotencyKey(): string {
  return "key-" + randomBytes(16).toString("hex");
}

/**
 * A client of the SessionService: sessions, forks, messages, budgets, approvals,
 * questions, reconciles, history edits. On a Channel given the node list of
 * a partitioned cluster a call that names a session (or a Step, or a
 * create's parent or id) goes to the leader of the session's partition once
 * the channel has learned it (Channel).
 */
export class Client {
  private readonly svc: ConnectClient<typeof SessionService>;
  private readonly sched: ConnectClient<typeof ScheduleService>;

  constructor(transport: Transport) {
    this.svc = createClient(SessionService, transport);
    this.sched = createClient(ScheduleService, transport);
  }

  /**
   * Creates a schedule (docs/schedules.md). Retried: a repeat that finds the
   * schedule an earlier try created resolves it. A bad spec is thrown with
   * InvalidArgument; an unknown policy name throws a RangeError before any call.
   */
  async createSchedule(init: CreateScheduleInit, o: CallOptions = {}): Promise<Schedule> {
    if (typeof init !== "object" || init === null) throw new TypeError("createSchedule: give { scheduleId, cron | intervalMs, ... }");
    const overlap = overlaps[init.overlap ?? "skip"];
    if (overlap === undefined) throw new RangeError(`createSchedule: overlap ${JSON.stringify(init.overlap)}: use skip, queue_one or allow`);
    const catchUp = catchUps[init.catchUp ?? "skip"];
    if (catchUp === undefined) throw new RangeError(`createSchedule: catchUp ${JSON.stringify(init.catchUp)}: use skip, latest or all`);
    const req = {
      scheduleId: str("createSchedule: scheduleId", init.scheduleId), cron: str("createSchedule: cron", init.cron ?? ""),
      timeZone: str("createSchedule: timeZone", init.timeZone ?? ""), intervalMs: BigInt(init.intervalMs ?? 0),
      agent: str("createSchedule: agent", init.agent ?? ""), message: str("createSchedule: message", init.message ?? ""),
      labels: Object.entries(init.labels ?? {}).map(([key, value]) => ({ key, value: str(`createSchedule: label ${JSON.stringify(key)}'s value`, value) })),
      overlap, catchUp, paused: !!init.paused,
    };
    const tries = { n: 0 };
    try {
      return (await this.call(true, o, (co) => this.sched.createSchedule(req, co), tries)).schedule!;
    } catch (e) {
      if (tries.n > 1 && codeOf(e) === Code.AlreadyExists) {
        const got = await this.getSchedule(req.scheduleId, o);
        if (got.cron === req.cron && got.intervalMs === req.intervalMs && got.message === req.message) return got;
      }
      throw e;
    }
  }

  async getSchedule(scheduleId: string, o: CallOptions = {}): Promise<Schedule> {
    return (await this.call(true, o, (co) => this.sched.getSchedule({ scheduleId }, co))).schedule!;
  }

  /** Every schedule, by id. */
  async listSchedules(o: CallOptions = {}): Promise<Schedule[]> {
    return (await this.call(true, o, (co) => this.sched.listSchedules({}, co))).schedules;
  }

  async pauseSchedule(scheduleId: string, o: CallOptions = {}): Promise<Schedule> {
    return (await this.call(true, o, (co) => this.sched.pauseSchedule({ scheduleId }, co))).schedule!;
  }

  /** Resumes at the first slot after now. */
  async resumeSchedule(scheduleId: string, o: CallOptions = {}): Promise<Schedule> {
    return (await this.call(true, o, (co) => this.sched.resumeSchedule({ scheduleId }, co))).schedule!;
  }

  /** Deletes a schedule (its sessions stay); a retry that finds it gone resolves. */
  async deleteSchedule(scheduleId: string, o: CallOptions = {}): Promise<void> {
    const tries = { n: 0 };
    try {
      await this.call(true, o, (co) => this.sched.deleteSchedule({ scheduleId }, co), tries);
    } catch (e) {
      if (!(tries.n > 1 && codeOf(e) === Code.NotFound)) throw e;
    }
  }

  /** Starts one session of the schedule now and resolves its id; repeated only when a node refused it unread. */
  async triggerSchedule(scheduleId: string, o: CallOptions = {}): Promise<string> {
    return (await this.call(false, o, (co) => this.sched.triggerSchedule({ scheduleId }, co))).sessionId;
  }

  /**
   * Starts a bulk job (docs/bulk.md): init.action ("cancel", "resume",
   * "close", "delete" or "label") on every session init.filter matches that
   * was created up to the job's start. labels are what a label job sets,
   * reason what a cancel job's note gives; a delete with no filter needs
   * all. Resolves the job as it started (see waitBulkJob).
   *
   * The client draws jobId when none is given, so the call is retried: a
   * repeat that meets AlreadyExists resolves the job an earlier try started
   * when its answer was lost (the same action; anything else is thrown). A
   * refused start (InvalidArgument, AlreadyExists for a taken id,
   * FailedPrecondition when 100 jobs run) started nothing. An unknown
   * action or filter field, labels or a reason on a job that takes none, a
   * label job without labels or a delete of everything without all throws a
   * RangeError (a wrong type a TypeError) before any call.
   */
  async startBulkAction(init: StartBulkActionInit, o: CallOptions = {}): Promise<BulkJob> {
    const req = bulkRequest(init);
    const tries = { n: 0 };
    try {
      return (await this.call(true, o, (co) => this.svc.startBulkAction(req, co), tries)).job!;
    } catch (e) {
      if (tries.n > 1 && codeOf(e) === Code.AlreadyExists) {
        // An earlier try may have started the job before its answer was
        // lost: the job of this id is ours if it is this action.
        let got: BulkJob;
        try {
          got = await this.getBulkJob(req.jobId, o);
        } catch {
          throw e;
        }
        if (got.action === req.action) return got;
      }
      throw e;
    }
  }

  /** A job and its progress: status, acted, skipped (by why), failed. An unknown id is NotFound. */
  async getBulkJob(jobId: string, o: CallOptions = {}): Promise<BulkJob> {
    return (await this.call(true, o, (co) => this.svc.getBulkJob({ jobId }, co))).job!;
  }

  /** The jobs the cluster keeps (running or ended), newest first. */
  async listBulkJobs(o: CallOptions = {}): Promise<BulkJob[]> {
    return (await this.call(true, o, (co) => this.svc.listBulkJobs({}, co))).jobs;
  }

  /**
   * Stops a running job: the sessions already acted on stay as they are, no
   * further one is. A job that ended is left as it is, so the call is retried.
   */
  async cancelBulkJob(jobId: string, o: CallOptions = {}): Promise<BulkJob> {
    return (await this.call(true, o, (co) => this.svc.cancelBulkJob({ jobId }, co))).job!;
  }

  /**
   * Reads the job every w.intervalMs until it is no longer running (done or
   * cancelled) and resolves it as it ended, calling w.onProgress with each
   * read. Past w.waitMs with the job still running (a read in progress
   * included) it throws a DeadlineExceeded ConnectError; the job runs on.
   * An abort of o.signal throws Canceled.
   */
  async waitBulkJob(jobId: string, w: WaitBulkJobOptions = {}, o: CallOptions = {}): Promise<BulkJob> {
    const intervalMs = w.intervalMs ?? 1000;
    if (typeof intervalMs !== "number" || !(intervalMs > 0)) throw new RangeError(`waitBulkJob: intervalMs must be a number above 0, not ${String(intervalMs)}`);
    if (w.waitMs !== undefined && (typeof w.waitMs !== "number" || !(w.waitMs >= 0))) throw new RangeError(`waitBulkJob: waitMs must be a number from 0, not ${String(w.waitMs)}`);
    // One signal for the reads and the sleeps: the caller's, or the wait's end.
    const stop = new AbortController();
    let late = false;
    const timer = w.waitMs === undefined ? undefined : setTimeout(() => { late = true; stop.abort(); }, w.waitMs);
    const onAbort = () => stop.abort();
    o.signal?.addEventListener("abort", onAbort, { once: true });
    if (o.signal?.aborted) stop.abort();
    let last: BulkJob | undefined;
    const ended = (e?: unknown): unknown => {
      if (o.signal?.aborted) return new ConnectError(`waitBulkJob: bulk job ${jobId}: aborted`, Code.Canceled);
      if (late) {
        const seen = last === undefined ? "" : ` (${last.acted} acted on, ${last.steps} steps)`;
        return new ConnectError(`bulk job ${jobId} still running after ${w.waitMs} ms${seen}`, Code.DeadlineExceeded);
      }
      return e;
    };
    try {
      for (;;) {
        try {
          last = await this.getBulkJob(jobId, { ...o, signal: stop.signal });
        } catch (e) {
          throw ended(e);
        }
        w.onProgress?.(last);
        if (last.status !== BulkJobStatus.RUNNING) return last;
        if (!(await sleep(intervalMs, stop.signal))) throw ended();
      }
    } finally {
      clearTimeout(timer);
      o.signal?.removeEventListener("abort", onAbort);
    }
  }

  /**
   * Runs one call: idempotent calls are repeated on every transient error, the
   * others only on a refusal that changed nothing (a follower's). tries counts.
   */
  private async call<T>(idempotent: boolean, o: CallOptions, f: (co: { signal?: AbortSignal; timeoutMs: number }) => Promise<T>,
    tries = { n: 0 }): Promise<T> {
    const b = new Backoff(50, 250);
    for (;;) {
      tries.n++;
      try {
        return await f({ signal: o.signal, timeoutMs: o.timeoutMs ?? 10_000 });
      } catch (e) {
        const retry = notApplied(e) || (idempotent && transient(e, o.signal));
        if (!retry || o.signal?.aborted) throw e;
        if (tries.n > 1 && !(await sleep(b.next(), o.signal))) throw e;
      }
    }
  }

  /**
   * Creates a session. With sessionId set the call is idempotent and retried
   * (a repeat that finds the session created by an earlier try returns it).
   * budget: each field given (non-zero) replaces the agent's default
   * (docs/budgets.md). priority (1 lowest to 5 highest), fairnessKey and
   * fairnessWeight (1 to 1,000) order its dispatch (docs/flow-control.md);
   * 0 and "" are the parent's, else priority 3, no key, weight 1. A value
   * out of range throws a RangeError (a wrong type a TypeError) before any call.
   */
  async createSession(req: CreateSessionInit = {}, o: CallOptions = {}): Promise<Session> {
    checkDispatchOrder(req);
    // A CreateSessionRequest message is taken as its fields (its budget checked too).
    const { $typeName: _, budget, ...fields } = req as CreateSessionInit & { $typeName?: string };
    const init: MessageInitShape<typeof CreateSessionRequestSchema> = { ...fields };
    if (budget !== undefined && budget !== null) init.budget = budgetFieldsOf("createSession: budget", budget) as MessageInitShape<typeof BudgetSchema>;
    const idem = !!req.sessionId;
    const tries = { n: 0 };
    try {
      const resp = await this.call(idem, o, (co) => this.svc.createSession(init, co), tries);
      return resp.session!;
    } catch (e) {
      if (idem && tries.n > 1 && codeOf(e) === Code.AlreadyExists) {
        return (await this.getSession(req.sessionId!, o)).session!;
      }
      throw e;
    }
  }

  /**
   * Creates a session whose history is a copy of the source's up to and
   * including entry atSeq (docs/forks.md): nothing runs again. Resolves the
   * fork, which names its source (forkedFrom, forkedAtSeq) and lives in the
   * source's partition; with a message it starts its first turn. labels and
   * agent replace the source's. With sessionId set the call is idempotent
   * and retried (a repeat that finds the fork an earlier try made returns
   * it); without it the cluster draws the id and the call is repeated only
   * when a node refused it unread. A refusal (NotFound, InvalidArgument,
   * FailedPrecondition, ...) changed nothing and is thrown with its code.
   * An empty source id, an atSeq that is not a whole number from 1 or empty
   * labels throw a RangeError (a wrong type a TypeError) before any call.
   */
  async forkSession(init: ForkSessionInit, o: CallOptions = {}): Promise<Session> {
    if (typeof init !== "object" || init === null) throw new TypeError("forkSession: give { sourceSessionId, atSeq, ... }");
    const sourceSessionId = str("forkSession: sourceSessionId", init.sourceSessionId);
    if (sourceSessionId === "") throw new RangeError("forkSession: sourceSessionId is empty: give the id of the session to fork");
    const atSeq = whole("forkSession: atSeq", init.atSeq, 1n, maxUint64);
    const sessionId = str("forkSession: sessionId", init.sessionId ?? "");
    const req = {
      sourceSessionId, atSeq, sessionId, labels: forkLabels(init.labels),
      message: str("forkSession: message", init.message ?? ""), agent: str("forkSession: agent", init.agent ?? ""),
    };
    const idem = sessionId !== "";
    const tries = { n: 0 };
    try {
      const resp = await this.call(idem, o, (co) => this.svc.forkSession(req, co), tries);
      return resp.session!;
    } catch (e) {
      if (idem && tries.n > 1 && codeOf(e) === Code.AlreadyExists) {
        // An earlier try may have committed before its answer was lost: the
        // session of this id is ours if it is this fork.
        let got: Session | undefined;
        try {
          got = (await this.getSession(sessionId, o)).session;
        } catch {
          throw e;
        }
        if (got?.forkedFrom === sourceSessionId && got.forkedAtSeq === atSeq) return got;
      }
      throw e;
    }
  }

  /**
   * Changes the fields given of a session's budget (0: no limit); the others
   * keep their values (docs/budgets.md). Resolves the session with its new
   * budget. A session paused by its budget stays paused: resume it to go
   * on. No field, or one that is not a whole number in range, throws before
   * any call. The call sets values, so a repeat changes nothing: it is retried.
   */
  async setBudget(sessionId: string, change: BudgetInit, o: CallOptions = {}): Promise<Session> {
    const fields = budgetFieldsOf("setBudget", change);
    if (Object.keys(fields).length === 0) throw new TypeError(`setBudget: give at least one of ${Object.keys(budgetFields).join(", ")}`);
    const resp = await this.call(true, o, (co) => this.svc.setBudget({ sessionId, change: fields }, co));
    return resp.session!;
  }

  /**
   * Delivers text to a session, exactly once: the same idempotency key (given
   * or generated) goes with every retry. Resolves whether the cluster had
   * already seen the key.
   */
  async sendMessage(sessionId: string, text: string, idempotencyKey = "", o: CallOptions = {}): Promise<{ duplicate: boolean }> {
    const req = { sessionId, text, idempotencyKey: idempotencyKey || newIdempotencyKey() };
    const tries = { n: 0 };
    const resp = await this.call(true, o, (co) => this.svc.sendMessage(req, co), tries);
    // A duplicate on a retry is our own earlier try.
    return { duplicate: resp.duplicate && tries.n === 1 };
  }

  /** A session with its whole history and all its Steps, read page by page. */
  async getSession(sessionId: string, o: CallOptions = {}): Promise<GetSessionResponse> {
    let req = { sessionId, historyAfterSeq: 0n, stepsAfter: 0n };
    const history: HistoryEntry[] = [];
    const steps: Step[] = [];
    let historyDone = false;
    let stepsDone = false;
    for (;;) {
      const resp = await this.call(true, o, (co) => this.svc.getSession(req, co));
      if (!historyDone) history.push(...(resp.session?.history ?? []));
      if (!stepsDone) steps.push(...resp.steps);
      historyDone ||= resp.nextHistoryAfterSeq === 0n;
      stepsDone ||= resp.nextStepsAfter === 0n;
      if (historyDone && stepsDone) {
        if (resp.session) resp.session.history = history;
        resp.steps = steps;
        resp.nextHistoryAfterSeq = 0n;
        resp.nextStepsAfter = 0n;
        return resp;
      }
      // A part already read whole is asked for from its end.
      req = { sessionId, historyAfterSeq: resp.nextHistoryAfterSeq, stepsAfter: resp.nextStepsAfter };
      if (historyDone && history.length > 0) req.historyAfterSeq = history[history.length - 1].seq;
      if (stepsDone && steps.length > 0) req.stepsAfter = steps[steps.length - 1].number;
    }
  }

  /**
   * Every session, by id, reading every page: listSessions() and
   * listSessions(o) with call options alone, as before filters existed.
   */
  listSessions(o?: CallOptions): Promise<SessionSummary[]>;
  /**
   * The sessions filter matches (docs/labels.md): each field given must
   * hold (labels: all of them); order and descending set the order, limit
   * (0: none) the most returned. Reads page after page, each retried across
   * a takeover, until the cluster's token is empty or limit sessions are
   * read: a filtered page can be short, even empty, with a token, and the
   * list goes on after it. With no filter, every session by id. An unknown
   * field, status or order name, an empty label key, a negative limit or
   * time, or a wrong type throws a RangeError or TypeError naming it before
   * any call; the cluster's refusals (InvalidArgument: a bad label key, a
   * time range whose after is later than its before) are thrown with their code.
   */
  listSessions(filter?: SessionFilter, o?: CallOptions): Promise<SessionSummary[]>;
  async listSessions(a?: SessionFilter | CallOptions, b?: CallOptions): Promise<SessionSummary[]> {
    // Call options alone (the form before filters existed): a filter has none of their fields.
    const [filter, o] = b === undefined && isCallOptions(a) ? [{}, a as CallOptions] : [a, b ?? {}];
    const { req, limit } = listRequest("listSessions: filter", filter, false);
    const out: SessionSummary[] = [];
    let pageToken = "";
    for (;;) {
      // With a limit, a page asks for no more than it still needs.
      const ask = limit > 0 ? { ...req, pageToken, pageSize: Math.min(limit - out.length, 0xffffffff) } : { ...req, pageToken };
      const resp = await this.call(true, o, (co) => this.svc.listSessions(ask, co));
      out.push(...resp.sessions);
      if (limit > 0 && out.length >= limit) return out.slice(0, limit);
      if (resp.nextPageToken === "") return out;
      pageToken = resp.nextPageToken;
    }
  }

  /**
   * One page of the sessions page's filter matches, in its order, from its
   * pageToken (left out: the first page), at most pageSize of them (left
   * out: the cluster's default). Resolves { sessions, nextPageToken }: read
   * on with nextPageToken while it is not empty; a filtered page can be
   * short, even empty, with a token. A read, retried across a takeover.
   * Bad input throws as listSessions' does, a negative pageSize too.
   */
  async listSessionsPage(page: SessionPageRequest = {}, o: CallOptions = {}): Promise<ListSessionsResponse> {
    const { req: ask } = listRequest("listSessionsPage: page", page, true);
    return this.call(true, o, (co) => this.svc.listSessions(ask, co));
  }

  /**
   * Changes a session's labels (docs/labels.md): removes the keys of remove,
   * then puts the labels of set ({ key: value }; a key already there takes
   * the new value), in one change. Resolves the session with its labels,
   * sorted by key. The end state does not depend on repeats, so the call is
   * retried across a takeover. An empty session id, nothing to set or
   * remove, an empty key, a key removed twice or both set and removed, or a
   * wrong type throws a RangeError or TypeError before any call; the
   * cluster checks keys, values and the 32-label bound (InvalidArgument,
   * nothing changed) and answers NotFound for an unknown session.
   */
  async setLabels(sessionId: string, set: Record<string, string> = {}, remove: string[] = [], o: CallOptions = {}): Promise<Session> {
    const req = setLabelsRequest(sessionId, set, remove);
    return (await this.call(true, o, (co) => this.svc.setLabels(req, co))).session!;
  }

  /**
   * Yields every event of the session after afterSeq, in order, until signal
   * aborts or the server ends the stream. After a takeover it reconnects and
   * resumes after the last event it yielded: none is missed or repeated.
   *
   * With liveOutput it yields the running attempts' live output too
   * (docs/design/streaming.md), as events of seq 0 between the others: type
   * "output" (ev.output: the attempt, the byte offset of its UTF-8 text, the
   * text), "output_ended" (the committed result replaces the stream) and
   * "output_abandoned" (the attempt failed or expired; its retry streams
   * afresh from 0). Across reconnections, a takeover included, and after a
   * watch that fell behind (RESOURCE_EXHAUSTED), it resumes each attempt's
   * output from where it was: every byte once, in order, each delta at the
   * offset the one before ended, and each attempt's end once.
   */
  async *watchSession(sessionId: string, afterSeq = 0n, o: { signal?: AbortSignal; liveOutput?: boolean } = {}): AsyncGenerator<Event> {
    let last = afterSeq;
    const live = o.liveOutput ? new LiveOffsets() : undefined;
    const b = new Backoff(50, 250);
    for (;;) {
      try {
        const req = { sessionId, afterSeq: last, liveOutput: live !== undefined, outputOffsets: live?.request() ?? [] };
        for await (let ev of this.svc.watchSession(req, { signal: o.signal, ...inSession(sessionId) })) {
          b.reset();
          if (ev.seq !== 0n && ev.seq <= last) continue; // already delivered
          if (live !== undefined && ev.output !== undefined) {
            const rest = live.trim(ev);
            if (rest === undefined) continue; // output or end already delivered
            ev = rest;
          }
          yield ev;
          if (ev.seq > last) last = ev.seq;
        }
        return;
      } catch (e) {
        if (o.signal?.aborted) throw e;
        // A live watch that fell behind resumes from the offsets it holds.
        const behind = live !== undefined && codeOf(e) === Code.ResourceExhausted;
        if (!behind && !transient(e, o.signal)) throw e;
        if (!(await sleep(b.next(), o.signal))) throw e;
      }
    }
  }

  /** Approves or denies the tool call waiting in step stepId. */
  async resolveApproval(stepId: string, approved: boolean, reason = "", o: CallOptions = {}): Promise<void> {
    await this.call(false, o, (co) => this.svc.resolveApproval({ stepId, approved, reason }, co));
  }

  /** Answers the ask_user question waiting in step stepId. */
  async answerQuestion(stepId: string, answer: string, o: CallOptions = {}): Promise<void> {
    await this.call(false, o, (co) => this.svc.answerQuestion({ stepId, answer }, co));
  }

  /** Resumes a paused or errored session: RETRY runs its kept turn once more, DROP drops it. */
  async resumeSession(sessionId: string, choice: ResumeChoice = ResumeChoice.RETRY, o: CallOptions = {}): Promise<void> {
    await this.call(false, o, (co) => this.svc.resumeSession({ sessionId, choice }, co));
  }

  /**
   * Settles an outcome_unknown call as Outcome.SUCCEEDED or Outcome.FAILED;
   * note is added to the history note the model reads.
   */
  async reconcileOutcome(stepId: string, outcome: Outcome, note = "", o: CallOptions = {}): Promise<void> {
    await this.call(false, o, (co) => this.svc.reconcileOutcome({ stepId, outcome, note }, co));
  }

  /**
   * Splices an idle, errored or paused session's history: drops the entries
   * from truncateFromSeq on (0n: none) and adds note (if any). It clears the
   * rejected-turn count. A retry after an ambiguous failure could add the
   * note twice, so it is not retried.
   */
  async editHistory(sessionId: string, truncateFromSeq = 0n, note = "", o: CallOptions = {}): Promise<EditHistoryResponse> {
    return this.call(false, o, (co) => this.svc.editHistory({ sessionId, truncateFromSeq, note }, co));
  }

  /** Cancels the session's running turn. */
  async cancelSession(sessionId: string, reason = "", by = "", o: CallOptions = {}): Promise<CancelSessionResponse> {
    return this.call(true, o, (co) => this.svc.cancelSession({ sessionId, reason, by }, co));
  }

  /**
   * Closes a session: it takes no more messages and can still be read. One in
   * a turn is closing until the turn ends (the session returned is still
   * running or waiting). A close of a closed session succeeds, so it is retried.
   */
  async closeSession(sessionId: string, o: CallOptions = {}): Promise<Session | undefined> {
    const resp = await this.call(true, o, (co) => this.svc.closeSession({ sessionId }, co));
    return resp.session;
  }

  /** Deletes an idle, paused, errored or closed session; NotFound on a retry counts as done. */
  async deleteSession(sessionId: string, o: CallOptions = {}): Promise<void> {
    const tries = { n: 0 };
    try {
      await this.call(true, o, (co) => this.svc.deleteSession({ sessionId }, co), tries);
    } catch (e) {
      if (tries.n > 1 && codeOf(e) === Code.NotFound) return;
      throw e;
    }
  }
}

export type { CreateSessionRequest };
