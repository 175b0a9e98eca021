"""Live model output (docs/design/streaming.md), a port of
api/client/stream.go and the live part of api/client/watch.go.

Worker side: :class:`OutputStream` is one attempt's output on its way to
the leader. A handler's ``stream(text)`` adds to it; the sender, started by
the first write, sends what the leader does not hold yet with one
AppendOutput in flight at a time, and keeps the attempt's whole output until
the attempt ends, so that a new leader can ask for it again from any offset.

Client side: :class:`LiveOffsets` is how far a watch delivered each
attempt's output, so that a watch that resumes delivers every byte once.

Offsets are byte offsets of the UTF-8 output.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Awaitable, Callable, Optional

from dex.v1 import sessions_pb2, types_pb2, workers_pb2

#: The most text one AppendOutput call carries (bytes).
MAX_APPEND = 64 << 10
#: The pause before an append that failed is tried again (seconds).
STREAM_RETRY = 0.1
#: How long a finished handler's result waits for its streamed output to
#: reach the leader (seconds).
STREAM_FLUSH = 2.0

#: Sends one AppendOutput (raises on a failed call).
AppendFn = Callable[[workers_pb2.AppendOutputRequest], Awaitable[workers_pb2.AppendOutputResponse]]


def rune_cut(b: bytes, n: int) -> int:
    """Where to cut b at most n bytes in so that no character is cut in two
    (a delta is a protobuf string: valid UTF-8)."""
    if n >= len(b):
        return len(b)
    for i in range(n, max(n - 4, 0), -1):
        if b[i] & 0xC0 != 0x80:  # the first byte of a character
            return i
    return n


class OutputStream:
    """One attempt's live output. :meth:`write` may be called from any
    thread (a sync handler runs in one); the sender runs on ``loop``."""

    def __init__(self, append: AppendFn, ref: types_pb2.AttemptRef,
                 loop: Optional[asyncio.AbstractEventLoop] = None) -> None:
        self._append = append
        self._ref = types_pb2.AttemptRef(step_id=ref.step_id, attempt=ref.attempt, token=ref.token)
        self._loop = loop or asyncio.get_running_loop()
        self._lock = threading.Lock()  # guards _text, _held, _stopped, _ended
        self._text = bytearray()  # everything streamed so far
        self._held = 0  # what the leader holds (its next offset)
        self._stopped = False  # the leader takes no more of it (or the attempt ended)
        self._ended = False  # the attempt ended: the sender is stopped for good
        self._wake = asyncio.Event()  # new text to send
        self._synced = asyncio.Event()  # _held or _stopped changed
        self._task: Optional[asyncio.Task] = None  # the sender, from the first write

    @property
    def text(self) -> bytes:
        """What was streamed so far."""
        with self._lock:
            return bytes(self._text)

    @property
    def held(self) -> int:
        """The offset the leader last said it holds up to."""
        with self._lock:
            return self._held

    def write(self, text: str) -> None:
        """Adds text to the output; the sender picks it up."""
        if not text:
            return
        with self._lock:
            if self._ended:
                return
            if not self._stopped:
                self._text += text.encode()
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self._loop:
            self._kick()
        else:
            try:
                self._loop.call_soon_threadsafe(self._kick)
            except RuntimeError:
                pass  # the loop is closed: the Worker is gone

    def _kick(self) -> None:
        """On the loop: starts the sender on the first write, wakes it."""
        if self._ended:
            return
        if self._task is None:
            self._task = self._loop.create_task(self._run())
        self._wake.set()

    async def _run(self) -> None:
        """Sends what the leader does not hold yet, one call at a time."""
        while True:
            # Cleared before reading, so a write after the read wakes us.
            self._wake.clear()
            with self._lock:
                start, stopped = self._held, self._stopped
                rest = bytes(self._text[start:start + MAX_APPEND + 4])
            chunk = rest[:rune_cut(rest, MAX_APPEND)]
            if stopped or not chunk:
                await self._wake.wait()
                continue
            req = workers_pb2.AppendOutputRequest(ref=self._ref, offset=start, text=chunk.decode())
            try:
                resp = await self._append(req)
            except asyncio.CancelledError:
                raise
            except Exception:  # a failed call (a takeover, a lost node): try again
                await asyncio.sleep(STREAM_RETRY)
                continue
            with self._lock:
                self._held = min(resp.next_offset, len(self._text))
                self._stopped = self._stopped or resp.stop
            self._synced.set()

    def _flushed(self) -> bool:
        with self._lock:
            return self._stopped or self._held >= len(self._text)

    async def finish(self, wait: float = STREAM_FLUSH) -> None:
        """Waits, up to ``wait`` seconds, until the leader holds all the
        output (or takes no more of it), then stops the sender."""
        deadline = self._loop.time() + wait
        while True:
            self._synced.clear()
            left = deadline - self._loop.time()
            if self._flushed() or left <= 0:
                break
            try:
                await asyncio.wait_for(self._synced.wait(), left)
            except asyncio.TimeoutError:
                break
        await self.stop()

    async def stop(self) -> None:
        """Ends the sender without waiting for the leader (again: nothing)."""
        with self._lock:
            self._stopped = self._ended = True
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                pass


class LiveOffsets:
    """How far a watch delivered each attempt's live output, by
    (step_id, attempt): byte offsets of the UTF-8 output."""

    def __init__(self) -> None:
        self.held: dict[tuple[str, int], int] = {}

    def request(self) -> list:
        """Where to resume each attempt's output (WatchSessionRequest.output_offsets)."""
        return [sessions_pb2.OutputOffset(step_id=step, attempt=attempt, offset=off)
                for (step, attempt), off in self.held.items()]

    def trim(self, ev: types_pb2.Event) -> Optional[types_pb2.Event]:
        """ev as it is still to be delivered: an output delta without the
        bytes already delivered (None: nothing new). Other events pass as
        they are."""
        if ev.type != "output":
            return ev
        o = ev.output
        key = (ev.step_id, o.attempt)
        held = self.held.get(key, 0)
        text = o.text.encode()
        end = o.offset + len(text)
        if end <= held:
            return None
        if o.offset < held:
            trimmed = types_pb2.Event()
            trimmed.CopyFrom(ev)
            trimmed.output.text = text[held - o.offset:].decode()
            trimmed.output.offset = held
            ev = trimmed
        self.held[key] = end
        return ev

