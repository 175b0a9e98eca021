"""Live model output (docs/design/streaming.md), a port of
api/client/stream.go and the live part of api/client/watch.go.

Worker side: :class:`OutputStream` is one attempt's output on its way to
the leader; a handler's ``stream(text)`` adds to it. One
:class:`OutputSender` per partition carries the pending output of every
attempt the Worker runs there, one AppendOutputs call at a time: what is
streamed while a call is in flight goes in the next one, so the calls grow
with the Workers, not with the deltas. The Worker keeps each attempt's
whole output until the attempt ends, so that a new leader can ask for it
again from any offset.

Client side: :class:`LiveOffsets` is how far a watch delivered each
attempt's output, so that a watch that resumes delivers every byte once.

Offsets are byte offsets of the UTF-8 output.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Awaitable, Callable, Optional

from dex.v1 import sessions_pb2, types_pb2, workers_pb2

#: The most text of one attempt in one AppendOutputs call (bytes).
MAX_APPEND = 64 << 10
#: The most text of one call (bytes), and its most appends (the cluster
#: takes at most 1,024).
MAX_BATCH = 1 << 20
MAX_BATCH_APPENDS = 256
#: The pause before a call that failed is tried again (seconds).
STREAM_RETRY = 0.1
#: Bounds one call (seconds).
STREAM_CALL_TIMEOUT = 10.0
#: How long a finished handler's result waits for its streamed output to
#: reach the leader (seconds).
STREAM_FLUSH = 2.0
#: The least time between the starts of two calls when output is waiting as
#: a call returns (seconds): the next call carries what a few milliseconds
#: more brought, and the leader's sends of it to the watchers share writes.
#: An idle sender sends at once.
STREAM_SPACING = 0.010

#: Sends one AppendOutputs call (raises on a failed call).
SendFn = Callable[[workers_pb2.AppendOutputsRequest], Awaitable[workers_pb2.AppendOutputsResponse]]


def rune_cut(b: bytes, n: int) -> int:
    """Where to cut b at most n bytes in so that no character is cut in two
    (a delta is a protobuf string: valid UTF-8); 0 when the first character
    is longer than n."""
    if n >= len(b):
        return len(b)
    for i in range(n, max(n - 4, -1), -1):
        if b[i] & 0xC0 != 0x80:  # the first byte of a character
            return i
    return 0


class OutputSender:
    """Sends the live output of a Worker's attempts of one partition. Its
    task runs on ``loop`` while some attempt has output the leader does not
    hold; :meth:`OutputStream.write` may be called from any thread (a sync
    handler runs in one)."""

    def __init__(self, send: SendFn, loop: Optional[asyncio.AbstractEventLoop] = None) -> None:
        self._send = send
        self.loop = loop or asyncio.get_running_loop()
        self._lock = threading.Lock()  # guards _pending and every stream's state
        # With output the leader does not hold, in the order a call takes them.
        self._pending: dict[OutputStream, None] = {}
        self._task: Optional[asyncio.Task] = None  # the sender, while something is pending
        self.spacing = STREAM_SPACING

    def open(self, ref: types_pb2.AttemptRef) -> "OutputStream":
        """The live output of the attempt ref names (its seq is not sent)."""
        return OutputStream(self, ref)

    def _kick(self) -> None:
        """On the loop: starts the sender if it is not running."""
        if self._task is None:
            self._task = self.loop.create_task(self._run())

    async def _run(self) -> None:
        """Sends what the leader does not hold, one call at a time, until
        nothing is pending; a call that follows another at once waits until
        the spacing has passed since the other started."""
        last: Optional[float] = None
        try:
            while True:
                if last is not None:
                    with self._lock:
                        idle = not self._pending
                    wait = last + self.spacing - self.loop.time()
                    if not idle and wait > 0:
                        await asyncio.sleep(wait)
                with self._lock:
                    batch, req = self._batch()
                if not batch:
                    return
                last = self.loop.time()
                try:
                    resp = await self._send(req)
                    if len(resp.answers) != len(batch):
                        raise ValueError(f"the cluster answered {len(resp.answers)} appends of {len(batch)}")
                except asyncio.CancelledError:
                    raise
                except Exception:  # a failed or refused call (a takeover, a lost node): try again
                    await asyncio.sleep(STREAM_RETRY)
                    continue
                with self._lock:
                    for o, answer in zip(batch, resp.answers):
                        o._took(answer)
                for o in batch:
                    o._synced.set()
        finally:
            # Synchronous with the empty batch above: a write after it
            # finds no sender and starts one.
            self._task = None

    def _batch(self) -> tuple[list["OutputStream"], workers_pb2.AppendOutputsRequest]:
        """The next call: each pending attempt's output from the offset the
        leader holds, within the call's bounds. It forgets the attempts that
        stopped or are held whole, and moves those it takes to the back, so
        that a Worker with more attempts than a call carries takes turns.
        The lock is held."""
        batch: list[OutputStream] = []
        req = workers_pb2.AppendOutputsRequest()
        size = 0
        for o in list(self._pending):
            start = min(o._held, len(o._text))
            if o._stopped or start == len(o._text):
                del self._pending[o]
                continue
            if len(batch) == MAX_BATCH_APPENDS or size >= MAX_BATCH:
                break
            rest = bytes(o._text[start:start + MAX_APPEND + 4])
            chunk = rest[:rune_cut(rest, min(MAX_APPEND, MAX_BATCH - size))]
            if not chunk:  # the call has no room for its next character
                break
            batch.append(o)
            req.appends.append(workers_pb2.AppendOutputRequest(ref=o._ref, offset=start, text=chunk.decode()))
            size += len(chunk)
        for o in batch:
            del self._pending[o]
            self._pending[o] = None
        return batch, req


class OutputStream:
    """One attempt's live output, sent by its partition's sender."""

    def __init__(self, sender: OutputSender, ref: types_pb2.AttemptRef) -> None:
        self._sender = sender
        self._ref = types_pb2.AttemptRef(step_id=ref.step_id, attempt=ref.attempt, token=ref.token)
        # Guarded by the sender's lock:
        self._text = bytearray()  # everything streamed so far
        self._held = 0  # what the leader holds (its next offset)
        self._stopped = False  # the leader takes no more of it, or the attempt is over
        self._synced = asyncio.Event()  # _held or _stopped changed (set on the loop)

    @property
    def text(self) -> bytes:
        """What was streamed so far."""
        with self._sender._lock:
            return bytes(self._text)

    @property
    def held(self) -> int:
        """The offset the leader last said it holds up to."""
        with self._sender._lock:
            return self._held

    def write(self, text: str) -> None:
        """Adds text to the output for the sender to pick up; it does not
        wait. Text written once the stream stopped is dropped."""
        if not text:
            return
        s = self._sender
        with s._lock:
            if self._stopped:
                return
            self._text += text.encode()
            s._pending[self] = None
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is s.loop:
            s._kick()
        else:
            try:
                s.loop.call_soon_threadsafe(s._kick)
            except RuntimeError:
                pass  # the loop is closed: the Worker is gone

    def _took(self, answer: workers_pb2.AppendOutputResponse) -> None:
        """Applies the leader's answer to an append. The lock is held."""
        self._held = min(answer.next_offset, len(self._text))
        self._stopped = self._stopped or answer.stop
        if self._stopped or self._held == len(self._text):
            self._sender._pending.pop(self, None)

    def _flushed(self) -> bool:
        with self._sender._lock:
            return self._stopped or self._held >= len(self._text)

    async def finish(self, wait: float = STREAM_FLUSH) -> None:
        """Waits, up to ``wait`` seconds, until the leader holds all the
        output (or takes no more of it), then stops the stream."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait
        while True:
            self._synced.clear()
            left = deadline - loop.time()
            if self._flushed() or left <= 0:
                break
            try:
                await asyncio.wait_for(self._synced.wait(), left)
            except asyncio.TimeoutError:
                break
        self.stop()

    def stop(self) -> None:
        """Ends the attempt's output without waiting for the leader (again:
        nothing). A call in flight may still carry it; no later one does."""
        s = self._sender
        with s._lock:
            self._stopped = True
            s._pending.pop(self, None)
        self._synced.set()


class LiveOffsets:
    """How far a watch delivered each attempt's live output, by
    (step_id, attempt): byte offsets of the UTF-8 output; and the attempts
    whose end (output_ended or output_abandoned) it delivered. The server
    may tell a resumed watch an end again (a held attempt's end replayed,
    or an end told from the state): the repeat is dropped. An ended attempt
    keeps its offset: one missing from the request is sent again from 0."""

    def __init__(self) -> None:
        self.held: dict[tuple[str, int], int] = {}
        self.ended: set[tuple[str, int]] = set()

    def request(self) -> list:
        """Where to resume each attempt's output (WatchSessionRequest.output_offsets)."""
        return [sessions_pb2.OutputOffset(step_id=step, attempt=attempt, offset=off)
                for (step, attempt), off in self.held.items()]

    def trim(self, ev: types_pb2.Event) -> Optional[types_pb2.Event]:
        """ev as it is still to be delivered: an output delta without the
        bytes already delivered, an attempt's end the first time only
        (None: nothing new). Other events pass as they are."""
        o = ev.output
        key = (ev.step_id, o.attempt)
        if ev.type in ("output_ended", "output_abandoned"):
            if key in self.ended:
                return None
            self.ended.add(key)
            return ev
        if ev.type != "output":
            return ev
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

