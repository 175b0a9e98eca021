// Finding sessions by their labels, status, agent, parent and times, and
// changing their labels (docs/labels.md): what Client's listSessions,
// listSessionsPage and setLabels take, checked before any call so that a
// bad argument fails with a message naming it. The cluster checks label
// keys and values itself.
import type { MessageInitShape } from "@bufbuild/protobuf";
import { SessionOrder, type ListSessionsRequestSchema, type SetLabelsRequestSchema } from "../gen/dex/v1/sessions_pb.js";
import { SessionStatus } from "../gen/dex/v1/types_pb.js";
import { isRecord, str, whole } from "./check.js";

/** The statuses a session is listed in, by the name a filter takes. */
export type SessionStatusName = "idle" | "running" | "waiting" | "errored" | "paused" | "closed";

export const statusNames: Record<SessionStatusName, SessionStatus> = {
  idle: SessionStatus.IDLE, running: SessionStatus.RUNNING, waiting: SessionStatus.WAITING, errored: SessionStatus.ERRORED,
  paused: SessionStatus.PAUSED, closed: SessionStatus.CLOSED,
};

/** The orders a list reads in: by creation or by last update time (then id). */
export type SessionOrderName = "created" | "updated";

const orderNames: Record<SessionOrderName, SessionOrder> = { created: SessionOrder.CREATED, updated: SessionOrder.UPDATED };

/** A time bound: a Date or Unix milliseconds (a number or bigint); 0 is no bound. */
export type TimeBound = Date | number | bigint;

/**
 * Which sessions listSessions finds, in what order, and how many: every
 * field given must hold; a field left out (or "", 0) filters nothing.
 */
export interface SessionFilter {
  /** A status by name ("idle") or as SessionStatus. */
  status?: SessionStatusName | SessionStatus;
  agent?: string;
  /** Labels ({ key: value }) a session must all have. */
  labels?: Record<string, string>;
  /** The children of this session. */
  parentId?: string;
  /** The forks of this session. */
  forkedFrom?: string;
  /** Creation time in [createdAfter, createdBefore): after inclusive, before exclusive. */
  createdAfter?: TimeBound;
  createdBefore?: TimeBound;
  /** Last update time in [updatedAfter, updatedBefore). */
  updatedAfter?: TimeBound;
  updatedBefore?: TimeBound;
  /**
   * By creation ("created") or last update ("updated") time. Left out: by
   * id when nothing else is given (as a list without a filter always was),
   * else by creation.
   */
  order?: SessionOrderName;
  /** Newest first. */
  descending?: boolean;
  /** The most sessions to return (0 or left out: all). */
  limit?: number;
}

/** What listSessionsPage takes: a filter and order (no limit), the page's size and where it starts. */
export interface SessionPageRequest extends Omit<SessionFilter, "limit"> {
  /** At most this many sessions (0 or left out: the cluster's default page). */
  pageSize?: number;
  /** The nextPageToken of the page before ("" or left out: the first page). */
  pageToken?: string;
}

type ListRequest = MessageInitShape<typeof ListSessionsRequestSchema>;

const maxUint32 = 0xffffffffn;
const maxInt64 = (1n << 63n) - 1n;

/** The filter's fields with the request field each sets: the times' and the order's names differ. */
const timeFields = {
  createdAfter: "createdAfterMs", createdBefore: "createdBeforeMs", updatedAfter: "updatedAfterMs", updatedBefore: "updatedBeforeMs",
} as const;
const stringFields = ["agent", "parentId", "forkedFrom"] as const;
const filterFields = ["status", "agent", "labels", "parentId", "forkedFrom", ...Object.keys(timeFields), "order", "descending"];
const callOptionFields = ["signal", "timeoutMs"];

/**
 * Whether a, listSessions' first argument, is call options (as listSessions
 * took before it took a filter): an object holding signal or timeoutMs and
 * nothing else. A filter has neither, so no argument is both.
 */
export function isCallOptions(a: unknown): boolean {
  if (!isRecord(a)) return false;
  const keys = Object.keys(a).filter((k) => !k.startsWith("$"));
  return keys.length > 0 && keys.every((k) => callOptionFields.includes(k));
}

function statusOf(what: string, v: unknown): SessionStatus {
  if (typeof v === "string") {
    if (!Object.hasOwn(statusNames, v)) throw new RangeError(`${what} ${JSON.stringify(v)}: use ${Object.keys(statusNames).join(", ")} or a SessionStatus`);
    return statusNames[v as SessionStatusName];
  }
  if (typeof v !== "number") throw new TypeError(`${what} must be a name or a SessionStatus, not ${v === null ? "null" : typeof v}`);
  if (SessionStatus[v] === undefined) throw new RangeError(`${what} ${v} is not a SessionStatus`);
  return v;
}

function orderOf(what: string, v: unknown): SessionOrder {
  if (typeof v !== "string") throw new TypeError(`${what} must be "created" or "updated", not ${v === null ? "null" : typeof v}`);
  if (!Object.hasOwn(orderNames, v)) throw new RangeError(`${what} ${JSON.stringify(v)}: use "created" or "updated"`);
  return orderNames[v as SessionOrderName];
}

/** A time bound as Unix ms: a Date's time or a whole number from 0. */
function msOf(what: string, v: unknown): bigint {
  if (v instanceof Date) {
    const t = v.getTime();
    if (Number.isNaN(t)) throw new RangeError(`${what} is an invalid Date`);
    return whole(`${what} (a Date)`, t, 0n, maxInt64);
  }
  if (typeof v !== "number" && typeof v !== "bigint") throw new TypeError(`${what} must be a Date or Unix milliseconds, not ${v === null ? "null" : typeof v}`);
  return whole(`${what} (Unix ms)`, v, 0n, maxInt64);
}

/** Labels { key: value } as a request's list, each key non-empty and each value a string. */
function labelList(what: string, labels: unknown): { key: string; value: string }[] {
  if (!isRecord(labels)) throw new TypeError(`${what} must be an object of key to value`);
  return Object.entries(labels).map(([key, value]) => {
    if (key === "") throw new RangeError(`${what}: a label key is empty`);
    return { key, value: str(`${what}: label ${JSON.stringify(key)}'s value`, value) };
  });
}

/**
 * The ListSessions request of a filter (listSessions, with its limit) or a
 * page request (listSessionsPage, with its page size and token), each field
 * checked; only the fields given are set. what names the argument in
 * errors ("listSessions: filter").
 */
export function listRequest(what: string, f: unknown, page: boolean): { req: ListRequest; limit: number } {
  if (f === undefined) return { req: {}, limit: 0 };
  const extra = page ? ["pageSize", "pageToken"] : ["limit"];
  if (!isRecord(f)) throw new TypeError(`${what} must be an object of ${page ? "SessionPageRequest" : "SessionFilter"} fields`);
  const req: ListRequest = {};
  let limit = 0;
  for (const [k, v] of Object.entries(f)) {
    if (k.startsWith("$") || v === undefined) continue; // a message's $typeName; a field left out
    const name = `${what} ${k}`;
    if (k === "status") req.status = statusOf(name, v);
    else if ((stringFields as readonly string[]).includes(k)) req[k as (typeof stringFields)[number]] = str(name, v);
    else if (k === "labels") req.labels = labelList(name, v);
    else if (Object.hasOwn(timeFields, k)) req[timeFields[k as keyof typeof timeFields]] = msOf(name, v);
    else if (k === "order") req.orderBy = orderOf(name, v);
    else if (k === "descending") {
      if (typeof v !== "boolean") throw new TypeError(`${name} must be a boolean, not ${v === null ? "null" : typeof v}`);
      req.descending = v;
    } else if (page && k === "pageSize") req.pageSize = Number(whole(name, v, 0n, maxUint32));
    else if (page && k === "pageToken") req.pageToken = str(name, v);
    else if (!page && k === "limit") limit = Number(whole(name, v, 0n, BigInt(Number.MAX_SAFE_INTEGER)));
    else {
      let hint = "";
      if (callOptionFields.includes(k)) hint = `; call options (signal, timeoutMs) go in the argument after it`;
      else if (!page && (k === "pageSize" || k === "pageToken")) hint = "; listSessions reads every page: for one page use listSessionsPage";
      else if (page && k === "limit") hint = "; a page is bounded by pageSize";
      throw new TypeError(`${what}: unknown field ${JSON.stringify(k)}: want one of ${[...filterFields, ...extra].join(", ")}${hint}`);
    }
  }
  return { req, limit };
}

type SetLabelsRequest = MessageInitShape<typeof SetLabelsRequestSchema> & { sessionId: string };

/**
 * The SetLabels request of setLabels' arguments, checked: a session id,
 * labels to set ({ key: value }) and keys to remove, at least one of them,
 * no key empty, removed twice, or both set and removed.
 */
export function setLabelsRequest(sessionId: unknown, set: unknown, remove: unknown): SetLabelsRequest {
  const id = str("setLabels: sessionId", sessionId);
  if (id === "") throw new RangeError("setLabels: sessionId is empty: give the id of the session to label");
  const labels = set === undefined ? [] : labelList("setLabels: set", set);
  if (remove !== undefined && !Array.isArray(remove)) throw new TypeError(`setLabels: remove must be an array of label keys, not ${remove === null ? "null" : typeof remove}`);
  const keys = remove === undefined ? [] : (remove as unknown[]).map((k, i) => str(`setLabels: remove[${i}]`, k));
  const seen = new Set<string>();
  for (const k of keys) {
    if (k === "") throw new RangeError("setLabels: remove: a label key is empty");
    if (seen.has(k)) throw new RangeError(`setLabels: remove: label ${JSON.stringify(k)} is given twice`);
    seen.add(k);
    if (labels.some((l) => l.key === k)) throw new RangeError(`setLabels: label ${JSON.stringify(k)} is both in set and in remove`);
  }
  if (labels.length === 0 && keys.length === 0) throw new RangeError("setLabels: give labels to set ({ key: value }) or keys to remove");
  return { sessionId: id, set: labels, remove: keys };
}
