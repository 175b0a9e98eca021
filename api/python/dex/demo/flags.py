"""dexworker's flags, parsed as Go's flag package reads them."""

from __future__ import annotations

import argparse
import re
from dataclasses import dataclass, field
from typing import Optional

from dex.connection import TLSFiles
from dex.demo.tools import DemoTools
from dex.worker import MAX_RUN_TIMEOUT

USAGE = """usage: dexworker-python --addr TARGET --ledger FILE [flags]

A Dex Worker (Python) with a scripted model and demo tools: lookup (read),
save_note (idempotent write), send_email (single attempt), deploy
(idempotent write, needs approval), build (long running, polled), calc
(inline). The same flags, script, holds and ledger as cmd/dexworker (see its
README.md).

Each scripted model call reports a fixed usage (100 input and 20 output
tokens, cost 150 micro-units, model "dex-demo") unless its script output
gives "usage", so that budgets (dexctl session budget) can be tried.
"""

_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_PART = re.compile(r"([0-9]*\.?[0-9]+)(ns|us|µs|ms|s|m|h)")


def parse_duration(s: str) -> float:
    """A Go duration ("200ms", "1m30s", "0") in seconds."""
    t = s.strip()
    if t in ("0", "+0", "-0"):
        return 0.0
    neg = t.startswith("-")
    t = t.lstrip("+-")
    pos, total = 0, 0.0
    while pos < len(t):
        m = _PART.match(t, pos)
        if not m:
            raise argparse.ArgumentTypeError(f"invalid duration {s!r}")
        total += float(m.group(1)) * _UNITS[m.group(2)]
        pos = m.end()
    if not t:
        raise argparse.ArgumentTypeError(f"invalid duration {s!r}")
    return -total if neg else total


@dataclass
class Config:
    addr: str = ""
    ledger: str = ""
    script: str = ""
    hold: str = ""
    hold_all: bool = False
    stream: bool = False
    id: str = ""
    token: str = ""
    metrics_addr: str = ""
    concurrency: int = 4
    poll_wait: float = 20.0
    poll_interval: float = 0.2
    shutdown_grace: float = 5.0
    model_run_timeout: float = 0.0
    tool_run_timeouts: dict = field(default_factory=dict)
    agents: list = field(default_factory=list)
    tool_agents: list = field(default_factory=list)
    tls: TLSFiles = field(default_factory=TLSFiles)


class FlagError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise FlagError(message)


def parse_run_timeouts(v: str) -> dict[str, float]:
    out: dict[str, float] = {}
    if not v:
        return out
    for part in v.split(","):
        name, sep, dur = part.strip().partition("=")
        if not sep or not name:
            raise FlagError(f"--tool-run-timeout {part!r}: want TOOL=DURATION[,TOOL=DURATION]")
        spec = DemoTools.SPECS.get(name)
        if spec is None:
            raise FlagError(f"--tool-run-timeout: no demo tool {name!r}")
        if spec[1].get("inline"):
            raise FlagError(f"--tool-run-timeout: {name!r} is inline: it runs inside the model call (see --model-run-timeout)")
        if name in out:
            raise FlagError(f"--tool-run-timeout: {name!r} given twice")
        try:
            d = parse_duration(dur)
        except argparse.ArgumentTypeError:
            d = -1
        if d < 0.001 or d > MAX_RUN_TIMEOUT:
            raise FlagError(f"--tool-run-timeout {part}: want a duration from 1ms to {MAX_RUN_TIMEOUT:.0f}s")
        out[name] = d
    return out


def split_list(v: str) -> list[str]:
    """A comma-separated flag value, blanks dropped (cmd/dexworker's splitList)."""
    return [s.strip() for s in v.split(",") if s.strip()]


def _bool(flag: str, v: str) -> bool:
    """A boolean flag's value, as Go's flag package reads it."""
    low = str(v).lower()
    if low not in ("true", "false", "1", "0", "t", "f"):
        raise FlagError(f"invalid boolean value {v!r} for {flag}")
    return low in ("true", "1", "t")


def parse_flags(argv: list[str]) -> Optional[Config]:
    """The config, or None for --help; raises FlagError on bad flags."""
    p = _Parser(prog="dexworker-python", description=USAGE, formatter_class=argparse.RawDescriptionHelpFormatter,
                allow_abbrev=False)
    p.add_argument("--addr", default="", help="cluster target: dex:///h1:p1,h2:p2,h3:p3 or host:port (required)")
    p.add_argument("--ledger", default="", help="side-effect ledger file, appended to (required)")
    p.add_argument("--script", default="", help="model script (JSON); default: the demo model")
    p.add_argument("--hold", default="", help="pause at these moments (comma separated) until released")
    p.add_argument("--hold-all", nargs="?", const="true", default="false",
                   help="hold every occurrence of a --hold moment, not only the first")
    p.add_argument("--stream", nargs="?", const="true", default="false",
                   help="stream each model output's text as live output while the call runs, 8 bytes every 10 ms, "
                   "before answering (docs/design/streaming.md)")
    p.add_argument("--id", default="", help="Worker id (default dexworker-HOST-PID)")
    p.add_argument("--token", default="", help="ACL token secret (a worker token; default $DEX_TOKEN)")
    p.add_argument("--concurrency", type=int, default=4, help="tasks run at once")
    p.add_argument("--metrics-addr", default="", help="serve the Worker's Prometheus metrics on HOST:PORT/metrics "
                   "(default: none; needs prometheus_client)")
    p.add_argument("--poll-wait", type=parse_duration, default=20.0, help="long-poll wait (default 20s)")
    p.add_argument("--poll-interval", type=parse_duration, default=0.2,
                   help="how often the cluster polls a build task (default 200ms)")
    p.add_argument("--shutdown-grace", type=parse_duration, default=5.0,
                   help="on SIGTERM/SIGINT, how long running tasks may finish (default 5s)")
    p.add_argument("--model-run-timeout", type=parse_duration, default=0.0,
                   help="how long one model call may run before the cluster cancels it (0: the cluster's --run-timeout)")
    p.add_argument("--tool-run-timeout", default="", help="TOOL=DURATION[,TOOL=DURATION]")
    p.add_argument("--agent", default="", help="NAME[,NAME]: the agents (NAME or NAME@VERSION) whose model this Worker "
                   "runs; it gets only their sessions' model Steps (default: the default agent)")
    p.add_argument("--tool-agents", default="", help="NAME[,NAME]: serve the demo tools only for these agents' sessions "
                   "(default: for every agent)")
    p.add_argument("--tls-cert", default="", help="client certificate (PEM) for a cluster with mutual TLS, with "
                   "--tls-key and --tls-ca; the three are reloaded on SIGHUP")
    p.add_argument("--tls-key", default="", help="the key of --tls-cert (PEM)")
    p.add_argument("--tls-ca", default="", help="the CA bundle (PEM) the nodes' certificates chain to")
    try:
        a = p.parse_args(argv)
    except SystemExit as e:  # --help
        if e.code == 0:
            return None
        raise
    c = Config(addr=a.addr, ledger=a.ledger, script=a.script, hold=a.hold, hold_all=_bool("--hold-all", a.hold_all),
               stream=_bool("--stream", a.stream),
               id=a.id, token=a.token, metrics_addr=a.metrics_addr, concurrency=a.concurrency, poll_wait=a.poll_wait,
               poll_interval=a.poll_interval, shutdown_grace=a.shutdown_grace, model_run_timeout=a.model_run_timeout,
               tls=TLSFiles(cert=a.tls_cert, key=a.tls_key, ca=a.tls_ca))
    c.tls.validate()
    if not c.addr or not c.ledger:
        raise FlagError("--addr and --ledger are required")
    if c.concurrency <= 0:
        raise FlagError("--concurrency must be positive")
    if c.poll_interval < 0.001:
        raise FlagError("--poll-interval must be at least 1ms")
    if c.model_run_timeout < 0 or c.model_run_timeout > MAX_RUN_TIMEOUT:
        raise FlagError(f"--model-run-timeout must be between 0 (the cluster's default) and {MAX_RUN_TIMEOUT:.0f}s")
    c.tool_run_timeouts = parse_run_timeouts(a.tool_run_timeout)
    c.agents, c.tool_agents = split_list(a.agent), split_list(a.tool_agents)
    return c
