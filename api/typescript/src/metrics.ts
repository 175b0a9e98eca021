// A Worker's own Prometheus metrics, with the Go library's names and labels
// (api/client/worker_metrics.go), so that one dashboard reads Workers of
// every language.
import { createServer, type Server } from "node:http";
import { createRequire } from "node:module";
import type { AddressInfo } from "node:net";
import type { Counter, Histogram, Registry } from "prom-client";
import type { StepKind } from "../gen/dex/v1/types_pb.js";
import { kindName } from "./kinds.js";

/** The families, as the Go Worker names them. */
export const TasksMetric = "dex_worker_tasks_total";
export const HandlerDurationMetric = "dex_worker_handler_duration_seconds";

/** How a task ended on this Worker: the outcome label of dex_worker_tasks_total. */
export type TaskOutcome = "completed" | "failed" | "cancelled" | "cannot_run" | "claim_refused" | "report_refused";

/** The handler histogram's buckets: prometheus.ExponentialBuckets(0.005, 3, 12), 5 ms to about 15 minutes, as Go's (each the one before times 3). */
export const handlerBuckets: number[] = [];
for (let b = 0.005; handlerBuckets.length < 12; b *= 3) handlerBuckets.push(b);

type PromClient = typeof import("prom-client");
let prom: PromClient | undefined;

/**
 * prom-client, loaded when metrics are first made: a Worker that makes none
 * runs without the package (it is a dependency of this library, but an
 * application's lockfile may leave it out).
 */
export function promClient(): PromClient {
  if (prom === undefined) {
    try {
      prom = createRequire(import.meta.url)("prom-client") as PromClient;
    } catch (e) {
      throw new Error(`Worker metrics need the prom-client package (npm install prom-client): ${(e as Error).message}`);
    }
  }
  return prom;
}

/** A Step kind as the label reads: STEP_KIND_RUN_MODEL is "run_model" (an unknown number stays a number). */
export function kindLabel(kind: StepKind): string {
  return kindName(kind).replace(/^STEP_KIND_/, "").toLowerCase();
}

/**
 * The Worker's counters, given to WorkerOptions.metrics:
 * dex_worker_tasks_total{kind,outcome} (outcome: completed, failed,
 * cancelled, cannot_run, claim_refused, report_refused) and
 * dex_worker_handler_duration_seconds{kind,outcome} (outcome: ok, error).
 * They are registered in registry (default: a Registry of their own,
 * this.registry); serve it with serveMetrics.
 */
export class WorkerMetrics {
  readonly registry: Registry;
  private readonly tasks: Counter<"kind" | "outcome">;
  private readonly handler: Histogram<"kind" | "outcome">;

  constructor(registry?: Registry) {
    const { Counter, Histogram, Registry } = promClient();
    registry ??= new Registry();
    this.registry = registry;
    this.tasks = new Counter({
      name: TasksMetric,
      help: "Tasks this Worker received, by Step kind and how they ended here: completed, failed (reported as a failure), cancelled (by the cluster), cannot_run, claim_refused, report_refused.",
      labelNames: ["kind", "outcome"], registers: [registry],
    });
    this.handler = new Histogram({
      name: HandlerDurationMetric,
      help: "Time the model or tool handler ran for one task, by Step kind and result (ok or error).",
      labelNames: ["kind", "outcome"], buckets: handlerBuckets, registers: [registry],
    });
  }

  /** Counts a task of kind that ended with outcome. */
  task(kind: StepKind, outcome: TaskOutcome): void {
    this.tasks.inc({ kind: kindLabel(kind), outcome });
  }

  /** Times one handler run. */
  handled(kind: StepKind, ok: boolean, seconds: number): void {
    this.handler.observe({ kind: kindLabel(kind), outcome: ok ? "ok" : "error" }, seconds);
  }
}

/** HOST:PORT (HOST may be empty: every interface; [v6]:PORT) as a pair; throws for anything else. */
export function splitHostPort(addr: string): { host: string; port: number } {
  const m = /^(\[[^\]]*\]|[^:]*):(\d{1,5})$/.exec(addr);
  if (!m || Number(m[2]) > 65535) throw new Error(`${JSON.stringify(addr)} is not HOST:PORT (e.g. 127.0.0.1:9464, or :0 for any free port)`);
  return { host: m[1].replace(/^\[|\]$/g, ""), port: Number(m[2]) };
}

/** An HTTP server answering GET /metrics from a registry; address is HOST:PORT as bound (the port chosen for 0). */
export interface MetricsServer {
  readonly address: string;
  close(): Promise<void>;
}

/**
 * Serves registry's metrics at http://ADDR/metrics until close. It resolves
 * once the port is bound, so a busy port rejects here.
 */
export async function serveMetrics(addr: string, registry: Registry): Promise<MetricsServer> {
  const { host, port } = splitHostPort(addr);
  const server: Server = createServer((req, res) => {
    const path = new URL(req.url ?? "/", "http://x").pathname;
    if (path !== "/metrics" || (req.method !== "GET" && req.method !== "HEAD")) {
      res.writeHead(404, { "content-type": "text/plain" }).end("only GET /metrics is served here\n");
      return;
    }
    registry.metrics().then(
      (body) => res.writeHead(200, { "content-type": registry.contentType }).end(body),
      (e: Error) => res.writeHead(500, { "content-type": "text/plain" }).end(`${e.message}\n`));
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", (e: NodeJS.ErrnoException) => reject(new Error(`listen on ${addr}: ${e.code ?? e.message}`)));
    server.listen(port, host === "" ? undefined : host, () => resolve());
  });
  // The server must not keep a stopping process alive.
  server.unref();
  const a = server.address() as AddressInfo;
  const shown = a.family === "IPv6" || a.address.includes(":") ? `[${a.address}]` : a.address;
  return {
    address: `${shown}:${a.port}`,
    close: () => new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    }),
  };
}
