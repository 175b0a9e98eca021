"""The side-effect ledger: one fsynced JSON line per execution, the same
fields as cmd/dexworker/ledger.go (the chaos checks read it)."""

from __future__ import annotations

import json
import os
import threading
import time
from typing import Optional


def rfc3339nano(ns: Optional[int] = None) -> str:
    """UTC time as Go's time.RFC3339Nano writes it (trailing zeros of the
    fraction dropped)."""
    ns = time.time_ns() if ns is None else ns
    secs, frac = divmod(ns, 1_000_000_000)
    base = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(secs))
    f = f"{frac:09d}".rstrip("0")
    return base + ("." + f if f else "") + "Z"


class Ledger:
    """Appends entries to a file opened O_APPEND, each with one write and an
    fsync before append returns, so a line survives a SIGKILL right after."""

    def __init__(self, path: str) -> None:
        self.path = path
        try:
            self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        except OSError as e:
            raise OSError(f"open ledger: {e}") from e
        self.pid = os.getpid()
        self._mu = threading.Lock()

    def append(self, *, session: str, tool: str, attempt: int, call_id: str = "", idempotency_key: str = "",
               step: str = "", kind: str = "", task_id: str = "", worker: str = "", epoch: int = 0,
               agent: str = "") -> None:
        e = {"session": session, "call_id": call_id, "tool": tool, "attempt": attempt,
             "idempotency_key": idempotency_key, "pid": self.pid, "time": rfc3339nano()}
        # Go's omitempty extras.
        for k, v in (("step", step), ("kind", kind), ("task_id", task_id), ("worker", worker), ("epoch", epoch),
                     ("agent", agent)):
            if v:
                e[k] = v
        line = (json.dumps(e, separators=(",", ":"), ensure_ascii=False) + "\n").encode()
        with self._mu:
            os.write(self.fd, line)
            os.fsync(self.fd)

    def close(self) -> None:
        with self._mu:
            os.close(self.fd)
