import { Code, ConnectError } from "@connectrpc/connect";

/** The trailer in which a follower names the leader's gRPC address when it answers Unavailable. */
export const LeaderMetadataKey = "dex-leader";

/** The request metadata that names the partition a PollTask polls ("0", "1", ...; absent: partition 0). */
export const PartitionMetadataKey = "dex-partition";

/**
 * The trailers a node of a partitioned cluster sets on a call it routed to a
 * partition: the partition count (only when more than one), and, when it
 * forwarded the call, the gRPC address of the partition's leader it went to.
 * Unlike "dex-leader", a forwarded call may have been applied.
 */
export const PartitionsTrailer = "dex-partitions";
export const PartitionLeaderTrailer = "dex-partition-leader";

/** Grows from min to max (ms) with ±20% jitter, so Workers do not hit a new leader in lockstep. */
export class Backoff {
  private n = 0;
  constructor(private readonly minMs = 50, private readonly maxMs = 2000) {}
  next(): number {
    let d = this.minMs * 2 ** Math.min(this.n, 16);
    if (d > this.maxMs) d = this.maxMs;
    this.n++;
    const j = Math.random() * (d / 5);
    return Math.random() < 0.5 ? d - j : d + j;
  }
  reset(): void {
    this.n = 0;
  }
}

/** Waits ms or until signal aborts; resolves false when aborted. */
export function sleep(ms: number, signal?: AbortSignal): Promise<boolean> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve(false);
    const t = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve(true);
    }, ms);
    const onAbort = () => {
      clearTimeout(t);
      resolve(false);
    };
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

// A Node network error under an Internal status: the connection broke under
// the call (a node killed mid-call), which grpc-go reports as Unavailable.
function brokenConnection(err: ConnectError): boolean {
  if (err.code !== Code.Internal && err.code !== Code.Unknown) return false;
  if (err.rawMessage.startsWith("http/2 stream closed")) return true;
  for (let c: unknown = err.cause; c instanceof Error; c = c.cause) {
    const code = (c as { code?: unknown }).code;
    if (typeof code === "string" && (code.startsWith("ERR_HTTP2") || code.startsWith("E"))) return true;
  }
  return false;
}

/**
 * Whether err leaves a retry of an idempotent call worth trying: the cluster
 * could not be reached, was changing leader, or the try ran out of its time,
 * while the caller's own signal has not aborted.
 */
export function transient(err: unknown, signal?: AbortSignal): boolean {
  if (signal?.aborted || !(err instanceof ConnectError)) return false;
  switch (err.code) {
    case Code.Unavailable:
    case Code.Aborted:
    case Code.DeadlineExceeded:
    case Code.Canceled:
      return true;
  }
  return brokenConnection(err);
}

/** The leader's address a follower named in its refusal, or "". */
export function leaderOf(err: unknown): string {
  if (!(err instanceof ConnectError) || err.code !== Code.Unavailable) return "";
  return err.metadata.get(LeaderMetadataKey) ?? "";
}

/** Whether err is a follower's refusal naming a leader: nothing was changed, so any call may be repeated. */
export function notApplied(err: unknown): boolean {
  return leaderOf(err) !== "";
}
