// A complete Dex Worker: an LLM (Anthropic's Messages API, key in
// $ANTHROPIC_API_KEY) that may call one tool, save_note, an idempotent write.
// Run it against `make run`'s cluster:
//   DEX_ADDR=dex:///127.0.0.1:7101,127.0.0.1:7102,127.0.0.1:7103 node dist/examples/agent.js
import { appendFileSync } from "node:fs";
import {
  dial, HistoryKind, newHttpModelError, Outcome, Worker, type HistoryEntry, type ModelInput, type ModelOutputInit,
} from "../src/index.js";

type Block =
  | { type: "text"; text: string }
  | { type: "tool_use"; id: string; name: string; input: unknown }
  | { type: "tool_result"; tool_use_id: string; content: string; is_error?: boolean };
type Message = { role: "user" | "assistant"; content: Block[] };

/** Dex's history as the provider's messages (consecutive blocks of one role merged). */
function toMessages(history: HistoryEntry[]): Message[] {
  const out: Message[] = [];
  const add = (role: Message["role"], block: Block) => {
    const last = out[out.length - 1];
    if (last?.role === role) last.content.push(block);
    else out.push({ role, content: [block] });
  };
  for (const e of history) {
    switch (e.kind) {
      case HistoryKind.USER:
      case HistoryKind.NOTE:
        add("user", { type: "text", text: e.text || "(empty)" });
        break;
      case HistoryKind.SUMMARY:
        add("user", { type: "text", text: `Summary of the conversation so far: ${e.text}` });
        break;
      case HistoryKind.ASSISTANT:
        if (e.text) add("assistant", { type: "text", text: e.text });
        for (const c of e.toolCalls) add("assistant", { type: "tool_use", id: c.callId, name: c.tool, input: JSON.parse(c.arguments || "{}") });
        break;
      case HistoryKind.TOOL_RESULT:
        add("user", { type: "tool_result", tool_use_id: e.callId, content: e.text, is_error: e.outcome !== Outcome.SUCCEEDED });
        break;
    }
  }
  return out;
}

async function callModel(input: ModelInput): Promise<ModelOutputInit> {
  const res = await fetch(`${process.env.ANTHROPIC_BASE_URL ?? "https://api.anthropic.com"}/v1/messages`, {
    method: "POST",
    signal: input.signal, // aborted when the cluster cancels the attempt
    headers: { "content-type": "application/json", "x-api-key": process.env.ANTHROPIC_API_KEY ?? "", "anthropic-version": "2023-06-01" },
    body: JSON.stringify({
      model: process.env.MODEL ?? "claude-sonnet-4-5",
      max_tokens: 1024,
      messages: toMessages(input.history),
      tools: input.tools.map((t) => ({ name: t.name, description: t.description, input_schema: { type: "object" } })),
    }),
  });
  // A provider's error status becomes Dex's error type (rate_limit, overloaded, ...),
  // which decides whether the cluster retries the attempt; a rate_limit's
  // Retry-After header holds the provider until then.
  if (!res.ok) throw newHttpModelError(res.status, await res.text(), res.headers);
  const body = (await res.json()) as { content: Block[] };
  const text = body.content.flatMap((b) => (b.type === "text" ? [b.text] : [])).join("");
  const toolCalls = body.content.flatMap((b) => (b.type === "tool_use" ? [{ callId: b.id, tool: b.name, arguments: b.input as object }] : []));
  return { text, toolCalls };
}

const channel = dial(process.env.DEX_ADDR ?? "dex:///127.0.0.1:7101,127.0.0.1:7102,127.0.0.1:7103");
const worker = new Worker(channel, {
  id: "agent-ts",
  model: { run: callModel, compact: async (input) => `${input.history.length} earlier entries, summarised.` },
  tools: [{
    name: "save_note",
    access: "idempotent_write", // retried after a crash with the same idempotency key
    description: "Saves a note. Arguments: {\"note\": string}.",
    run: (call) => {
      // A real tool passes call.idempotencyKey to the system it changes, so a
      // retried attempt does not write twice.
      appendFileSync("notes.txt", `${call.idempotencyKey} ${call.arguments}\n`);
      return { content: "saved" };
    },
  }],
});

const stop = new AbortController();
process.on("SIGINT", () => stop.abort());
process.on("SIGTERM", () => stop.abort());
await worker.run(stop.signal); // registers, polls, claims, heartbeats, reports; retries across a takeover
channel.close();
