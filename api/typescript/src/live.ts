// The client's side of live output (docs/design/streaming.md): how far a
// watch delivered each attempt's output, so that a watch that reconnects (a
// takeover, or a watch that fell behind) resumes each attempt where it was
// and delivers every byte once.
import { clone, create } from "@bufbuild/protobuf";
import { OutputOffsetSchema, type OutputOffset } from "../gen/dex/v1/sessions_pb.js";
import { EventSchema, type Event } from "../gen/dex/v1/types_pb.js";

/**
 * How far a watch delivered each attempt's live output, in bytes of its UTF-8
 * text, and the attempts whose end (output_ended or output_abandoned) it
 * delivered. The server may tell a resumed watch an end again (a held
 * attempt's end replayed, or an end told from the state): the repeat is
 * dropped. An ended attempt keeps its offset: one missing from the request
 * is sent again from 0.
 */
export class LiveOffsets {
  private readonly held = new Map<string, { stepId: string; attempt: number; offset: bigint }>();
  private readonly ended = new Set<string>();

  private static key(stepId: string, attempt: number): string {
    return `${attempt}/${stepId}`;
  }

  /** The offset delivered of (stepId, attempt): 0n when none. */
  offset(stepId: string, attempt: number): bigint {
    return this.held.get(LiveOffsets.key(stepId, attempt))?.offset ?? 0n;
  }

  /** Where to resume each attempt's output: WatchSessionRequest.outputOffsets. */
  request(): OutputOffset[] {
    return [...this.held.values()].map((h) => create(OutputOffsetSchema, h));
  }

  /**
   * e as it is still to be delivered: an output delta without the bytes
   * already delivered, an attempt's end the first time only (undefined:
   * nothing new), any other event as it is. A delta that is delivered moves
   * the attempt's offset to its end.
   */
  trim(e: Event): Event | undefined {
    const o = e.output;
    if (o === undefined) return e;
    const k = LiveOffsets.key(e.stepId, o.attempt);
    if (e.type === "output_ended" || e.type === "output_abandoned") {
      if (this.ended.has(k)) return undefined;
      this.ended.add(k);
      return e;
    }
    if (e.type !== "output") return e;
    const held = this.held.get(k)?.offset ?? 0n;
    const bytes = Buffer.from(o.text, "utf8");
    const end = o.offset + BigInt(bytes.length);
    if (end <= held) return undefined;
    if (o.offset < held) {
      e = clone(EventSchema, e);
      e.output!.text = bytes.subarray(Number(held - o.offset)).toString("utf8");
      e.output!.offset = held;
    }
    this.held.set(k, { stepId: e.stepId, attempt: o.attempt, offset: end });
    return e;
  }
}
