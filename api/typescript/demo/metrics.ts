// --metrics-addr: the Worker's metrics (and the process's: process_*,
// nodejs_*, as dexworker adds Go's and the process's) served at
// HOST:PORT/metrics from the start, before the cluster answers.
import { promClient, serveMetrics, WorkerMetrics, type Logger, type MetricsServer } from "../src/index.js";

/** Serves the metrics at addr, logging the address bound; throws naming --metrics-addr when it cannot. */
export async function startMetrics(addr: string, log: Logger): Promise<{ metrics: WorkerMetrics; server: MetricsServer }> {
  const metrics = new WorkerMetrics();
  promClient().collectDefaultMetrics({ register: metrics.registry });
  let server: MetricsServer;
  try {
    server = await serveMetrics(addr, metrics.registry);
  } catch (e) {
    throw new Error(`--metrics-addr ${addr}: ${(e as Error).message}`);
  }
  log.info("serving metrics", { addr: server.address, url: `http://${server.address}/metrics` });
  return { metrics, server };
}
