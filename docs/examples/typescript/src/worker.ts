// A Dex Worker on the Vercel AI SDK: the model through @ai-sdk/openai (Chat
// Completions at $OPENAI_BASE_URL), three tools run by Dex as Steps with
// their policies (Dex's ai-sdk adapter).
import { createOpenAI } from "@ai-sdk/openai";
import { tool } from "ai";
import { z } from "zod";
import type { ToolCall } from "@dexhq/dex";
import { aiSdkAgent, type DexContext } from "@dexhq/dex/adapters/ai-sdk";
import * as orders from "./orders.js";
import { runWorker } from "./run.js";

const openai = createOpenAI({ baseURL: process.env.OPENAI_BASE_URL, apiKey: process.env.OPENAI_API_KEY });
// The Dex tool call a tool runs for (its idempotency key, attempt, ...).
const dexCall = (o: { experimental_context?: unknown }) => (o.experimental_context as DexContext).dex as ToolCall;

const agent = aiSdkAgent({
  model: openai.chat(process.env.OPENAI_MODEL ?? "gpt-4o-mini"),
  system: "You handle orders: look them up, send invoices, charge cards.",
  tools: {
    lookup_order: tool({
      description: orders.tools.lookup_order.description, inputSchema: z.object(orders.lookupOrderArgs),
      execute: async (a) => orders.lookupOrder(a),
    }),
    send_invoice: tool({
      description: orders.tools.send_invoice.description, inputSchema: z.object(orders.sendInvoiceArgs),
      execute: async (a, o) => orders.sendInvoice(dexCall(o), a),
    }),
    charge_card: tool({
      description: orders.tools.charge_card.description, inputSchema: z.object(orders.chargeCardArgs),
      execute: async (a, o) => orders.chargeCard(dexCall(o), a),
    }),
  },
  // Each tool runs as its own Dex Step with this policy.
  dexTools: orders.tools,
});

await runWorker("ai-sdk", agent.model, agent.tools);
