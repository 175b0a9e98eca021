// dexworker-typescript: the demo Worker of cmd/dexworker on the TypeScript
// library, with the same flags, scripted model, tools, holds, ledger and
// exit codes (0 after SIGTERM/SIGINT, 2 on bad flags or script, 1 when the
// cluster refuses the registration, the ledger cannot be opened or
// --metrics-addr cannot be served).
import { hostname } from "node:os";
import { dial, Holder, jsonLogger, parseMoments, tokenFrom, Worker, type Channel, type Logger, type ModelHandler, type TlsOptions } from "../src/index.js";
import { flagUsage, HelpError, parseFlags, splitList, type FlagSpec } from "./flags.js";
import { adapterNames, demoAgent } from "./adapters.js";
import { Ledger } from "./ledger.js";
import { demoStream, loadScript, retryAfterHelp, ScriptedModel, usageHelp, type Script } from "./script.js";
import { DemoTools } from "./tools.js";
import { startMetrics } from "./metrics.js";

const usage = `usage: dexworker-typescript --addr TARGET --ledger FILE [flags]

A Dex Worker with a scripted model and demo tools: lookup (read), save_note
(idempotent write), send_email (single attempt), deploy (idempotent write,
needs approval), build (long running, polled), calc (inline). See
cmd/dexworker/README.md: the flags, script, holds and ledger are the same.

${usageHelp}
${retryAfterHelp}
Flags:
`;

const maxRunTimeoutMs = 0xffffffff;

export const flagSpecs: Record<string, FlagSpec> = {
  addr: { kind: "string", def: "", usage: "cluster target: dex:///h1:p1,h2:p2,h3:p3 or host:port (required)" },
  ledger: { kind: "string", def: "", usage: "side-effect ledger file, appended to (required)" },
  script: { kind: "string", def: "", usage: "model script (JSON, see README.md); default: the demo model" },
  hold: { kind: "string", def: "", usage: "pause at these moments (comma separated) until released" },
  "hold-all": { kind: "bool", def: false, usage: "hold every occurrence of a --hold moment, not only the first" },
  id: { kind: "string", def: "", usage: "Worker id (default dexworker-HOST-PID)" },
  token: { kind: "string", def: "", usage: "ACL token secret (a worker token; default $DEX_TOKEN)" },
  concurrency: { kind: "int", def: 4, usage: "tasks run at once" },
  "metrics-addr": { kind: "string", def: "", usage: "serve the Worker's Prometheus metrics on HOST:PORT/metrics (default: none)" },
  "poll-wait": { kind: "duration", def: 20_000, usage: "long-poll wait" },
  "poll-interval": { kind: "duration", def: 200, usage: "how often the cluster polls a build task (the build tool's poll interval)" },
  "shutdown-grace": { kind: "duration", def: 5_000, usage: "on SIGTERM/SIGINT, how long running tasks may finish" },
  "model-run-timeout": { kind: "duration", def: 0, usage: "how long one model call may run before the cluster cancels it (0: the cluster's --run-timeout)" },
  "tool-run-timeout": { kind: "string", def: "", usage: "TOOL=DURATION[,TOOL=DURATION]: how long one attempt of the tool may run before the cluster cancels it" },
  agent: { kind: "string", def: "", usage: "NAME[,NAME]: the agents (NAME or NAME@VERSION) whose model this Worker runs; it gets only their sessions' model Steps (default: the default agent)" },
  "tool-agents": { kind: "string", def: "", usage: "NAME[,NAME]: serve the demo tools only for these agents' sessions (default: for every agent)" },
  adapter: { kind: "string", def: "", usage: "drive the scripted model through this framework adapter: ai-sdk, openai-agents or claude-agent-sdk" },
  stream: { kind: "bool", def: false, usage: "stream each model output's text as live output while the call runs, 8 bytes every 10 ms, before answering (docs/design/streaming.md; not with --adapter)" },
  "tls-cert": { kind: "string", def: "", usage: "client certificate (PEM) for a cluster with mutual TLS, with --tls-key and --tls-ca; the three are reloaded on SIGHUP" },
  "tls-key": { kind: "string", def: "", usage: "the key of --tls-cert (PEM)" },
  "tls-ca": { kind: "string", def: "", usage: "the CA bundle (PEM) the nodes' certificates chain to" },
};

export interface Config {
  addr: string;
  ledger: string;
  script: string;
  hold: string;
  holdAll: boolean;
  id: string;
  token: string;
  concurrency: number;
  pollWaitMs: number;
  pollIntervalMs: number;
  graceMs: number;
  modelRunTimeoutMs: number;
  toolRunTimeouts: Map<string, number>;
  agents: string[];
  toolAgents: string[];
  adapter: string;
  stream: boolean;
  metricsAddr: string;
  tls: { cert: string; key: string; ca: string };
}

/** parseRunTimeouts reads --tool-run-timeout: TOOL=DURATION[,TOOL=DURATION] naming demo tools that run as Steps. */
function parseRunTimeouts(v: string, parseDur: (s: string) => number): Map<string, number> {
  const out = new Map<string, number>();
  if (v === "") return out;
  const known = new Map(new DemoTools(undefined as never, "").tools().map((t) => [t.name, !t.inline] as const));
  for (const part of v.split(",")) {
    const p = part.trim();
    const eq = p.indexOf("=");
    const name = eq < 0 ? "" : p.slice(0, eq);
    if (eq < 0 || name === "") throw new Error(`--tool-run-timeout ${JSON.stringify(part)}: want TOOL=DURATION[,TOOL=DURATION]`);
    const runsAsStep = known.get(name);
    if (runsAsStep === undefined) throw new Error(`--tool-run-timeout: no demo tool ${JSON.stringify(name)}`);
    if (!runsAsStep) throw new Error(`--tool-run-timeout: ${JSON.stringify(name)} is inline: it runs inside the model call (see --model-run-timeout)`);
    if (out.has(name)) throw new Error(`--tool-run-timeout: ${JSON.stringify(name)} given twice`);
    let d = NaN;
    try {
      d = parseDur(p.slice(eq + 1));
    } catch {
      // reported below
    }
    if (!(d >= 1 && d <= maxRunTimeoutMs)) throw new Error(`--tool-run-timeout ${part}: want a duration from 1ms to 1193h2m47.295s`);
    out.set(name, d);
  }
  return out;
}

export function parseConfig(args: string[], parseDur: (s: string) => number): Config {
  const { values: v, rest } = parseFlags(args, flagSpecs);
  const tls = { cert: v["tls-cert"] as string, key: v["tls-key"] as string, ca: v["tls-ca"] as string };
  if ((tls.cert || tls.key || tls.ca) && !(tls.cert && tls.key && tls.ca)) {
    throw new Error("--tls-cert, --tls-key and --tls-ca go together: give all three or none");
  }
  if (rest.length > 0) throw new Error(`unexpected arguments: [${rest.join(" ")}]`);
  const c: Config = {
    addr: v.addr as string, ledger: v.ledger as string, script: v.script as string, hold: v.hold as string, holdAll: v["hold-all"] as boolean,
    id: v.id as string, token: v.token as string, concurrency: v.concurrency as number, pollWaitMs: v["poll-wait"] as number,
    pollIntervalMs: v["poll-interval"] as number, graceMs: v["shutdown-grace"] as number, modelRunTimeoutMs: v["model-run-timeout"] as number,
    toolRunTimeouts: new Map(), agents: splitList(v.agent as string), toolAgents: splitList(v["tool-agents"] as string), adapter: v.adapter as string,
    stream: v.stream as boolean, metricsAddr: v["metrics-addr"] as string, tls,
  };
  if (c.addr === "" || c.ledger === "") throw new Error("--addr and --ledger are required");
  if (c.adapter !== "" && !adapterNames.includes(c.adapter)) throw new Error(`--adapter ${JSON.stringify(c.adapter)}: want one of ${adapterNames.join(", ")}`);
  if (c.stream && c.adapter !== "") throw new Error("--stream streams the scripted model's text: it does not go with --adapter");
  if (c.concurrency <= 0) throw new Error("--concurrency must be positive");
  if (c.pollIntervalMs < 1) throw new Error("--poll-interval must be at least 1ms");
  if (c.modelRunTimeoutMs < 0 || c.modelRunTimeoutMs > maxRunTimeoutMs) {
    throw new Error("--model-run-timeout must be between 0 (the cluster's default) and 1193h2m47.295s");
  }
  c.toolRunTimeouts = parseRunTimeouts(v["tool-run-timeout"] as string, parseDur);
  return c;
}

/** SIGHUP: reads the TLS files again; on an error the current ones stay in use. */
function reloadTls(ch: Channel, log: Logger): void {
  try {
    ch.reloadTls();
  } catch (e) {
    log.error("SIGHUP: reloading the TLS files failed; the current ones stay in use", { error: e });
    return;
  }
  log.info("SIGHUP: TLS files reloaded");
}

async function run(c: Config): Promise<number> {
  const log = jsonLogger("info");
  let moments;
  let script: Script | undefined;
  try {
    moments = parseMoments(c.hold);
    if (c.script !== "") script = loadScript(c.script);
  } catch (e) {
    process.stderr.write(`dexworker: ${(e as Error).message}\n`);
    return 2;
  }
  let ledger: Ledger;
  try {
    ledger = new Ledger(c.ledger);
  } catch (e) {
    process.stderr.write(`dexworker: ${(e as Error).message}\n`);
    return 1;
  }
  const id = c.id || `dexworker-${hostname()}-${process.pid}`;
  const holder = new Holder(moments, c.holdAll, c.ledger);
  // SIGUSR1 releases a hold (and never kills the Worker).
  process.on("SIGUSR1", () => holder.release());
  const stop = new AbortController();
  process.on("SIGTERM", () => stop.abort());
  process.on("SIGINT", () => stop.abort());

  const tls: TlsOptions | undefined = c.tls.ca ? { caFile: c.tls.ca, certFile: c.tls.cert, keyFile: c.tls.key } : undefined;
  let ch;
  try {
    ch = dial(c.addr, { token: tokenFrom(c.token), tls, logger: log });
  } catch (e) {
    process.stderr.write(`dexworker: ${(e as Error).message}\n`);
    return 2;
  }
  if (tls) process.on("SIGHUP", () => reloadTls(ch, log));
  let metrics: Awaited<ReturnType<typeof startMetrics>> | undefined;
  if (c.metricsAddr !== "") {
    try {
      metrics = await startMetrics(c.metricsAddr, log);
    } catch (e) {
      process.stderr.write(`dexworker: ${(e as Error).message}\n`);
      ch.close();
      ledger.close();
      return 1;
    }
  }
  const tools = new DemoTools(ledger, id, c.pollIntervalMs, c.toolRunTimeouts);
  let model: ModelHandler = new ScriptedModel(script, ledger, id, tools.inline, c.stream ? demoStream : undefined);
  let served = tools.tools();
  if (c.adapter !== "") {
    try {
      const a = await demoAgent(c.adapter, script, ledger, id, tools);
      // Compaction stays the script's: the adapters' summary call is a plain model call.
      model = { run: a.model.run, compact: (model as ScriptedModel).compact };
      served = a.tools;
    } catch (e) {
      process.stderr.write(`dexworker: --adapter ${c.adapter}: ${(e as Error).message}\n`);
      return 2;
    }
  }
  let w: Worker;
  try {
    w = new Worker(ch, {
      id, tools: served.map((t) => (c.toolAgents.length > 0 ? { ...t, agents: c.toolAgents } : t)), agents: c.agents, model, modelRunTimeoutMs: c.modelRunTimeoutMs, concurrency: c.concurrency, pollWaitMs: c.pollWaitMs,
      shutdownGraceMs: c.graceMs, logger: jsonLogger("info", { worker: id }), hold: holder.hold, metrics: metrics?.metrics,
    });
  } catch (e) {
    process.stderr.write(`dexworker: ${(e as Error).message}\n`);
    return 2;
  }
  log.info("dexworker starting", { worker: id, addr: c.addr, ledger: c.ledger, script: c.script, hold: c.hold, pid: process.pid, lang: "typescript", adapter: c.adapter });
  try {
    await w.run(stop.signal);
  } catch (e) {
    log.error("worker stopped", { error: e });
    return 1;
  } finally {
    ch.close();
    ledger.close();
    await metrics?.server.close();
  }
  log.info("dexworker stopped");
  return 0;
}

async function main(): Promise<void> {
  const { parseDuration } = await import("./flags.js");
  let c: Config;
  try {
    c = parseConfig(process.argv.slice(2), parseDuration);
  } catch (e) {
    if (e instanceof HelpError) {
      process.stderr.write(usage + flagUsage(flagSpecs));
      process.exit(0);
    }
    process.stderr.write(`dexworker: ${(e as Error).message}\n`);
    process.exit(2);
  }
  process.exit(await run(c));
}

await main();
