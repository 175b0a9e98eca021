// Runs a Worker as dexchaos certify (and production) starts it: the cluster
// from $DEX_ADDR (+ $DEX_TOKEN), the Worker's id from $DEX_WORKER_ID; the
// library reads $DEX_LEDGER and $DEX_HOLD itself. SIGTERM/SIGINT stop it.
import { dial, Worker, type ModelHandler, type Tool } from "@dexhq/dex";

export async function runWorker(name: string, model: ModelHandler, tools: Tool[]): Promise<void> {
  const ch = dial(process.env.DEX_ADDR ?? "dex:///127.0.0.1:7101,127.0.0.1:7102,127.0.0.1:7103");
  const worker = new Worker(ch, { id: process.env.DEX_WORKER_ID || `${name}-${process.pid}`, model, tools });
  const stop = new AbortController();
  process.on("SIGTERM", () => stop.abort());
  process.on("SIGINT", () => stop.abort());
  await worker.run(stop.signal);
  ch.close();
}
