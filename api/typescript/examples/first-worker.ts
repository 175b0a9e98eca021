// Your first Dex Worker, with no provider key: a fake model that answers by
// rules, and three tools. From api/typescript after `npm ci`:
//   npm run first-worker -- --addr dex:///127.0.0.1:7101,127.0.0.1:7102,127.0.0.1:7103
//
// The fake model reads the last message of the turn:
// - with the word "ask", it calls the built-in ask_user: the session waits for
//   your answer (dexctl answer STEP TEXT, or the console);
// - with the word "email", it calls send_email, which needs approval: the
//   session waits for it (dexctl approve STEP / deny STEP, or the console);
// - any other message is looked up (lookup, a read) and saved as a note
//   (save_note, an idempotent write).
// Once the tools have answered, it answers with what they said. To run a real
// model next, replace fakeModel with a call to your provider (examples/agent.ts
// does it for Anthropic's Messages API).
import { pathToFileURL } from "node:url";
import { parseArgs } from "node:util";
import { dial, HistoryKind, Worker, type Channel, type ModelInput, type ModelOutputInit } from "../src/index.js";

export const defaultAddr = "dex:///127.0.0.1:7101,127.0.0.1:7102,127.0.0.1:7103";

/** The model's answer, decided by rules from the turn's history. */
export function fakeModel(input: ModelInput): ModelOutputInit {
  const h = input.history;
  let at = h.length - 1;
  while (at >= 0 && h[at].kind !== HistoryKind.USER) at--;
  if (at < 0) return { text: "Done." }; // the messages were compacted into a summary
  const last = h[at];
  const results = h.slice(at + 1).filter((e) => e.kind === HistoryKind.TOOL_RESULT);
  if (results.length > 0) {
    // Results arrive as the tools finish; the answer follows the calls' order.
    results.sort((a, b) => a.callId.localeCompare(b.callId));
    return { text: "Done. " + results.map((r) => `${r.tool}: ${r.text}.`).join(" ") };
  }
  // A call id is unique in the session: the message's seq names the turn.
  const call = (n: number, tool: string, args: object) => ({ callId: `call-${last.seq}-${n}`, tool, arguments: args });
  if (/\bask\b/i.test(last.text)) return { toolCalls: [call(1, "ask_user", { question: "Which city should I look up?" })] };
  if (/\bemail\b/i.test(last.text)) return { toolCalls: [call(1, "send_email", { to: "team@example.com", body: last.text })] };
  return { toolCalls: [call(1, "lookup", { query: last.text }), call(2, "save_note", { note: last.text })] };
}

const args = (text: string): Record<string, string> => JSON.parse(text || "{}");

export function newWorker(channel: Channel, id = "first-worker-ts"): Worker {
  const notes = new Map<string, string>(); // save_note's store, by idempotency key
  return new Worker(channel, {
    id,
    model: { run: fakeModel, compact: (input) => `Summary of ${input.history.length} earlier entries.` },
    tools: [
      {
        name: "lookup", access: "read", description: "Looks something up. Arguments: {\"query\": \"...\"}.",
        run: (c) => ({ content: `found ${JSON.stringify(args(c.arguments).query ?? "")}` }),
      },
      {
        name: "save_note", access: "idempotent_write", description: "Saves a note. Arguments: {\"note\": \"...\"}.",
        run: (c) => {
          // A retried attempt carries the same key, so the note is saved once.
          notes.set(c.idempotencyKey, args(c.arguments).note ?? "");
          return { content: `saved note ${notes.size}` };
        },
      },
      {
        name: "send_email", access: "single_attempt", needsApproval: true,
        description: "Sends an email; a person approves it first. Arguments: {\"to\": \"...\", \"body\": \"...\"}.",
        run: (c) => {
          const a = args(c.arguments);
          console.error(`first-worker: email to ${a.to}: ${a.body}`);
          return { content: `sent to ${a.to}` };
        },
      },
    ],
  });
}

const usage = `usage: node dist/examples/first-worker.js [--addr TARGET] [--id ID]
  --addr  the cluster: dex:///h1:p1,h2:p2,... or host:port (default $DEX_ADDR, else ${defaultAddr})
  --id    the Worker's id (default first-worker-ts)`;

/** Runs the Worker until SIGINT or SIGTERM; resolves the exit code. */
export async function main(argv: string[]): Promise<number> {
  let opts: { addr?: string; id?: string; help?: boolean };
  try {
    opts = parseArgs({ args: argv, options: { addr: { type: "string" }, id: { type: "string" }, help: { type: "boolean" } } }).values;
  } catch (e) {
    console.error(`first-worker: ${(e as Error).message}\n${usage}`);
    return 2;
  }
  if (opts.help) {
    console.log(usage);
    return 0;
  }
  const addr = opts.addr ?? process.env.DEX_ADDR ?? defaultAddr;
  let channel: Channel | undefined;
  try {
    channel = dial(addr);
    const worker = newWorker(channel, opts.id);
    const stop = new AbortController();
    process.once("SIGINT", () => stop.abort());
    process.once("SIGTERM", () => stop.abort());
    console.error(`first-worker: serving lookup, save_note and send_email (needs approval) with a fake model for ${addr}`);
    await worker.run(stop.signal); // registers, polls and runs tasks until stopped
    return 0;
  } catch (e) {
    console.error(`first-worker: ${(e as Error).message}`);
    return 1;
  } finally {
    channel?.close();
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  process.exitCode = await main(process.argv.slice(2));
}
