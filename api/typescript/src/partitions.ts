// Where a call of a partitioned cluster is served (a port of api/wirerules).
//
// A cluster of several partitions (dexd --partitions N) keeps each session in
// one partition, each with its own leader: a root session in the partition
// its id hashes to (partitionOf), a child in its parent's (an id Dex draws
// for a child hashes there too). Any node serves any call, forwarding it to
// the leader of the partition that serves it. sessionRoutes mirrors the
// cluster's route table for the SessionService methods whose request names
// that session, so that a Channel can send the call to the leader itself.

import type { DescMethod } from "@bufbuild/protobuf";

/**
 * The route kinds that name a session (api/wirerules RouteKind): the session
 * the request names; the session of the Step it names; for a create, the
 * parent of a child, else the new session's id.
 */
export type RouteKind = "BySession" | "ByStep" | "Create";

/** How a method is routed: its kind and the request field (its proto name) holding the id that kind reads (for a create, the new session's id). */
export interface Route {
  kind: RouteKind;
  field: string;
}

/** The field of a CreateSessionRequest naming a child's parent (wirerules.ParentField). */
export const parentField = "parent_id";

/**
 * The SessionService methods a partitioned cluster serves in the partition of
 * the session they name, by their gRPC path (api/wirerules/routes.go, Routes).
 * Every other method (ListSessions, ImportSession) goes to any node.
 */
export const sessionRoutes: ReadonlyMap<string, Route> = new Map<string, Route>([
  ["/dex.v1.SessionService/CreateSession", { kind: "Create", field: "session_id" }],
  ["/dex.v1.SessionService/SendMessage", { kind: "BySession", field: "session_id" }],
  ["/dex.v1.SessionService/GetSession", { kind: "BySession", field: "session_id" }],
  ["/dex.v1.SessionService/WatchSession", { kind: "BySession", field: "session_id" }],
  ["/dex.v1.SessionService/ResolveApproval", { kind: "ByStep", field: "step_id" }],
  ["/dex.v1.SessionService/AnswerQuestion", { kind: "ByStep", field: "step_id" }],
  ["/dex.v1.SessionService/ResumeSession", { kind: "BySession", field: "session_id" }],
  ["/dex.v1.SessionService/ReconcileOutcome", { kind: "ByStep", field: "step_id" }],
  ["/dex.v1.SessionService/DeleteSession", { kind: "BySession", field: "session_id" }],
  ["/dex.v1.SessionService/EditHistory", { kind: "BySession", field: "session_id" }],
  ["/dex.v1.SessionService/CancelSession", { kind: "BySession", field: "session_id" }],
  ["/dex.v1.SessionService/CloseSession", { kind: "BySession", field: "session_id" }],
  ["/dex.v1.SessionService/SetBudget", { kind: "BySession", field: "session_id" }],
  ["/dex.v1.SessionService/SetLabels", { kind: "BySession", field: "session_id" }],
  ["/dex.v1.SessionService/ForkSession", { kind: "BySession", field: "source_session_id" }],
]);

/**
 * The partition a root session of this id lives in, in a cluster of
 * `partitions` partitions: FNV-1a (32 bits) of the id's UTF-8 bytes, modulo
 * the count, as the cluster computes it.
 */
export function partitionOf(sessionId: string, partitions: number): number {
  if (partitions <= 1) return 0;
  let h = 0x811c9dc5;
  for (const b of Buffer.from(sessionId, "utf8")) h = Math.imul(h ^ b, 0x01000193) >>> 0;
  return h % partitions;
}

const maxStep = (1n << 64n) - 1n;

/** The session a Step id ("SESSION-sN") names; "" for anything the cluster does not write as a Step id. */
export function sessionOfStep(stepId: string): string {
  const i = stepId.lastIndexOf("-s");
  if (i <= 0) return "";
  const n = stepId.slice(i + 2);
  if (!/^(0|[1-9][0-9]*)$/.test(n) || BigInt(n) > maxStep) return "";
  return stepId.slice(0, i);
}

/** The gRPC path of a method: "/dex.v1.SessionService/GetSession". */
export function pathOf(method: DescMethod): string {
  return `/${method.parent.typeName}/${method.name}`;
}

/**
 * The session whose partition serves a call of method with request req (a
 * message or its init object): the session, the Step's session, or for a
 * create the parent or the new id. "" when the method names no session or
 * the id is missing or malformed (the cluster answers it wherever it lands).
 */
export function sessionOfRequest(method: DescMethod, req: unknown): string {
  const route = sessionRoutes.get(pathOf(method));
  if (route === undefined || typeof req !== "object" || req === null) return "";
  const read = (name: string): string => {
    const field = method.input.fields.find((f) => f.name === name);
    const v = field === undefined ? undefined : (req as Record<string, unknown>)[field.localName];
    return typeof v === "string" ? v : "";
  };
  switch (route.kind) {
    case "Create":
      return read(parentField) || read(route.field);
    case "ByStep":
      return sessionOfStep(read(route.field));
    case "BySession":
      return read(route.field);
  }
}
