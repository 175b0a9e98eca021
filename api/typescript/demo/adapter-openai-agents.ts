import { Agent, tool, Usage, type Model, type ModelResponse } from "@openai/agents";
import { openaiAgentsAdapter, type DexRunContext } from "../src/adapters/openai-agents.js";
import type { ModelInput, ModelOutputInit } from "../src/index.js";
import type { Ledger } from "./ledger.js";
import type { Script } from "./script.js";
import type { DemoTools } from "./tools.js";
import { runCalc, scripted, stepPolicies, type DemoAgent } from "./adapters.js";

const anyObject = { type: "object" as const, properties: {}, required: [], additionalProperties: true as const };

/** The SDK's output items of a Dex model output. */
export function outputItems(out: ModelOutputInit): ModelResponse["output"] {
  const args = (a: unknown) => (typeof a === "string" ? a : JSON.stringify(a ?? {}));
  return [
    ...(out.text ? [{ type: "message" as const, role: "assistant" as const, status: "completed" as const, content: [{ type: "output_text" as const, text: out.text }] }] : []),
    ...[...(out.inlineResults ?? []), ...(out.toolCalls ?? [])].map((c) => ({
      type: "function_call" as const, callId: c.callId, name: c.tool, arguments: args(c.arguments), status: "completed" as const,
    })),
  ];
}

/** The SDK's model response of a Dex model output: its items, its usage as a provider's (no cost), the model in the provider data. */
export function modelResponse(out: ModelOutputInit): ModelResponse {
  const inputTokens = Number(out.usage?.inputTokens ?? 0);
  const outputTokens = Number(out.usage?.outputTokens ?? 0);
  return {
    usage: new Usage({ requests: 1, inputTokens, outputTokens, totalTokens: inputTokens + outputTokens }), output: outputItems(out),
    providerData: { model: out.usage?.model ?? "" },
  };
}

/** The demo through the OpenAI Agents SDK: a custom Model answers each call with the scripted output. */
export function openaiAgentsDemo(script: Script | undefined, ledger: Ledger, worker: string, demo: DemoTools): DemoAgent {
  const policies = stepPolicies(demo);
  const stepTools = Object.entries(policies).map(([name, p]) => tool({
    name, description: p.description, parameters: anyObject, strict: false,
    execute: async () => {
      throw new Error(`${name} runs as a Dex Step`);
    },
  }));
  const calc = tool({
    name: "calc", description: "Adds, subtracts or multiplies two numbers.", parameters: anyObject, strict: false,
    execute: async (args, ctx, details) => {
      const input = (ctx?.context as DexRunContext).dex as ModelInput;
      const callId = details?.toolCall?.callId ?? "";
      return (await runCalc(demo, input, callId, args)).content;
    },
  });
  const agentFor = (input: ModelInput) => {
    const model: Model = {
      getResponse: async () => modelResponse(await scripted(script, ledger, worker, input)),
      getStreamedResponse: () => {
        throw new Error("the demo model does not stream");
      },
    };
    return new Agent({ name: "dex-demo", instructions: "", model, tools: [...stepTools, calc] });
  };
  return openaiAgentsAdapter({ agent: agentFor, dexTools: policies });
}
