"""A Worker's own Prometheus metrics, with the Go library's names and labels
(api/client/worker_metrics.go), so that one dashboard reads Workers of
every language:

- ``dex_worker_tasks_total{kind,outcome}``: tasks this Worker received, by
  Step kind (``run_model``, ``call_tool``...) and how they ended here:
  completed, failed, cancelled, cannot_run, claim_refused, report_refused.
- ``dex_worker_handler_duration_seconds{kind,outcome}``: how long the model
  or tool handler ran for one task (outcome ok or error).

They need the ``prometheus_client`` package (Debian: python3-prometheus-client),
which the rest of the library does not::

    m = dex.WorkerMetrics()
    server = dex.serve_metrics("127.0.0.1:9464", m.registry)
    worker = dex.Worker(target, metrics=m)
"""

from __future__ import annotations

import socket
import threading
from http.server import ThreadingHTTPServer
from typing import Any
from urllib.parse import urlparse

from dex.errors import DexError

#: The families, as the Go Worker names them.
TASKS = "dex_worker_tasks_total"
HANDLER_DURATION = "dex_worker_handler_duration_seconds"

#: How a task ended on this Worker (the outcome label of TASKS).
TASK_COMPLETED = "completed"
TASK_FAILED = "failed"
TASK_CANCELLED = "cancelled"
TASK_CANNOT_RUN = "cannot_run"
TASK_CLAIM_REFUSED = "claim_refused"
TASK_REPORT_REFUSED = "report_refused"


def _exponential_buckets(start: float, factor: float, count: int) -> list[float]:
    # Multiplied as prometheus.ExponentialBuckets does, so the le labels are
    # the Go Worker's to the last digit.
    out = []
    for _ in range(count):
        out.append(start)
        start *= factor
    return out


#: The handler histogram's buckets: 5 ms to about 15 minutes, as Go's.
HANDLER_BUCKETS = _exponential_buckets(0.005, 3, 12)

_NO_CLIENT = ("Worker metrics need the prometheus_client package, which is not installed "
              "(Debian/Ubuntu: apt install python3-prometheus-client; elsewhere: pip install prometheus-client)")


def _prometheus() -> Any:
    try:
        import prometheus_client
    except ImportError as e:
        raise DexError(f"{_NO_CLIENT}: {e}") from e
    return prometheus_client


def kind_label(kind: int) -> str:
    """A Step kind as the label reads: STEP_KIND_RUN_MODEL is ``run_model``
    (an unknown number stays a number)."""
    from dex.v1 import types_pb2

    try:
        name = types_pb2.StepKind.Name(kind)
    except ValueError:
        return str(kind)
    return name.removeprefix("STEP_KIND_").lower()


class WorkerMetrics:
    """The Worker's counters, given to ``Worker(metrics=...)``.

    ``registry``: where they are registered (a prometheus_client
    CollectorRegistry); none: a registry of their own, ``self.registry``.
    Raises DexError when prometheus_client is not installed."""

    def __init__(self, registry: Any = None) -> None:
        prom = _prometheus()
        self.registry = registry if registry is not None else prom.CollectorRegistry()
        self._tasks = prom.Counter(
            TASKS.removesuffix("_total"),
            "Tasks this Worker received, by Step kind and how they ended here: completed, failed (reported as a "
            "failure), cancelled (by the cluster), cannot_run, claim_refused, report_refused.",
            ["kind", "outcome"], registry=self.registry)
        self._handler = prom.Histogram(
            HANDLER_DURATION, "Time the model or tool handler ran for one task, by Step kind and result (ok or error).",
            ["kind", "outcome"], buckets=HANDLER_BUCKETS, registry=self.registry)

    def task(self, kind: int, outcome: str) -> None:
        """Counts a task of ``kind`` that ended with ``outcome``."""
        self._tasks.labels(kind_label(kind), outcome).inc()

    def handled(self, kind: int, ok: bool, seconds: float) -> None:
        """Times one handler run."""
        self._handler.labels(kind_label(kind), "ok" if ok else "error").observe(seconds)


def add_process_collectors(registry: Any) -> None:
    """Adds the process and Python runtime metrics (process_*, python_*) to
    registry, as dexworker adds Go's and the process's to its own."""
    prom = _prometheus()
    prom.ProcessCollector(registry=registry)
    prom.PlatformCollector(registry=registry)
    prom.GCCollector(registry=registry)


def split_host_port(addr: str) -> tuple[str, int]:
    """HOST:PORT (HOST may be empty: every interface; [v6]:PORT) as a pair;
    raises DexError for anything else."""
    host, sep, port = addr.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise DexError(f"{addr!r} is not HOST:PORT (e.g. 127.0.0.1:9464, or :0 for any free port)")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host, int(port)


class MetricsServer:
    """An HTTP server answering GET /metrics from a registry in a thread of
    its own. ``address`` is HOST:PORT as bound (the port chosen for 0)."""

    def __init__(self, addr: str, registry: Any) -> None:
        prom = _prometheus()
        host, port = split_host_port(addr)

        class Handler(prom.MetricsHandler.factory(registry)):  # type: ignore[misc]
            def do_GET(self) -> None:
                if urlparse(self.path).path != "/metrics":
                    self.send_error(404, "only /metrics is served here")
                    return
                super().do_GET()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        class Server(ThreadingHTTPServer):
            daemon_threads = True
            address_family = socket.AF_INET6 if ":" in host else socket.AF_INET

        try:
            self._httpd = Server((host, port), Handler)
        except OSError as e:
            raise DexError(f"listen on {addr}: {e.strerror or e}") from e
        bound = self._httpd.server_address
        shown = f"[{bound[0]}]" if ":" in bound[0] else bound[0]
        self.address = f"{shown}:{bound[1]}"
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="dex-metrics", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(5)


def serve_metrics(addr: str, registry: Any) -> MetricsServer:
    """Serves registry's metrics at http://ADDR/metrics until close(). The
    port is bound before it returns, so a busy port fails here (DexError)."""
    return MetricsServer(addr, registry)


__all__ = ["HANDLER_BUCKETS", "HANDLER_DURATION", "MetricsServer", "TASKS", "WorkerMetrics", "add_process_collectors",
           "kind_label", "serve_metrics", "split_host_port"]
