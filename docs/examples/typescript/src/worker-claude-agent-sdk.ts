// The same Worker on the Claude Agent SDK: each RunModel is one query of the
// Claude Code CLI the SDK bundles, its model reached through the Messages
// API at $ANTHROPIC_BASE_URL; the three tools, served by the SDK's
// in-process MCP server, are deferred to Dex and run as Steps with their
// policies (Dex's claude-agent-sdk adapter).
import { mkdirSync } from "node:fs";
import { resolve } from "node:path";
import { tool } from "@anthropic-ai/claude-agent-sdk";
import type { ToolCall } from "@dexhq/dex";
import { claudeAgentSdkAdapter } from "@dexhq/dex/adapters/claude-agent-sdk";
import * as orders from "./orders.js";
import { runWorker } from "./run.js";

// The CLI reaches only $ANTHROPIC_BASE_URL: a home of its own beside the
// Worker's store (not the user's settings, credentials or sessions; shared by
// the Worker's queries and by its restarts), no setting sources, none of its
// own tools (Bash, Read, ...), no nonessential traffic (telemetry, updates,
// error reports).
const home = resolve(process.env.STORE_DIR ?? "store", "claude-home");
mkdirSync(home, { recursive: true });
const env = {
  ...process.env, HOME: home, CLAUDE_CONFIG_DIR: resolve(home, ".claude"),
  CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
};

// The Dex tool call a tool runs for (its idempotency key, attempt, ...).
const dexCall = (extra: unknown) => (extra as { dex: ToolCall }).dex;
const text = (s: string) => ({ content: [{ type: "text" as const, text: s }] });

const a = claudeAgentSdkAdapter({
  options: {
    model: process.env.ANTHROPIC_MODEL ?? "claude-haiku-4-5",
    systemPrompt: "You handle orders: look them up, send invoices, charge cards.",
    env, settingSources: [], tools: [], persistSession: false,
  },
  tools: [
    tool("lookup_order", orders.tools.lookup_order.description, orders.lookupOrderArgs, async (a) => text(orders.lookupOrder(a))),
    tool("send_invoice", orders.tools.send_invoice.description, orders.sendInvoiceArgs, async (a, extra) => text(orders.sendInvoice(dexCall(extra), a))),
    tool("charge_card", orders.tools.charge_card.description, orders.chargeCardArgs, async (a, extra) => text(orders.chargeCard(dexCall(extra), a))),
  ],
  dexTools: orders.tools,
});
await runWorker("claude-agent-sdk", a.model, a.tools);
