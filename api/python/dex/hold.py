"""Holds: a Worker pauses at named moments until a harness releases it.

A Worker given no hold hook in code and ``$DEX_HOLD`` (moments, comma
separated) holds by files beside ``$DEX_LEDGER``: it writes the line
``MOMENT step=… session=… kind=… tool=… attempt=N pid=PID`` to
``<ledger>.held``, says ``held MOMENT step=STEP pid=PID`` on stderr, and waits
for ``<ledger>.release`` (which it removes), then says ``released …``. One
hold at a time; each moment is held once per process unless
``$DEX_HOLD_ALL=1``. The demo Worker's ``--hold`` is the same holder.
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import IO, Optional

from dex.errors import DexError
from dex.v1 import types_pb2, workers_pb2

HOLD_ENV = "DEX_HOLD"
HOLD_ALL_ENV = "DEX_HOLD_ALL"

# Moments at which a Worker's hold hook is called.
HOLD_BEFORE_CLAIM = "before-claim"  # holds a task, not claimed yet
HOLD_AFTER_CLAIM = "after-claim"  # claim committed; no handler started
HOLD_TOOL_RUNNING = "tool-running"  # right before a tool handler
HOLD_BEFORE_RESULT = "before-result"  # handler returned, ledger end line written; result not sent
HOLD_AFTER_RESULT_SENT = "after-result-sent"  # ReportTask of a result returned OK
HOLD_DURING_POLL = "during-poll"  # right before a poll handler
HOLD_DURING_COMPACTION = "during-compaction"  # right before the compaction handler
HOLD_BEFORE_MODEL = "before-model"  # right before the model handler
MOMENTS = (HOLD_BEFORE_CLAIM, HOLD_AFTER_CLAIM, HOLD_TOOL_RUNNING, HOLD_BEFORE_RESULT, HOLD_AFTER_RESULT_SENT,
           HOLD_DURING_POLL, HOLD_DURING_COMPACTION, HOLD_BEFORE_MODEL)


def parse_moments(s: str) -> set[str]:
    """The moments of a comma-separated list; DexError for an unknown one."""
    out: set[str] = set()
    for p in s.split(","):
        p = p.strip()
        if not p:
            continue
        if p not in MOMENTS:
            raise DexError(f"unknown hold moment {p!r} (known: {', '.join(MOMENTS)})")
        out.add(p)
    return out


class Holder:
    """Holds at ``moments`` by the files ``<ledger>.held`` and
    ``<ledger>.release``; its :meth:`hold` is a Worker's hold hook. Setting
    ``signal`` releases a hold too (the demo Worker's SIGUSR1)."""

    def __init__(self, moments: set[str], hold_all: bool, ledger: str, out: Optional[IO[str]] = None) -> None:
        self.moments = moments
        self.all = hold_all
        self.held_f = ledger + ".held"
        self.rel_f = ledger + ".release"
        self.out = out  # None: stderr
        self.poll = 0.02
        self.done: set[str] = set()
        self.signal = asyncio.Event()
        self._lock = asyncio.Lock()

    def _say(self, line: str) -> None:
        out = self.out or sys.stderr
        out.write(line + "\n")
        out.flush()

    async def hold(self, moment: str, t: workers_pb2.Task) -> None:
        if moment not in self.moments:
            return
        async with self._lock:
            if moment in self.done and not self.all:
                return
            self.done.add(moment)
            # A release left over from before this hold does not count.
            _remove(self.rel_f)
            self.signal.clear()
            step = t.ref.step_id
            pid = os.getpid()
            desc = (f"{moment} step={step} session={t.session_id} kind={types_pb2.StepKind.Name(t.kind)} "
                    f"tool={t.tool} attempt={t.ref.attempt} pid={pid}")
            try:
                with open(self.held_f, "w") as f:
                    f.write(desc + "\n")
            except OSError as e:
                self._say(f"hold: {e}")
            self._say(f"held {moment} step={step} pid={pid}")
            while not self.signal.is_set():
                if os.path.exists(self.rel_f):
                    _remove(self.rel_f)
                    break
                try:
                    await asyncio.wait_for(self.signal.wait(), self.poll)
                except asyncio.TimeoutError:
                    pass
            _remove(self.held_f)
            self._say(f"released {moment} step={step} pid={pid}")


def _remove(path: str) -> None:
    try:
        os.remove(path)
    except FileNotFoundError:
        pass


def holder_from_env(ledger: str) -> Optional[Holder]:
    """The holder $DEX_HOLD asks for (None when it names no moment).
    ``ledger`` is $DEX_LEDGER's path ("" when unset). DexError naming
    DEX_HOLD for an unknown moment or a hold without a ledger."""
    spec = os.environ.get(HOLD_ENV, "")
    try:
        moments = parse_moments(spec)
    except DexError as e:
        raise DexError(f"{HOLD_ENV}: {e}") from None
    if not moments:
        return None
    if not ledger:
        raise DexError(f"{HOLD_ENV}={spec}: holds need DEX_LEDGER (the hold files are written beside it)")
    return Holder(moments, os.environ.get(HOLD_ALL_ENV, "") == "1", ledger)
