import { StepKind } from "../gen/dex/v1/types_pb.js";
import type { ModelOutput } from "../gen/dex/v1/types_pb.js";

/** The name Go's String() gives a Step kind ("STEP_KIND_RUN_MODEL"). */
export function kindName(kind: StepKind): string {
  const n = StepKind[kind];
  return n === undefined ? String(kind) : `STEP_KIND_${n}`;
}

/**
 * The rule every model output meets before it is sent (api/wirerules, CheckModelOutput):
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
