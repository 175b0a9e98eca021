import { StepKind } from "../gen/dex/v1/types_pb.js";
import type { ModelOutput } from "../gen/dex/v1/types_pb.js";

/** Who runs a Step of a kind, and with which handler (fsm/kinds.go). */
export type Handler = "model" | "compact" | "tool" | "poll" | "none";

export function handlerOf(kind: StepKind): Handler {
  switch (kind) {
    case StepKind.RUN_MODEL:
      return "model";
    case StepKind.COMPACT_CONTEXT:
      return "compact";
    case StepKind.CALL_TOOL:
    case StepKind.CALL_SINGLE_ATTEMPT_TOOL:
      return "tool";
    case StepKind.POLL_TOOL_TASK:
      return "poll";
  }
  return "none";
}

export function runsOnModel(kind: StepKind): boolean {
  const h = handlerOf(kind);
  return h === "model" || h === "compact";
}

/** The name Go's String() gives a Step kind ("STEP_KIND_RUN_MODEL"). */
export function kindName(kind: StepKind): string {
  const n = StepKind[kind];
  return n === undefined ? String(kind) : `STEP_KIND_${n}`;
}

/**
 * The rule every model output meets before it is sent (fsm.CheckModelOutput):
 * each tool call names a tool and a call id, unique within the output.
 * Returns the reason it is refused, or "".
 */
export function checkModelOutput(o: ModelOutput): string {
  const seen = new Map<string, string>();
  for (const [i, tc] of o.toolCalls.entries()) {
    if (tc.tool === "") {
      return `tool call ${i + 1} of the model output (call id ${JSON.stringify(tc.callId)}) names no tool`;
    }
    if (tc.callId === "") {
      return `tool call ${i + 1} of the model output (tool ${JSON.stringify(tc.tool)}) has no call id: every tool call needs one, unique within the output`;
    }
    const first = seen.get(tc.callId);
    if (first !== undefined) {
      return `call id ${JSON.stringify(tc.callId)} appears twice in one model output (tools ${JSON.stringify(first)} and ${JSON.stringify(tc.tool)}): call ids must be unique within the output`;
    }
    seen.set(tc.callId, tc.tool);
  }
  return "";
}
