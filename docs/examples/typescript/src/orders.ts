// The three tools every Worker of this package serves, whatever its
// framework: the business logic, the arguments' schemas and the policies.
// The "invoice system" and the "card processor" are files under $STORE_DIR
// (default ./store), so a run's side effects can be looked at afterwards.
import { appendFileSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { z } from "zod";
import { sideEffect, type ToolCall } from "@dexhq/dex";

const store = process.env.STORE_DIR ?? "store";

export const lookupOrderArgs = { order_id: z.string().describe("The order id, e.g. A-1001") };
export const sendInvoiceArgs = { order_id: z.string(), amount_cents: z.number().int().describe("The amount in cents") };
export const chargeCardArgs = { order_id: z.string(), amount_cents: z.number().int().describe("The amount in cents") };

/** Each tool's description and Dex policy (the same as in tools.json). */
export const tools = {
  lookup_order: { description: "Looks up an order: its customer, items and total.", access: "read" },
  send_invoice: { description: "Sends the invoice of an order to its customer.", access: "idempotent_write" },
  charge_card: { description: "Charges the customer's card for an order.", access: "single_attempt" },
} as const;

export function lookupOrder(a: { order_id: string }): string {
  return JSON.stringify({ order_id: a.order_id, customer: "ada@example.com", items: ["notebook"], total_cents: 1250 });
}

/**
 * Sends an invoice through the invoice system with the call's idempotency
 * key: the system keeps one invoice per key, so a retried attempt (the same
 * key) does not send a second one.
 */
export function sendInvoice(call: ToolCall, a: { order_id: string; amount_cents: number }): string {
  const key = call.idempotencyKey;
  sideEffect(call, "invoice", key); // before the effect: a kill after it cannot hide it
  const dir = join(store, "invoices");
  mkdirSync(dir, { recursive: true });
  const file = join(dir, encodeURIComponent(key) + ".json");
  try {
    writeFileSync(file, JSON.stringify({ key, ...a, sent_at: new Date().toISOString() }) + "\n", { flag: "wx" });
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== "EEXIST") throw e;
    return `invoice already sent: ${readFileSync(file, "utf8").trim()}`;
  }
  return `invoice sent for ${a.order_id}: ${a.amount_cents} cents`;
}

/** Charges the card: no idempotency key, so Dex never runs it twice. */
export function chargeCard(call: ToolCall, a: { order_id: string; amount_cents: number }): string {
  sideEffect(call, "charge", "");
  mkdirSync(store, { recursive: true });
  appendFileSync(join(store, "charges.jsonl"), JSON.stringify({ ...a, step: call.stepId, at: new Date().toISOString() }) + "\n");
  return `charged ${a.amount_cents} cents for ${a.order_id}`;
}
