// The same Worker on the OpenAI Agents SDK: the agent's model through the
// Responses API at $OPENAI_BASE_URL, its three tools run by Dex as Steps
// with their policies (Dex's openai-agents adapter).
import { Agent, OpenAIProvider, Runner, tool, type RunContext } from "@openai/agents";
import { z } from "zod";
import type { ToolCall } from "@dexhq/dex";
import { openaiAgentsAdapter, type DexRunContext } from "@dexhq/dex/adapters/openai-agents";
import * as orders from "./orders.js";
import { runWorker } from "./run.js";

// Only the base URL: no call goes to OpenAI's own endpoints (tracing is off).
const runner = new Runner({
  modelProvider: new OpenAIProvider({ baseURL: process.env.OPENAI_BASE_URL, apiKey: process.env.OPENAI_API_KEY, useResponses: true }),
  tracingDisabled: true,
});
// The Dex tool call a tool runs for (its idempotency key, attempt, ...).
const dexCall = (ctx?: RunContext<unknown>) => (ctx?.context as DexRunContext).dex as ToolCall;

const agent = new Agent({
  name: "orders",
  instructions: "You handle orders: look them up, send invoices, charge cards.",
  model: process.env.OPENAI_MODEL ?? "gpt-4o-mini",
  tools: [
    tool({
      name: "lookup_order", description: orders.tools.lookup_order.description, parameters: z.object(orders.lookupOrderArgs),
      execute: async (a) => orders.lookupOrder(a),
    }),
    tool({
      name: "send_invoice", description: orders.tools.send_invoice.description, parameters: z.object(orders.sendInvoiceArgs),
      execute: async (a, ctx) => orders.sendInvoice(dexCall(ctx), a),
    }),
    tool({
      name: "charge_card", description: orders.tools.charge_card.description, parameters: z.object(orders.chargeCardArgs),
      execute: async (a, ctx) => orders.chargeCard(dexCall(ctx), a),
    }),
  ],
});

const a = openaiAgentsAdapter({ agent, runner, dexTools: orders.tools });
await runWorker("openai-agents", a.model, a.tools);
