// Bulk jobs (docs/bulk.md): one action on every session a filter matches,
// carried out by the cluster a bounded page at a time. What Client's bulk
// calls take, checked before any call (a port of api/client/bulk.go).
import { randomBytes } from "node:crypto";
import type { MessageInitShape } from "@bufbuild/protobuf";
import { BulkAction, type BulkJob, type StartBulkActionRequestSchema } from "../gen/dex/v1/sessions_pb.js";
import { SessionStatus } from "../gen/dex/v1/types_pb.js";
import { isRecord, str, whole } from "./check.js";
import { statusNames, type SessionStatusName } from "./list.js";

/** The actions a job can take, by the name startBulkAction takes. */
export const bulkActions = {
  cancel: BulkAction.CANCEL, resume: BulkAction.RESUME, close: BulkAction.CLOSE, delete: BulkAction.DELETE, label: BulkAction.LABEL,
} as const;

export type BulkActionName = keyof typeof bulkActions;

/** The sessions a job acts on: ListSessions' fields, each left out matching any. */
export interface BulkFilterInit {
  /** A status by name ("running") or as SessionStatus. */
  status?: SessionStatusName | SessionStatus;
  agent?: string;
  parentId?: string;
  forkedFrom?: string;
  /** Labels ({ key: value }) a session must all have. */
  labels?: Record<string, string>;
  /** Creation and last-update time, Unix ms: from inclusive, to exclusive. */
  createdFromMs?: number | bigint;
  createdToMs?: number | bigint;
  updatedFromMs?: number | bigint;
  updatedToMs?: number | bigint;
}

/** What startBulkAction takes: the action and the filter; the rest as the action needs. */
export interface StartBulkActionInit {
  action: BulkActionName;
  filter?: BulkFilterInit;
  /** For a label job: the labels to set ({ key: value }). */
  labels?: Record<string, string>;
  /** For a cancel job: the reason its cancel note gives. */
  reason?: string;
  /** A delete with no filter (every session) needs this. */
  all?: boolean;
  /** The job's id (left out: the client draws one, so the call can be retried). */
  jobId?: string;
}

/** How waitBulkJob waits. */
export interface WaitBulkJobOptions {
  /** Between reads of the job (default 1,000). */
  intervalMs?: number;
  /** The longest wait: past it, with the job still running, a DeadlineExceeded error (left out: no limit). */
  waitMs?: number;
  /** Called with each read of the job. */
  onProgress?: (job: BulkJob) => void;
}

/** A new random job id (startBulkAction draws one when given none). */
export function newBulkJobId(): string {
  return "bulk-" + randomBytes(8).toString("hex");
}

const filterStrings = ["agent", "parentId", "forkedFrom"] as const;
const filterTimes = ["createdFromMs", "createdToMs", "updatedFromMs", "updatedToMs"] as const;
const filterFields = new Set<string>(["status", "labels", ...filterStrings, ...filterTimes]);
const maxInt64 = (1n << 63n) - 1n;

function labelsOf(what: string, labels: unknown): { key: string; value: string }[] {
  if (!isRecord(labels)) throw new TypeError(`${what} must be an object of key to value`);
  return Object.entries(labels).map(([key, value]) => ({ key, value: str(`${what}: ${JSON.stringify(key)}'s value`, value) }));
}

function statusOf(v: unknown): SessionStatus {
  if (typeof v === "string") {
    if (!Object.hasOwn(statusNames, v)) throw new RangeError(`startBulkAction: filter status ${JSON.stringify(v)}: use ${Object.keys(statusNames).join(", ")}`);
    return statusNames[v as SessionStatusName];
  }
  if (typeof v !== "number" || SessionStatus[v] === undefined) throw new TypeError(`startBulkAction: filter status must be a name or a SessionStatus, not ${String(v)}`);
  return v;
}

type FilterShape = NonNullable<MessageInitShape<typeof StartBulkActionRequestSchema>["filter"]>;

/** A job's filter as the request's, each field checked; {} for none. */
function filterOf(f: unknown): { filter: FilterShape; empty: boolean } {
  if (f === undefined) return { filter: {}, empty: true };
  if (!isRecord(f)) throw new TypeError("startBulkAction: filter must be an object of BulkFilterInit fields");
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(f)) {
    if (k.startsWith("$") || v === undefined) continue; // a message's $typeName; a field left out
    if (!filterFields.has(k)) throw new TypeError(`startBulkAction: filter: unknown field ${JSON.stringify(k)}: want one of ${[...filterFields].join(", ")}`);
    if (k === "status") out.status = statusOf(v);
    else if (k === "labels") out.labels = labelsOf("startBulkAction: filter labels", v);
    else if ((filterStrings as readonly string[]).includes(k)) out[k] = str(`startBulkAction: filter ${k}`, v);
    else out[k] = whole(`startBulkAction: filter ${k} (Unix ms)`, v, 0n, maxInt64);
  }
  // Zero values match any session: the filter is empty when all are.
  const empty = Object.values(out).every((v) => v === 0 || v === "" || v === 0n || (Array.isArray(v) && v.length === 0));
  return { filter: out as FilterShape, empty };
}

/**
 * The request startBulkAction sends, checked as the cluster checks it
 * (docs/bulk.md) so that a bad one fails before any call: a RangeError for
 * a value the action does not take, a TypeError for a wrong type.
 */
export function bulkRequest(init: StartBulkActionInit): MessageInitShape<typeof StartBulkActionRequestSchema> & { action: BulkAction; jobId: string } {
  if (!isRecord(init)) throw new TypeError("startBulkAction: give { action, filter, ... }");
  const name = init.action;
  const action = typeof name === "string" && Object.hasOwn(bulkActions, name) ? bulkActions[name] : undefined;
  if (action === undefined) throw new RangeError(`startBulkAction: action ${JSON.stringify(name)}: use ${Object.keys(bulkActions).join(", ")}`);
  const { filter, empty } = filterOf(init.filter);
  const labels = init.labels === undefined ? [] : labelsOf("startBulkAction: labels", init.labels);
  // Left out is the default; null is a wrong type, as any other.
  const reason = init.reason === undefined ? "" : str("startBulkAction: reason", init.reason);
  const jobId = init.jobId === undefined ? "" : str("startBulkAction: jobId", init.jobId);
  const all = init.all === undefined ? false : init.all;
  if (typeof all !== "boolean") throw new TypeError(`startBulkAction: all must be a boolean, not ${typeof all}`);
  if (name === "label" && labels.length === 0) throw new RangeError("startBulkAction: a label job needs labels ({ key: value }) to set");
  if (name !== "label" && labels.length > 0) throw new RangeError(`startBulkAction: labels are for a label job, not a ${name} job`);
  if (reason !== "" && name !== "cancel") throw new RangeError(`startBulkAction: a reason is for a cancel job, not a ${name} job`);
  if (name === "delete" && empty && !all) throw new RangeError("startBulkAction: a delete with no filter deletes every session: set all: true to mean it");
  return { action, filter, labels, reason, all, jobId: jobId || newBulkJobId() };
}
