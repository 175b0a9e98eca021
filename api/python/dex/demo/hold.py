"""Holds: the Worker pauses at named moments until a harness releases it
(cmd/dexworker/hold.go). On a hold it writes "held MOMENT step=STEP pid=PID"
to stderr and the file <ledger>.held, then waits for SIGUSR1 or the file
<ledger>.release (which it removes). One hold at a time; each moment is held
once unless hold_all."""

from __future__ import annotations

import asyncio
import os
import sys
from typing import IO, Optional

from dex.v1 import types_pb2, workers_pb2
from dex.worker import MOMENTS


def parse_moments(s: str) -> set[str]:
    out: set[str] = set()
    for p in s.split(","):
        p = p.strip()
        if not p:
            continue
        if p not in MOMENTS:
            raise ValueError(f"unknown hold moment {p!r} (known: {', '.join(MOMENTS)})")
        out.add(p)
    return out


class Holder:
    def __init__(self, moments: set[str], hold_all: bool, ledger: str, out: Optional[IO[str]] = None) -> None:
        self.moments = moments
        self.all = hold_all
        self.held_f = ledger + ".held"
        self.rel_f = ledger + ".release"
        self.out = out or sys.stderr
        self.poll = 0.02
        self.done: set[str] = set()
        self.signal = asyncio.Event()  # set by SIGUSR1
        self._lock = asyncio.Lock()

    def _say(self, line: str) -> None:
        self.out.write(line + "\n")
        self.out.flush()

    async def hold(self, moment: str, t: workers_pb2.Task) -> None:
        if moment not in self.moments:
            return
        async with self._lock:
            if moment in self.done and not self.all:
                return
            self.done.add(moment)
            # A release left over from before this hold does not count.
            try:
                os.remove(self.rel_f)
            except FileNotFoundError:
                pass
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
            while True:
                if self.signal.is_set():
                    break
                if os.path.exists(self.rel_f):
                    try:
                        os.remove(self.rel_f)
                    except FileNotFoundError:
                        pass
                    break
                try:
                    await asyncio.wait_for(self.signal.wait(), self.poll)
                except asyncio.TimeoutError:
                    pass
            try:
                os.remove(self.held_f)
            except FileNotFoundError:
                pass
            self._say(f"released {moment} step={step} pid={pid}")
