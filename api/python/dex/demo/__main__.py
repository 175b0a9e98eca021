"""Runs the Python dexworker: python3 -m dex.demo --addr TARGET --ledger FILE."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import socket
import sys
import time
from typing import Optional

from dex.connection import Connection
from dex.demo.flags import Config, FlagError, parse_flags
from dex.demo.ledger import Ledger
from dex.demo.script import Script, ScriptError, load_script, Model
from dex.demo.tools import DemoTools
from dex.errors import DexError, RegistrationError
from dex.hold import Holder, parse_moments
from dex.metrics import MetricsServer, WorkerMetrics, add_process_collectors, serve_metrics
from dex.worker import Worker


class JSONFormatter(logging.Formatter):
    """One JSON line per record, with "ts" in ISO 8601, as dexd's zap logs."""

    def format(self, r: logging.LogRecord) -> str:
        t = time.localtime(r.created)
        tz = time.strftime("%z", t)
        ts = time.strftime("%Y-%m-%dT%H:%M:%S", t) + f".{int(r.msecs):03d}" + tz[:3] + ":" + tz[3:]
        d = {"level": r.levelname.lower().replace("warning", "warn"), "ts": ts, "logger": r.name, "msg": r.getMessage()}
        d.update(getattr(r, "fields", {}) or {})
        if r.exc_info:
            d["error"] = self.formatException(r.exc_info)
        return json.dumps(d, default=str, separators=(",", ":"))


def new_logger() -> logging.Logger:
    h = logging.StreamHandler(sys.stderr)
    h.setFormatter(JSONFormatter())
    lg = logging.getLogger("dexworker")
    lg.handlers[:] = [h]
    lg.setLevel(logging.INFO)
    lg.propagate = False
    return lg


def fail(msg: str, code: int) -> int:
    print(f"dexworker: {msg}", file=sys.stderr)
    return code


def start_metrics(addr: str, log: logging.Logger) -> tuple[WorkerMetrics, MetricsServer]:
    """The Worker's metrics (and the process's), served at addr's /metrics
    from now on, before the cluster answers; raises DexError naming
    --metrics-addr when they cannot be (no prometheus_client, a busy port)."""
    try:
        m = WorkerMetrics()
        add_process_collectors(m.registry)
        server = serve_metrics(addr, m.registry)
    except DexError as e:
        raise DexError(f"--metrics-addr {addr}: {e}") from e
    log.info("serving metrics", extra={"fields": {"addr": server.address, "url": f"http://{server.address}/metrics"}})
    return m, server


def reload_tls(conn: Connection, log: logging.Logger) -> None:
    """SIGHUP: reads the TLS files again; on an error the current ones stay."""
    try:
        conn.reload_tls()
    except DexError as e:
        log.error("SIGHUP: reloading the TLS files failed; the current ones stay in use",
                  extra={"fields": {"error": str(e)}})
        return
    log.info("SIGHUP: TLS files reloaded")


async def serve(c: Config, script: Optional[Script], moments: set, ledger: Ledger, log: logging.Logger) -> int:
    wid = c.id or f"dexworker-{socket.gethostname()}-{os.getpid()}"
    try:
        conn = Connection(c.addr, token=c.token or None, tls=c.tls)
    except DexError as e:
        return fail(str(e), 2)
    metrics: Optional[WorkerMetrics] = None
    metrics_server: Optional[MetricsServer] = None
    if c.metrics_addr:
        try:
            metrics, metrics_server = start_metrics(c.metrics_addr, log)
        except DexError as e:
            await conn.close()
            return fail(str(e), 1)
    tools = DemoTools(ledger, wid, poll_interval=c.poll_interval, run_timeouts=c.tool_run_timeouts,
                      agents=c.tool_agents)
    holder = Holder(moments, c.hold_all, c.ledger)
    try:
        w = Worker(conn, id=wid, concurrency=c.concurrency, poll_wait=c.poll_wait, shutdown_grace=c.shutdown_grace,
                   model_run_timeout=c.model_run_timeout, hold=holder.hold, logger=log, agents=c.agents,
                   metrics=metrics)
        tools.register(w)
    except DexError as e:
        await conn.close()
        if metrics_server is not None:
            metrics_server.close()
        return fail(str(e), 2)
    model = Model(script, ledger, wid, inline=tools.inline, stream=c.stream)
    w.model(model.run_model)
    w.compactor(model.compact)

    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for s in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(s, stop.set)
    # SIGUSR1 releases a hold (and never kills the Worker).
    loop.add_signal_handler(signal.SIGUSR1, holder.signal.set)
    if c.tls.cert:
        loop.add_signal_handler(signal.SIGHUP, reload_tls, conn, log)
    log.info("dexworker starting", extra={"fields": {"worker": wid, "addr": c.addr, "ledger": c.ledger,
                                                     "script": c.script, "hold": c.hold, "pid": os.getpid(), "agents": c.agents,
                                                     "lang": "python"}})
    try:
        await w.run(stop)
    except RegistrationError as e:
        log.error("worker stopped", extra={"fields": {"error": str(e)}})
        return 1
    finally:
        await conn.close()
        if metrics_server is not None:
            metrics_server.close()
    log.info("dexworker stopped")
    return 0


def main(argv: Optional[list] = None) -> int:
    try:
        c = parse_flags(sys.argv[1:] if argv is None else argv)
    except (FlagError, DexError) as e:
        return fail(str(e), 2)
    if c is None:
        return 0
    log = new_logger()
    try:
        moments = parse_moments(c.hold)
    except DexError as e:
        return fail(str(e), 2)
    script = None
    if c.script:
        try:
            script = load_script(c.script)
        except (OSError, ScriptError) as e:
            return fail(str(e), 2)
    try:
        ledger = Ledger(c.ledger)
    except OSError as e:
        return fail(str(e), 1)
    try:
        return asyncio.run(serve(c, script, moments, ledger, log))
    finally:
        ledger.close()


def main_exit() -> None:
    """The console script's entry point."""
    sys.exit(main())


if __name__ == "__main__":
    main_exit()
