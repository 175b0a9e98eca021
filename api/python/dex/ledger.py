"""The execution ledger (docs/ledger.md): when $DEX_LEDGER names a file, a
Worker appends one JSON line per handler start and end, and
:func:`side_effect` one per side effect a tool reports. Each line is
fsynced before the handler starts (or the hook returns), so it survives a
SIGKILL right after it; the file is opened O_APPEND, so several Worker
processes can share it."""

from __future__ import annotations

import datetime
import json
import os
import threading
from typing import Any, Optional

from dex.errors import DexError
from dex.v1 import workers_pb2

LEDGER_ENV = "DEX_LEDGER"

# A task's handler as the ledger names it.
_HANDLERS = {
    workers_pb2.TASK_HANDLER_MODEL: "model",
    workers_pb2.TASK_HANDLER_COMPACT: "compact",
    workers_pb2.TASK_HANDLER_POLL: "poll",
    workers_pb2.TASK_HANDLER_TOOL: "tool",
}


class Ledger:
    """Appends fsynced lines to a file opened for appending."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self._lock = threading.Lock()
        self._pid = os.getpid()

    def append(self, line: dict) -> None:
        now = datetime.datetime.now(datetime.timezone.utc)
        data = json.dumps({**line, "pid": self._pid, "time": now.isoformat().replace("+00:00", "Z")},
                          separators=(",", ":")).encode() + b"\n"
        with self._lock:
            os.write(self._fd, data)
            os.fsync(self._fd)

    def close(self) -> None:
        os.close(self._fd)


def ledger_from_env() -> Optional[Ledger]:
    """Opens $DEX_LEDGER; None when it is unset. A ledger that cannot be
    opened stops the Worker from starting: an uncounted run would void the
    count."""
    path = os.environ.get(LEDGER_ENV, "")
    if not path:
        return None
    try:
        return Ledger(path)
    except OSError as e:
        raise DexError(f"{LEDGER_ENV}: open ledger {path}: {e.strerror or e}") from e


def start_line(task: Any, worker: str) -> dict:
    """The start line of a task (workers_pb2.Task)."""
    return {"session": task.session_id, "step": task.ref.step_id, "attempt": task.ref.attempt,
            "kind": _HANDLERS.get(task.handler, ""), "tool": task.tool, "call_id": task.call_id,
            "idempotency_key": task.idempotency_key, "task_id": task.task_id, "epoch": task.epoch,
            "worker": worker, "phase": "start"}


def side_effect(call: Any, name: str, key: str = "") -> None:
    """Records, in the execution ledger, that the running tool handler of
    ``call`` (a :class:`dex.ToolCall`) made the side effect ``name`` with
    the idempotency key ``key`` (the key the tool really used; "" for none).
    A tool that reports its side effects is counted by them instead of by
    its handler runs. Without a ledger it does nothing; an OSError means the
    line was not written."""
    at = getattr(call, "_ledger", None)
    if at is None:
        return
    ledger, line = at
    ledger.append({**line, "phase": "effect", "effect": name, "effect_key": key})
