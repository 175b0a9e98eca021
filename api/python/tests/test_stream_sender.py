"""The Worker's live output sender (docs/design/streaming.md) against a fake
leader, without a cluster: one AppendOutputs call at a time per partition,
what attempts stream while it is in flight going whole in the next one; a
resend from the offset the leader asks (0 from a new leader); stop; failed
and refused calls tried again without losing or repeating text; the call's
bounds; and inside a Worker, the calls' partition and a result that waits
for the flush."""

from __future__ import annotations

import asyncio
import threading
from typing import Any, Optional

import grpc
import pytest

import dex
from dex.connection import PARTITION_METADATA_KEY, Connection
from dex.stream import MAX_APPEND, MAX_BATCH, MAX_BATCH_APPENDS, OutputSender, rune_cut
from dex.v1 import types_pb2, workers_pb2


def ref(step: str) -> types_pb2.AttemptRef:
    return types_pb2.AttemptRef(step_id=step, attempt=1, token="tok", seq=1)


class Failed(grpc.RpcError):
    def __init__(self, code: grpc.StatusCode, details: str = "") -> None:
        super().__init__(code.name)
        self._code, self._details = code, details or code.name

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._details

    def trailing_metadata(self) -> tuple:
        return ()


class FakeLeader:
    """A leader's AppendOutputs: for each attempt (by Step) it takes text
    only at the offset it holds up to and answers the offset it wants next,
    and it refuses a malformed call whole, as the cluster does. It can hold
    calls at a gate, fail the next calls before taking anything, refuse them,
    or take a call and lose its answer."""

    def __init__(self, delay: float = 0.0) -> None:
        self.held: dict[str, bytearray] = {}
        self.calls: list[workers_pb2.AppendOutputsRequest] = []
        self.malformed: list[str] = []
        self.delay = delay
        self.in_flight = 0
        self.most_in_flight = 0
        self.fail_next = 0  # calls failed UNAVAILABLE before taking anything
        self.refuse_next = 0  # calls refused INVALID_ARGUMENT, nothing taken
        self.lose_answers = 0  # calls taken whose answer is lost (UNAVAILABLE)
        self.stop: set[str] = set()  # Steps answered stop
        self.gate: Optional[asyncio.Event] = None  # when set, a call waits for it
        self.entered = asyncio.Event()  # a call came in

    def new_leader(self) -> None:
        """A takeover: the new leader's hub is empty."""
        self.held = {}

    def text(self, step: str) -> bytes:
        return bytes(self.held.get(step, b""))

    def appends_of(self, step: str) -> list[tuple[int, str]]:
        return [(a.offset, a.text) for c in self.calls for a in c.appends if a.ref.step_id == step]

    def _check(self, req: workers_pb2.AppendOutputsRequest) -> str:
        if not 1 <= len(req.appends) <= 1024:
            return f"{len(req.appends)} appends"
        seen = set()
        for a in req.appends:
            k = (a.ref.step_id, a.ref.attempt)
            if not a.ref.step_id or not a.ref.attempt or not a.ref.token:
                return "an append without its attempt"
            if k in seen:
                return f"attempt {k} twice"
            seen.add(k)
            if len(a.text.encode()) > MAX_APPEND:
                return f"{len(a.text.encode())} bytes for {k}"
        if sum(len(a.text.encode()) for a in req.appends) > MAX_BATCH:
            return "over 1 MiB"
        return ""

    async def append_outputs(self, req: workers_pb2.AppendOutputsRequest) -> workers_pb2.AppendOutputsResponse:
        copy = workers_pb2.AppendOutputsRequest()
        copy.CopyFrom(req)
        self.calls.append(copy)
        self.entered.set()
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            if self.gate is not None:
                await self.gate.wait()
            if self.delay:
                await asyncio.sleep(self.delay)
            why = self._check(req)
            if why:
                self.malformed.append(why)
                raise Failed(grpc.StatusCode.INVALID_ARGUMENT, why)
            if self.fail_next:
                self.fail_next -= 1
                raise Failed(grpc.StatusCode.UNAVAILABLE)
            if self.refuse_next:
                self.refuse_next -= 1
                raise Failed(grpc.StatusCode.INVALID_ARGUMENT)
            resp = workers_pb2.AppendOutputsResponse()
            for a in req.appends:
                held = self.held.setdefault(a.ref.step_id, bytearray())
                if a.ref.step_id in self.stop:
                    resp.answers.add(next_offset=len(held), stop=True)
                    continue
                if a.offset == len(held):
                    held += a.text.encode()
                resp.answers.add(next_offset=len(held))
            if self.lose_answers:
                self.lose_answers -= 1
                raise Failed(grpc.StatusCode.UNAVAILABLE)
            return resp
        finally:
            self.in_flight -= 1


async def _until(cond, what: str, timeout: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not cond():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


def _release(leader: FakeLeader) -> None:
    gate, leader.gate = leader.gate, None
    assert gate is not None
    gate.set()


def test_an_idle_sender_sends_at_once_and_names_the_attempt():
    async def main():
        leader = FakeLeader(delay=0.02)
        s = OutputSender(leader.append_outputs).open(ref("st1"))
        for i in range(50):
            s.write(f"w{i:04d} ")
            await asyncio.sleep(0.002)
        await s.finish(2.0)
        return leader, s

    leader, s = asyncio.run(main())
    want = "".join(f"w{i:04d} " for i in range(50)).encode()
    assert leader.text("st1") == want == s.text
    assert leader.most_in_flight == 1  # one call in flight at a time
    assert len(leader.calls) < 50  # what accumulates meanwhile goes in the next call
    assert leader.calls[0].appends[0].text == "w0000 "  # the first delta went alone, at once
    r = leader.calls[0].appends[0].ref
    assert (r.step_id, r.attempt, r.token, r.seq) == ("st1", 1, "tok", 0)


def test_what_attempts_stream_during_a_call_goes_whole_in_the_next():
    async def main():
        leader = FakeLeader()
        sender = OutputSender(leader.append_outputs)
        a, b, c = sender.open(ref("a")), sender.open(ref("b")), sender.open(ref("c"))
        leader.gate = asyncio.Event()
        a.write("Hel")
        await asyncio.wait_for(leader.entered.wait(), 5)  # the first call is in flight, held by the gate
        a.write("lo")
        b.write("Bon")
        b.write("jour")
        c.write("Hi")
        await asyncio.sleep(0.05)
        _release(leader)
        for o in (a, b, c):
            await o.finish(5.0)
        return leader

    leader = asyncio.run(main())
    assert [leader.text(k) for k in "abc"] == [b"Hello", b"Bonjour", b"Hi"]
    assert leader.most_in_flight == 1
    assert len(leader.calls) == 2, [list(c.appends) for c in leader.calls]  # the first delta, then one call for the rest
    second = sorted((a.ref.step_id, a.offset, a.text) for a in leader.calls[1].appends)
    assert second == [("a", 3, "lo"), ("b", 0, "Bonjour"), ("c", 0, "Hi")]
    assert leader.malformed == []


def test_a_new_leader_answering_offset_0_gets_the_whole_output_again():
    async def main():
        leader = FakeLeader()
        sender = OutputSender(leader.append_outputs)
        a, b = sender.open(ref("a")), sender.open(ref("b"))
        a.write("hello ")
        b.write("bonjour ")
        await _until(lambda: a.held == 6 and b.held == 8, "the first leader holds both")
        leader.new_leader()  # the next appends are answered with offset 0
        a.write("world")
        b.write("monde")
        await a.finish(5.0)
        await b.finish(5.0)
        return leader

    leader = asyncio.run(main())
    assert (leader.text("a"), leader.text("b")) == (b"hello world", b"bonjour monde")
    assert leader.appends_of("a")[-1] == (0, "hello world")  # the whole output again, from 0
    assert leader.appends_of("b")[-1] == (0, "bonjour monde")
    assert (6, "world") in leader.appends_of("a")  # refused by the new leader: it wants 0


def test_the_sender_resends_from_the_offset_the_leader_asks():
    async def main():
        leader = FakeLeader()
        leader.held["st1"] = bytearray(b"abc")  # it holds more than the Worker thinks (a repeat answered late)
        s = OutputSender(leader.append_outputs).open(ref("st1"))
        s.write("abcdef")
        await s.finish(5.0)
        return leader

    leader = asyncio.run(main())
    assert leader.appends_of("st1") == [(0, "abcdef"), (3, "def")]
    assert leader.text("st1") == b"abcdef"


@pytest.mark.parametrize("how", ["fail_next", "refuse_next", "lose_answers"])
def test_a_failed_or_refused_call_is_tried_again_without_losing_or_repeating_text(how):
    async def main():
        leader = FakeLeader()
        sender = OutputSender(leader.append_outputs)
        a, b = sender.open(ref("a")), sender.open(ref("b"))
        setattr(leader, how, 2)
        leader.gate = asyncio.Event()
        t0 = asyncio.get_running_loop().time()
        a.write("one ")
        await asyncio.wait_for(leader.entered.wait(), 5)
        b.write("uno ")  # streamed while the failing call is in flight
        _release(leader)
        await asyncio.sleep(0.05)
        a.write("two ")  # and between the tries
        b.write("dos ")
        await a.finish(5.0)
        await b.finish(5.0)
        return leader, asyncio.get_running_loop().time() - t0

    leader, took = asyncio.run(main())
    assert (leader.text("a"), leader.text("b")) == (b"one two ", b"uno dos ")  # each byte once, in order
    assert took >= 0.18  # 100 ms after each failure
    assert len(leader.calls) >= 3
    assert leader.most_in_flight == 1


def test_an_attempt_the_leader_stops_is_not_sent_again():
    async def main():
        leader = FakeLeader()
        leader.stop.add("a")
        sender = OutputSender(leader.append_outputs)
        a, b = sender.open(ref("a")), sender.open(ref("b"))
        a.write("over the limit")
        await _until(lambda: len(leader.calls) == 1 and sender._task is None, "the leader's stop applied")
        a.write(" and more")
        b.write("other")
        t0 = asyncio.get_running_loop().time()
        await a.finish(2.0)  # the leader takes no more: nothing to wait for
        waited = asyncio.get_running_loop().time() - t0
        await b.finish(2.0)
        return leader, waited, a

    leader, waited, a = asyncio.run(main())
    assert leader.appends_of("a") == [(0, "over the limit")]
    assert leader.text("b") == b"other"
    assert waited < 0.5
    assert a.text == b"over the limit"  # text after the stop is dropped


def test_an_attempt_the_worker_stopped_is_not_sent_again():
    async def main():
        leader = FakeLeader()
        sender = OutputSender(leader.append_outputs)
        a, b = sender.open(ref("a")), sender.open(ref("b"))
        leader.gate = asyncio.Event()
        a.write("first")
        await asyncio.wait_for(leader.entered.wait(), 5)
        a.write(" never sent")  # pending when the attempt ends
        a.stop()
        a.write(" nor this")
        b.write("b goes on")
        _release(leader)
        await b.finish(5.0)
        c = sender.open(ref("c"))
        c.write("later")
        await c.finish(5.0)
        return leader

    leader = asyncio.run(main())
    assert leader.appends_of("a") == [(0, "first")]  # only the call in flight when it stopped
    assert leader.text("b") == b"b goes on" and leader.text("c") == b"later"


def test_finish_gives_up_after_its_wait_and_the_sender_stops():
    async def main():
        leader = FakeLeader()
        leader.fail_next = 10**6  # the cluster never answers
        sender = OutputSender(leader.append_outputs)
        s = sender.open(ref("st1"))
        s.write("lost")
        t0 = asyncio.get_running_loop().time()
        await s.finish(0.3)
        waited = asyncio.get_running_loop().time() - t0
        await _until(lambda: sender._task is None, "the sender to stop")
        n = len(leader.calls)
        await asyncio.sleep(0.25)
        s.write("after the end")
        await asyncio.sleep(0.05)
        return waited, n, len(leader.calls), s, sender

    waited, n, after, s, sender = asyncio.run(main())
    assert 0.25 <= waited < 1.0
    assert after == n  # nothing is sent for an attempt that ended
    assert s.text == b"lost"
    assert sender._task is None


def test_no_call_until_the_first_write():
    async def main():
        leader = FakeLeader()
        sender = OutputSender(leader.append_outputs)
        s = sender.open(ref("st1"))
        await asyncio.sleep(0.05)
        started = sender._task is not None
        await s.finish(1.0)
        return leader, started

    leader, started = asyncio.run(main())
    assert not started and leader.calls == []


def test_an_append_carries_at_most_64_kib_of_whole_characters():
    text = "é" * (MAX_APPEND // 2 + 1000) + "z" + "€" * 30000  # 2- and 3-byte characters across the cuts

    async def main():
        leader = FakeLeader()
        s = OutputSender(leader.append_outputs).open(ref("st1"))
        s.write(text)
        await s.finish(5.0)
        return leader

    leader = asyncio.run(main())
    assert leader.text("st1") == text.encode()
    assert len(leader.calls) >= 3
    for _, t in leader.appends_of("st1"):
        assert 0 < len(t.encode()) <= MAX_APPEND


def test_a_call_carries_at_most_1_mib_and_256_attempts_then_the_rest_take_their_turn():
    # 15 attempts of 64 KiB and one of 64 KiB - 2 leave 2 bytes of the
    # call's 1 MiB: too few for the next attempt's first character.
    big = [("x" * MAX_APPEND) for _ in range(15)] + ["y" * (MAX_APPEND - 2), "€" * 10]
    many = [f"m{i} " for i in range(300)]

    async def main():
        leader = FakeLeader()
        sender = OutputSender(leader.append_outputs)
        leader.gate = asyncio.Event()
        first = sender.open(ref("first"))
        first.write("go")
        await asyncio.wait_for(leader.entered.wait(), 5)
        streams = [(sender.open(ref(f"big{i}")), t) for i, t in enumerate(big)]
        streams += [(sender.open(ref(f"many{i}")), t) for i, t in enumerate(many)]
        for s, t in streams:
            s.write(t)
        _release(leader)
        await asyncio.gather(*(s.finish(5.0) for s, _ in streams))
        return leader

    leader = asyncio.run(main())
    assert leader.malformed == []
    for i, t in enumerate(big):
        assert leader.text(f"big{i}") == t.encode()
    for i, t in enumerate(many):
        assert leader.text(f"many{i}") == t.encode()
    second = leader.calls[1]
    assert [a.ref.step_id for a in second.appends] == [f"big{i}" for i in range(16)]  # 1 MiB less 2 bytes
    assert sum(len(a.text.encode()) for a in second.appends) == MAX_BATCH - 2
    assert max(len(c.appends) for c in leader.calls) == MAX_BATCH_APPENDS


def test_rune_cut():
    b = "aé€".encode()  # 1 + 2 + 3 bytes
    assert [rune_cut(b, n) for n in range(1, 7)] == [1, 1, 3, 3, 3, 6]
    assert [rune_cut("€€".encode(), n) for n in range(0, 5)] == [0, 0, 0, 3, 3]  # never inside a character


def test_write_from_a_thread():
    async def main():
        leader = FakeLeader()
        s = OutputSender(leader.append_outputs).open(ref("st1"))
        th = threading.Thread(target=lambda: [s.write(f"{i} ") for i in range(20)])
        th.start()
        await asyncio.get_running_loop().run_in_executor(None, th.join)
        await s.finish(2.0)
        return leader

    leader = asyncio.run(main())
    assert leader.text("st1") == "".join(f"{i} " for i in range(20)).encode()


# The Worker: a handler's stream goes out with its attempt's ref, in the
# call of the partition the task was polled from, and the result waits for
# the leader to hold it all.

class WorkerConn(Connection):
    """A connection whose AppendOutputs calls reach a FakeLeader; it keeps
    each call's partition and metadata."""

    def __init__(self, leader: FakeLeader) -> None:
        super().__init__("127.0.0.1:1")
        self.leader = leader
        self.sent: list[tuple[Optional[int], tuple, list[str]]] = []  # partition, metadata, Steps

    async def unary(self, stub_cls: Any, method: str, request: Any, timeout: float, wait_for_ready: Optional[bool] = None,
                    metadata: Any = (), partition: Optional[int] = None, session: str = "") -> Any:
        assert method == "AppendOutputs", method
        self.sent.append((partition, tuple(metadata), [a.ref.step_id for a in request.appends]))
        return await self.leader.append_outputs(request)


def _model_task(step: str = "st1") -> workers_pb2.Task:
    t = workers_pb2.Task(session_id="s1", kind=types_pb2.STEP_KIND_RUN_MODEL, runner=workers_pb2.TASK_RUNNER_MODEL,
                         handler=workers_pb2.TASK_HANDLER_MODEL)
    t.ref.step_id, t.ref.attempt, t.ref.token = step, 1, "tok"
    return t


def _invoke_model(model, delay: float, partition: Optional[int] = None):
    leader = FakeLeader(delay=delay)
    conn = WorkerConn(leader)
    w = dex.Worker(conn)
    w.model(model)

    async def main():
        out = await w._invoke(_model_task(), threading.Event(), partition)
        held_at_result = leader.text("st1")
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

    # Each call takes 50 ms: the output is still on its way when the handler returns.
    out, held, calls, leader, conn = _invoke_model(model, delay=0.05, partition=2)
    assert out.complete is not None and out.complete.model_output.text == "".join(words)
    assert held == "".join(words).encode()  # all of it held before the result
    assert len(leader.calls) == calls  # and nothing sent after the attempt
    assert {(p, md) for p, md, _ in conn.sent} == {(2, ((PARTITION_METADATA_KEY, "2"),))}  # routed as its poll


def test_a_cluster_of_one_partition_gets_no_partition_metadata():
    out, held, _, _, conn = _invoke_model(lambda inp: inp.stream("hi") or "hi", delay=0.0)
    assert out.complete is not None and held == b"hi"
    assert {(p, md) for p, md, _ in conn.sent} == {(None, ())}


def test_a_handler_that_does_not_stream_sends_nothing():
    out, held, calls, leader, _ = _invoke_model(lambda inp: "quiet", delay=0.0)
    assert out.complete is not None and calls == 0 and held == b""


def test_the_attempts_of_a_partition_share_its_calls():
    """Three attempts of partition 2 stream while a call is in flight: the
    next call carries the three of them; partition 3's attempt goes in calls
    of its own, with its own metadata."""
    leader = FakeLeader()
    conn = WorkerConn(leader)
    w = dex.Worker(conn)
    first_call = asyncio.Event()

    @w.model
    async def model(inp: dex.ModelInput) -> str:
        if inp.step_id != "a":
            await first_call.wait()
        inp.stream(inp.step_id + " says hi")
        return inp.step_id + " says hi"

    async def main():
        leader.gate = asyncio.Event()
        runs = [asyncio.ensure_future(w._invoke(_model_task(step), threading.Event(), 2)) for step in "abcd"]
        await asyncio.wait_for(leader.entered.wait(), 5)  # a's first call is in flight
        first_call.set()
        await asyncio.sleep(0.05)  # b, c and d have streamed
        _release(leader)
        outs = await asyncio.gather(*runs)
        d = await w._invoke(_model_task("e"), threading.Event(), 3)
        return outs + [d]

    outs = asyncio.run(main())
    assert all(o.complete is not None for o in outs)
    for s in "abcde":
        assert leader.text(s) == f"{s} says hi".encode()
    p2 = [(steps, md) for p, md, steps in conn.sent if p == 2]
    assert p2[0] == (["a"], ((PARTITION_METADATA_KEY, "2"),))
    assert sorted(p2[1][0]) == ["b", "c", "d"] and len(p2) == 2  # one call for the three
    assert [(p, md, steps) for p, md, steps in conn.sent if p != 2] == [(3, ((PARTITION_METADATA_KEY, "3"),), ["e"])]


def test_calls_are_spaced_only_while_output_waits():
    """Output waiting as a call returns goes in a call that starts no sooner
    than the spacing after the one before; output that comes to an idle
    sender goes at once."""

    async def main():
        leader = FakeLeader()
        sender = OutputSender(leader.append_outputs)
        sender.spacing = 0.3
        o = sender.open(ref("st1"))
        starts: list[float] = []
        send = leader.append_outputs

        async def timed(req):
            starts.append(asyncio.get_running_loop().time())
            return await send(req)

        sender._send = timed
        leader.gate = asyncio.Event()
        o.write("a")
        await asyncio.wait_for(leader.entered.wait(), 5)
        o.write("b")  # waits as the first call returns
        _release(leader)
        await _until(lambda: leader.text("st1") == b"ab", "ab")
        gap = starts[1] - starts[0]
        await _until(lambda: sender._task is None, "the sender to go idle")
        sender.spacing = 3600.0  # an idle sender does not wait it out
        o.write("c")
        await o.finish(5.0)
        return leader, gap

    leader, gap = asyncio.run(main())
    assert gap >= 0.3, f"the second call started {gap:.3f} s after the first"
    assert leader.text("st1") == b"abc"
