"""Live output (docs/design/streaming.md) without a cluster: the Worker's
sender against a fake leader (resend from the offset it asks for, 0 from a
new leader; stop; one call at a time, at most 64 KiB on a character's
boundary; the result waits for the flush) and the client's live watch
(trimming repeated bytes, resuming with its offsets, a watch that fell
behind watched again)."""

from __future__ import annotations

import asyncio
import threading
from typing import Any, Optional

import grpc
import pytest

import dex
from dex.client import Client
from dex.connection import Connection
from dex.stream import MAX_APPEND, LiveOffsets, OutputStream, rune_cut
from dex.v1 import sessions_pb2, types_pb2, workers_pb2

REF = types_pb2.AttemptRef(step_id="st1", attempt=1, token="tok", seq=1)


class Failed(grpc.RpcError):
    def __init__(self, code: grpc.StatusCode) -> None:
        super().__init__(code.name)
        self._code = code

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._code.name

    def trailing_metadata(self) -> tuple:
        return ()


class FakeLeader:
    """A leader's hub for one attempt: it takes text only at the offset it
    holds up to and answers the offset it wants next."""

    def __init__(self, delay: float = 0.0) -> None:
        self.held = bytearray()
        self.calls: list[workers_pb2.AppendOutputRequest] = []
        self.delay = delay
        self.in_flight = 0
        self.most_in_flight = 0
        self.fail_next = 0  # calls to fail (UNAVAILABLE) before answering
        self.stop = False

    def new_leader(self) -> None:
        """A takeover: the new leader's hub is empty."""
        self.held = bytearray()

    async def append(self, req: workers_pb2.AppendOutputRequest) -> workers_pb2.AppendOutputResponse:
        self.calls.append(req)
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            if self.delay:
                await asyncio.sleep(self.delay)
            if self.fail_next:
                self.fail_next -= 1
                raise Failed(grpc.StatusCode.UNAVAILABLE)
            if self.stop:
                return workers_pb2.AppendOutputResponse(next_offset=len(self.held), stop=True)
            if req.offset == len(self.held):
                self.held += req.text.encode()
            return workers_pb2.AppendOutputResponse(next_offset=len(self.held))
        finally:
            self.in_flight -= 1


async def _until(cond, what: str, timeout: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not cond():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


def test_sender_sends_everything_and_names_the_attempt():
    async def main():
        leader = FakeLeader(delay=0.02)
        s = OutputStream(leader.append, REF)
        for i in range(50):
            s.write(f"w{i:04d} ")
            await asyncio.sleep(0.002)
        await s.finish(2.0)
        return leader, s

    leader, s = asyncio.run(main())
    want = "".join(f"w{i:04d} " for i in range(50)).encode()
    assert bytes(leader.held) == want == s.text
    assert leader.most_in_flight == 1  # one call in flight at a time
    assert len(leader.calls) < 50  # what accumulates meanwhile goes in the next call
    ref = leader.calls[0].ref
    assert (ref.step_id, ref.attempt, ref.token, ref.seq) == ("st1", 1, "tok", 0)


def test_sender_resends_from_zero_to_a_new_leader():
    async def main():
        leader = FakeLeader()
        s = OutputStream(leader.append, REF)
        s.write("hello ")
        await _until(lambda: s.held == 6, "the first leader holds hello")
        leader.new_leader()  # the next append is answered with offset 0
        s.write("world")
        await _until(lambda: s.held == 11, "the new leader holds it all")
        await s.stop()
        return leader

    leader = asyncio.run(main())
    assert bytes(leader.held) == b"hello world"
    offsets = [(c.offset, c.text) for c in leader.calls]
    assert offsets[0] == (0, "hello ")
    assert (6, "world") in offsets  # refused by the new leader: it wants 0
    assert offsets[-1] == (0, "hello world")  # the whole output again, from 0


def test_sender_resends_from_the_offset_the_leader_asks():
    async def main():
        leader = FakeLeader()
        s = OutputStream(leader.append, REF)
        leader.held = bytearray(b"abc")  # it holds more than the Worker thinks (a repeat answered late)
        s.write("abcdef")
        await _until(lambda: s.held == 6, "the leader holds it all")
        await s.stop()
        return leader

    leader = asyncio.run(main())
    assert [(c.offset, c.text) for c in leader.calls] == [(0, "abcdef"), (3, "def")]
    assert bytes(leader.held) == b"abcdef"


def test_sender_retries_a_failed_call():
    async def main():
        leader = FakeLeader()
        leader.fail_next = 2
        s = OutputStream(leader.append, REF)
        t0 = asyncio.get_running_loop().time()
        s.write("again")
        await _until(lambda: s.held == 5, "the leader holds it")
        took = asyncio.get_running_loop().time() - t0
        await s.stop()
        return leader, took

    leader, took = asyncio.run(main())
    assert [c.offset for c in leader.calls] == [0, 0, 0]
    assert took >= 0.18  # 100 ms after each failure


def test_sender_honours_stop():
    async def main():
        leader = FakeLeader()
        leader.stop = True
        s = OutputStream(leader.append, REF)
        s.write("over the limit")
        await _until(lambda: len(leader.calls) == 1, "the first call")
        await asyncio.sleep(0.05)
        s.write(" and more")
        await asyncio.sleep(0.1)
        t0 = asyncio.get_running_loop().time()
        await s.finish(2.0)  # the leader takes no more: nothing to wait for
        return leader, asyncio.get_running_loop().time() - t0

    leader, waited = asyncio.run(main())
    assert len(leader.calls) == 1
    assert waited < 0.5


def test_finish_gives_up_after_its_wait_and_stops_the_sender():
    async def main():
        leader = FakeLeader()
        leader.fail_next = 10**6  # the cluster never answers
        s = OutputStream(leader.append, REF)
        s.write("lost")
        t0 = asyncio.get_running_loop().time()
        await s.finish(0.3)
        waited = asyncio.get_running_loop().time() - t0
        n = len(leader.calls)
        await asyncio.sleep(0.25)
        s.write("after the end")
        await asyncio.sleep(0.05)
        return waited, n, len(leader.calls), s

    waited, n, after, s = asyncio.run(main())
    assert 0.25 <= waited < 1.0
    assert after == n  # the sender stopped with the attempt
    assert s.text == b"lost"


def test_no_sender_until_the_first_write():
    async def main():
        leader = FakeLeader()
        s = OutputStream(leader.append, REF)
        await asyncio.sleep(0.05)
        started = s._task is not None
        await s.finish(1.0)
        return leader, started

    leader, started = asyncio.run(main())
    assert not started and leader.calls == []


def test_calls_carry_at_most_64_kib_whole_characters():
    text = "é" * (MAX_APPEND // 2 + 1000) + "z" + "€" * 30000  # 2- and 3-byte characters across the cuts

    async def main():
        leader = FakeLeader()
        s = OutputStream(leader.append, REF)
        s.write(text)
        await s.finish(5.0)
        return leader

    leader = asyncio.run(main())
    assert bytes(leader.held) == text.encode()
    assert len(leader.calls) >= 3
    for c in leader.calls:
        assert 0 < len(c.text.encode()) <= MAX_APPEND


def test_rune_cut():
    b = "aé€".encode()  # 1 + 2 + 3 bytes
    assert [rune_cut(b, n) for n in range(1, 7)] == [1, 1, 3, 3, 3, 6]


def test_write_from_a_thread():
    async def main():
        leader = FakeLeader()
        s = OutputStream(leader.append, REF)
        th = threading.Thread(target=lambda: [s.write(f"{i} ") for i in range(20)])
        th.start()
        await asyncio.get_running_loop().run_in_executor(None, th.join)
        await s.finish(2.0)
        return leader

    leader = asyncio.run(main())
    assert bytes(leader.held) == "".join(f"{i} " for i in range(20)).encode()


# The Worker: a handler's stream goes out with its attempt's ref, and the
# result waits for the leader to hold it all.

class WorkerConn(Connection):
    """A connection whose AppendOutput calls reach a FakeLeader."""

    def __init__(self, leader: FakeLeader) -> None:
        super().__init__("127.0.0.1:1")
        self.leader = leader
        self.partitions: list = []

    async def unary(self, stub_cls: Any, method: str, request: Any, timeout: float, wait_for_ready: Optional[bool] = None,
                    metadata: Any = (), partition: Optional[int] = None, session: str = "") -> Any:
        assert method == "AppendOutput", method
        self.partitions.append(partition)
        return await self.leader.append(request)


def _model_task() -> workers_pb2.Task:
    t = workers_pb2.Task(session_id="s1", kind=types_pb2.STEP_KIND_RUN_MODEL, runner=workers_pb2.TASK_RUNNER_MODEL,
                         handler=workers_pb2.TASK_HANDLER_MODEL)
    t.ref.step_id, t.ref.attempt, t.ref.token = "st1", 1, "tok"
    return t


def _invoke_model(model, delay: float, partition: Optional[int] = None):
    leader = FakeLeader(delay=delay)
    conn = WorkerConn(leader)
    w = dex.Worker(conn)
    w.model(model)

    async def main():
        out = await w._invoke(_model_task(), threading.Event(), partition)
        held_at_result = bytes(leader.held)
        calls = len(leader.calls)
        await asyncio.sleep(0.1)
        return out, held_at_result, calls

    out, held, calls = asyncio.run(main())
    return out, held, calls, leader, conn


@pytest.mark.parametrize("sync", [False, True])
def test_result_waits_for_the_leader_to_hold_the_output(sync):
    words = [f"w{i:03d} " for i in range(30)]

    def stream_all(inp: dex.ModelInput) -> str:
        for w in words:
            inp.stream(w)
        return "".join(words)

    if sync:
        model = stream_all
    else:
        async def model(inp: dex.ModelInput) -> str:
            return stream_all(inp)

    # Each append takes 50 ms: the output is still on its way when the handler returns.
    out, held, calls, leader, conn = _invoke_model(model, delay=0.05, partition=2)
    assert out.complete is not None and out.complete.model_output.text == "".join(words)
    assert held == "".join(words).encode()  # all of it held before the result
    assert len(leader.calls) == calls  # and the sender stopped with the attempt
    assert set(conn.partitions) == {2}  # sent to the attempt's partition, as its heartbeats


def test_a_handler_that_does_not_stream_sends_nothing():
    out, held, calls, leader, _ = _invoke_model(lambda inp: "quiet", delay=0.0)
    assert out.complete is not None and calls == 0 and held == b""


def test_stream_without_a_worker_does_nothing():
    inp = dex.ModelInput(session_id="s", step_id="st", attempt=1, history=[], tools=[])
    inp.stream("nobody listens")  # a handler's unit test


# The client: trimming and resuming.

def _delta(step: str, attempt: int, offset: int, text: str) -> types_pb2.Event:
    return types_pb2.Event(seq=0, session_id="s1", step_id=step, type="output",
                           output=types_pb2.OutputDelta(attempt=attempt, offset=offset, text=text))


def test_trim_drops_repeats_and_keeps_the_new_bytes():
    live = LiveOffsets()
    assert live.trim(_delta("st", 1, 0, "héllo")).output.text == "héllo"  # 6 bytes
    assert live.held == {("st", 1): 6}
    assert live.trim(_delta("st", 1, 0, "héllo")) is None  # a repeat
    assert live.trim(_delta("st", 1, 3, "llo")) is None  # a repeat of a part
    ev = _delta("st", 1, 3, "llo wörld")  # resent from an older offset
    got = live.trim(ev)
    assert (got.output.offset, got.output.text) == (6, " wörld")
    assert (ev.output.offset, ev.output.text) == (3, "llo wörld")  # the event given is not changed
    assert live.held == {("st", 1): 13}
    # Another attempt counts from its own 0; other events pass as they are.
    assert live.trim(_delta("st", 2, 0, "x")).output.text == "x"
    ended = types_pb2.Event(seq=0, step_id="st", type="output_ended", output=types_pb2.OutputDelta(attempt=1))
    assert live.trim(ended) is ended
    assert sorted((o.step_id, o.attempt, o.offset) for o in live.request()) == [("st", 1, 13), ("st", 2, 1)]


class FakeCall:
    """A WatchSession stream: its events, then an error (or the end)."""

    def __init__(self, events: list, err: Optional[grpc.RpcError]) -> None:
        self.events, self.err = events, err

    def __aiter__(self):
        return self._gen()

    async def _gen(self):
        for ev in self.events:
            yield ev
        if self.err is not None:
            raise self.err
        await asyncio.sleep(3600)  # open until cancelled

    def cancel(self) -> None:
        pass


class WatchConn(Connection):
    def __init__(self, streams: list) -> None:
        super().__init__("127.0.0.1:1")
        self.streams = streams
        self.requests: list[sessions_pb2.WatchSessionRequest] = []

    async def stream(self, stub_cls: Any, method: str, request: Any, session: str = "") -> tuple:
        req = sessions_pb2.WatchSessionRequest()
        req.CopyFrom(request)
        self.requests.append(req)
        return "127.0.0.1:1", self.streams.pop(0)

    def stream_failed(self, addr: str, err: grpc.RpcError, session: str = "") -> None:
        pass


def _event(seq: int, type_: str) -> types_pb2.Event:
    return types_pb2.Event(seq=seq, session_id="s1", step_id="st", type=type_)


@pytest.mark.parametrize("code", [grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.UNAVAILABLE])
def test_live_watch_resumes_with_its_offsets(code):
    conn = WatchConn([
        FakeCall([_event(1, "step_started"), _delta("st", 1, 0, "abc"), _delta("st", 1, 3, "de")], Failed(code)),
        # The new leader sends from the watcher's offsets, and a repeat.
        FakeCall([_event(1, "step_started"), _delta("st", 1, 2, "cdefg"), _delta("st", 1, 7, "h"),
                  _event(2, "step_completed"),
                  types_pb2.Event(seq=0, step_id="st", type="output_ended", output=types_pb2.OutputDelta(attempt=1))],
                 None),
    ])

    async def main():
        got = []
        async with Client(conn) as c:
            async for ev in c.watch("s1", live_output=True):
                got.append(ev)
                if ev.type == "output_ended":
                    break
        return got

    got = asyncio.run(main())
    assert [e.seq for e in got if e.seq] == [1, 2]  # each replicated event once
    deltas = [(e.output.offset, e.output.text) for e in got if e.type == "output"]
    assert deltas == [(0, "abc"), (3, "de"), (5, "fg"), (7, "h")]  # contiguous, each byte once
    first, second = conn.requests
    assert first.live_output and list(first.output_offsets) == []
    assert second.live_output and second.after_seq == 1
    assert [(o.step_id, o.attempt, o.offset) for o in second.output_offsets] == [("st", 1, 5)]


def test_a_watch_without_live_output_ends_on_resource_exhausted():
    conn = WatchConn([FakeCall([_event(1, "step_started")], Failed(grpc.StatusCode.RESOURCE_EXHAUSTED))])

    async def main():
        got = []
        async with Client(conn) as c:
            with pytest.raises(grpc.RpcError):
                async for ev in c.watch("s1"):
                    got.append(ev)
        return got

    assert [e.seq for e in asyncio.run(main())] == [1]
    assert not conn.requests[0].live_output


# The demo Worker's --stream.

def test_demo_stream_flag_and_deltas():
    from dex.demo.flags import parse_flags
    from dex.demo.script import Model

    base = ["--addr", "127.0.0.1:1", "--ledger", "l.jsonl"]
    assert parse_flags(base).stream is False
    assert parse_flags(base + ["--stream"]).stream is True
    assert parse_flags(base + ["--stream=false"]).stream is False

    class Input:
        def __init__(self) -> None:
            self.deltas: list[str] = []

        def stream(self, text: str) -> None:
            self.deltas.append(text)

    inp = Input()
    text = "abcdefgh" + "ijklmno€xyz"  # 8 bytes, then a cut at 8 that would split the 3-byte €
    asyncio.run(Model(None, None, "w", stream=True, stream_every_ms=0).stream_text(inp, text))
    assert inp.deltas == ["abcdefgh", "ijklmno€", "xyz"]  # a delta ends on a character's end
