import { jsonSchema, tool, type ToolSet } from "ai";
import { MockLanguageModelV3 } from "ai/test";
import { aiSdkAgent, type DexContext } from "../src/adapters/ai-sdk.js";
import type { ModelInput } from "../src/index.js";
import type { Ledger } from "./ledger.js";
import type { Script } from "./script.js";
import type { DemoTools } from "./tools.js";
import { runCalc, scripted, stepPolicies, type DemoAgent } from "./adapters.js";

const anyObject = jsonSchema<Record<string, unknown>>({ type: "object", additionalProperties: true });

/**
 * The demo through the AI SDK: MockLanguageModelV3 answers each call with
 * the scripted output, its usage as a provider's (tokens and the model that
 * answered: the AI SDK carries no cost).
 */
export function aiSdkDemo(script: Script | undefined, ledger: Ledger, worker: string, demo: DemoTools): DemoAgent {
  const policies = stepPolicies(demo);
  const tools: ToolSet = {};
  for (const [name, p] of Object.entries(policies)) tools[name] = tool({ description: p.description, inputSchema: anyObject });
  tools.calc = tool({
    description: "Adds, subtracts or multiplies two numbers.", inputSchema: anyObject,
    execute: async (args, opts) => {
      const r = await runCalc(demo, (opts.experimental_context as DexContext).dex as ModelInput, opts.toolCallId, args);
      if (r.isError) throw new Error(r.content);
      return r.content;
    },
  });
  const model = (input: ModelInput) => new MockLanguageModelV3({
    doGenerate: async () => {
      const out = await scripted(script, ledger, worker, input);
      const content = [
        ...(out.text ? [{ type: "text" as const, text: out.text }] : []),
        ...[...(out.inlineResults ?? []), ...(out.toolCalls ?? [])].map((c) => ({
          type: "tool-call" as const, toolCallId: c.callId, toolName: c.tool, input: typeof c.arguments === "string" ? c.arguments : JSON.stringify(c.arguments ?? {}),
        })),
      ];
      const inputTokens = Number(out.usage?.inputTokens ?? 0);
      const outputTokens = Number(out.usage?.outputTokens ?? 0);
      return {
        content, finishReason: { unified: content.some((c) => c.type === "tool-call") ? "tool-calls" : "stop", raw: undefined }, warnings: [],
        usage: {
          inputTokens: { total: inputTokens, noCache: inputTokens, cacheRead: 0, cacheWrite: 0 }, outputTokens: { total: outputTokens, text: outputTokens, reasoning: 0 },
        },
        response: { modelId: out.usage?.model },
      };
    },
  });
  return aiSdkAgent({ model, tools, dexTools: policies });
}
