// --adapter NAME: the demo's scripted model driven through a framework
// adapter. The framework's own mock (or custom) model answers each model
// call with the scripted output for the Dex history and attempt, so the
// chaos checks read the same call ids and tool calls; the demo tools that
// run as Steps are registered by the adapter with their policies, and calc
// runs inside the framework's step as an inline tool. The scripted usage
// goes through the framework too, in its own shape, and the adapter reads it
// back; where the framework carries no cost (the AI SDK, the OpenAI Agents
// SDK), the demo puts the script's back, so that every adapter reports the
// usage the Go demo Worker does.
import type { ModelHandler, ModelInput, ModelOutputInit, Tool, UsageInit } from "../src/index.js";
import type { DexToolPolicy } from "../src/adapters/history.js";
import type { Ledger } from "./ledger.js";
import { modelOutput, wait, type Script } from "./script.js";
import type { DemoTools } from "./tools.js";

export const adapterNames = ["ai-sdk", "openai-agents", "claude-agent-sdk"];

/** The adapters whose framework carries no cost. */
const costless = new Set(["ai-sdk", "openai-agents"]);

/** The usage of each RunModel's scripted call, by its input. */
const scriptedUsage = new WeakMap<ModelInput, UsageInit | undefined>();

export interface DemoAgent {
  model: ModelHandler;
  tools: Tool[];
}

/** One scripted model call: the ledger line, the delay, the scripted error or output. */
export async function scripted(script: Script | undefined, ledger: Ledger, worker: string, input: ModelInput): Promise<ModelOutputInit> {
  ledger.append({
    session: input.sessionId, tool: "model", attempt: input.attempt, step: input.stepId, kind: "model", worker, epoch: input.epoch, agent: input.agent,
  });
  const { o, out, err } = modelOutput(script, input.history, input.attempt);
  await wait(o.delay_ms, input.signal);
  if (err) throw err;
  scriptedUsage.set(input, out!.usage);
  return out!;
}

/** The demo tools that run as Steps, as Dex policies with the demo's handlers. */
export function stepPolicies(tools: DemoTools): Record<string, DexToolPolicy & { description: string }> {
  const out: Record<string, DexToolPolicy & { description: string }> = {};
  for (const t of tools.tools()) {
    if (t.inline) continue;
    out[t.name] = {
      access: t.access, description: t.description ?? "", needsApproval: t.needsApproval, runTimeoutMs: t.runTimeoutMs, run: t.run,
      longRunning: t.longRunning, pollIntervalMs: t.pollIntervalMs, poll: t.poll,
    };
  }
  return out;
}

/** calc, run inside the framework's step: the demo's inline runner (its ledger line, its result). */
export async function runCalc(tools: DemoTools, input: ModelInput, callId: string, args: unknown): Promise<{ content: string; isError: boolean }> {
  const r = { callId, tool: "calc", arguments: typeof args === "string" ? args : JSON.stringify(args ?? {}), content: "", isError: false };
  await tools.inline(input, [r]);
  return { content: r.content, isError: r.isError };
}

/** The demo model and tools through adapter name. */
export async function demoAgent(name: string, script: Script | undefined, ledger: Ledger, worker: string, tools: DemoTools): Promise<DemoAgent> {
  const calcStep = tools.tools().filter((t) => t.inline);
  let a: DemoAgent;
  switch (name) {
    case "ai-sdk":
      a = (await import("./adapter-ai-sdk.js")).aiSdkDemo(script, ledger, worker, tools);
      break;
    case "openai-agents":
      a = (await import("./adapter-openai-agents.js" as string)).openaiAgentsDemo(script, ledger, worker, tools);
      break;
    case "claude-agent-sdk":
      a = (await import("./adapter-claude-agent-sdk.js" as string)).claudeAgentSdkDemo(script, ledger, worker, tools);
      break;
    default:
      throw new Error(`unknown adapter ${JSON.stringify(name)} (known: ${adapterNames.join(", ")})`);
  }
  let model = a.model;
  if (costless.has(name)) {
    const run = a.model.run;
    model = {
      ...a.model,
      run: async (input: ModelInput) => {
        const out = (await run(input)) as ModelOutputInit;
        const cost = scriptedUsage.get(input)?.costMicros;
        if (out.usage && cost !== undefined) out.usage = { ...out.usage, costMicros: cost };
        return out;
      },
    };
  }
  // calc stays registered as an inline tool, as without an adapter.
  return { model, tools: [...a.tools, ...calcStep] };
}
