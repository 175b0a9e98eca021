"""Live output (docs/design/streaming.md) without a cluster: the client's
live watch (trimming repeated bytes and ends, resuming with its offsets, a
watch that fell behind watched again), a handler's stream without a Worker,
and the demo Worker's --stream. The Worker's sender: test_stream_sender.py."""

from __future__ import annotations

import asyncio
from typing import Any, Optional

import grpc
import pytest

import dex
from dex.client import Client
from dex.connection import Connection
from dex.stream import LiveOffsets
from dex.v1 import sessions_pb2, types_pb2


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


def _end(type_: str, attempt: int, offset: int) -> types_pb2.Event:
    return types_pb2.Event(seq=0, session_id="s1", step_id="st", type=type_,
                           output=types_pb2.OutputDelta(attempt=attempt, offset=offset))


def test_live_watch_delivers_each_end_once():
    # The server tells a resumed watch an end again (a held attempt's end
    # replayed, or an end told from the state).
    unavailable = Failed(grpc.StatusCode.UNAVAILABLE)
    conn = WatchConn([
        FakeCall([_delta("st", 1, 0, "Hello"), _end("output_ended", 1, 5), _delta("st", 2, 0, "Hi")], unavailable),
        FakeCall([_end("output_ended", 1, 5), _end("output_abandoned", 2, 2)], unavailable),
        FakeCall([_end("output_ended", 1, 5), _end("output_abandoned", 2, 2),
                  _delta("st", 3, 0, "Hey"), _end("output_ended", 3, 3)], None),
    ])

    async def main():
        got = []
        async with Client(conn) as c:
            async for ev in c.watch("s1", live_output=True):
                got.append((ev.type, ev.output.attempt, ev.output.text))
                if ev.type == "output_ended" and ev.output.attempt == 3:
                    break
        return got

    assert asyncio.run(main()) == [
        ("output", 1, "Hello"), ("output_ended", 1, ""), ("output", 2, "Hi"),
        ("output_abandoned", 2, ""), ("output", 3, "Hey"), ("output_ended", 3, ""),
    ]
    # Ended attempts stay in the request: one missing would be sent from 0.
    assert [sorted((o.step_id, o.attempt, o.offset) for o in r.output_offsets) for r in conn.requests] == [
        [], [("st", 1, 5), ("st", 2, 2)], [("st", 1, 5), ("st", 2, 2)]]


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
