"""Live output with real processes (mirrors cmd/dexd's
TestLiveOutputSurvivesALeaderKill): the Python demo Worker streams a
scripted output (--stream) while the Python client watches it live; the
leader of a three-node cluster is SIGKILLed a quarter into the stream. The
watcher's text equals the committed output, every delta at the offset the
one before ended, and it is told the committed result replaced the
stream. In a cluster of three partitions, sessions of every partition
stream at once through one Worker and each watcher gets its whole output."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import grpc
import pytest

import dex
from conftest import BIN
from dex.partitions import partition_of
from dex.v1 import admin_pb2, admin_pb2_grpc, types_pb2
from test_partitions import _Cluster

PYDIR = Path(__file__).resolve().parents[1]


def _numbered_text(n: int) -> str:
    """n words that never repeat, so a gap or a repeat shows."""
    return "".join(f"w{i:04d} " for i in range(n))


class LiveText:
    """What a watch delivered of each attempt's live output, every delta
    checked to start where the one before it ended."""

    def __init__(self) -> None:
        self.text: dict[str, bytearray] = {}
        self.ended: dict[str, str] = {}
        self.errors: list[str] = []

    def add(self, ev: types_pb2.Event) -> None:
        if not ev.HasField("output"):
            return
        k = f"{ev.step_id}#{ev.output.attempt}"
        b = self.text.setdefault(k, bytearray())
        if ev.type != "output":
            self.ended[k] = ev.type
            return
        if ev.output.offset != len(b):
            self.errors.append(f"{k}: a delta at offset {ev.output.offset} after {len(b)} bytes (a gap or a repeat)")
        b += ev.output.text.encode()

    def of(self, k: str) -> tuple[str, str]:
        return bytes(self.text.get(k, b"")).decode(), self.ended.get(k, "")


def _leader(c: _Cluster, timeout: float = 60.0) -> int:
    """Waits until every node names the same leader, and it answers
    /readyz/leader 200; returns its index."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            views = set()
            for a in c.grpc:
                with grpc.insecure_channel(a) as ch:
                    views.add(admin_pb2_grpc.AdminServiceStub(ch).Status(admin_pb2.StatusRequest(), timeout=2).leader)
            if len(views) == 1 and "" not in views:
                i = int(views.pop()[1:]) - 1
                with urllib.request.urlopen(f"http://{c.http[i]}/readyz/leader", timeout=1) as r:
                    if r.status == 200:
                        return i
        except (OSError, grpc.RpcError):
            pass
        time.sleep(0.2)
    raise RuntimeError("the cluster never agreed on a leader")


async def _until(pred, what: str, limit: float = 30.0) -> None:
    deadline = time.monotonic() + limit
    last = None
    while time.monotonic() < deadline:
        last = await pred()
        if last is True:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what} ({last})")


@pytest.fixture
def cluster(tmp_path: Path):
    if not (BIN / "dexd").exists():
        pytest.skip(f"{BIN / 'dexd'} is missing: run make build")
    c = _Cluster(tmp_path, 1)
    try:
        yield c
    finally:
        c.stop()


@pytest.mark.e2e
def test_live_output_survives_a_leader_kill(cluster: _Cluster, tmp_path: Path):
    c = cluster
    leader = _leader(c)
    want = _numbered_text(400)  # 2,400 bytes: 3 s of streaming at 8 bytes every 10 ms
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"turns": [{"match": "stream", "outputs": [{"text": want}]}]}))
    target = "dex:///" + ",".join(c.grpc)
    log = open(tmp_path / "worker.log", "wb")
    worker = subprocess.Popen(
        [sys.executable, "-m", "dex.demo", "--addr", target, "--ledger", str(tmp_path / "ledger.jsonl"),
         "--script", str(script), "--stream", "--poll-wait", "2s", "--id", "py-stream"],
        stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONPATH": str(PYDIR)})
    live = LiveText()

    async def main() -> str:
        async with dex.Client(target, timeout=60.0) as cl:
            s = await cl.create_session("stream")
            step = s.id + "-s1"

            async def watch() -> None:
                async for ev in cl.watch(s.id, live_output=True):
                    live.add(ev)

            watching = asyncio.ensure_future(watch())

            async def quarter() -> object:
                got, _ = live.of(step + "#1")
                return len(got) >= len(want) // 4 or f"{len(got)} bytes"

            await _until(quarter, "a quarter of the output streamed", 30.0)
            c.procs[leader].kill()

            async def whole() -> object:
                got, end = live.of(step + "#1")
                return end == "output_ended" or f"{len(got)} bytes, end {end!r}"

            await _until(whole, "the watcher told the output is whole", 40.0)
            watching.cancel()
            try:
                await watching
            except asyncio.CancelledError:
                pass

            async def answered() -> object:
                h = (await cl.get_session(s.id)).session.history
                return bool(h) and h[-1].kind == types_pb2.HISTORY_KIND_ASSISTANT or "not yet"

            await _until(answered, "the turn's answer committed", 30.0)
            h = (await cl.get_session(s.id)).session.history
            return [e.text for e in h if e.kind == types_pb2.HISTORY_KIND_ASSISTANT][-1]

    try:
        committed = asyncio.run(main())
    finally:
        worker.terminate()
        try:
            worker.wait(10)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait()
        log.close()
    assert live.errors == []
    got, _ = next((live.of(k) for k in live.text), ("", ""))
    assert got == want, f"the watcher saw {len(got)} bytes; want the {len(want)} of the output"
    assert committed == got


@pytest.mark.e2e
def test_live_output_of_a_partitioned_cluster(tmp_path: Path):
    """Two sessions in each partition of a cluster of three stream at once
    through one Worker: its calls of each partition, carrying that
    partition's metadata, reach the partition's leader, and each watcher's
    text equals its committed output."""
    if not (BIN / "dexd").exists():
        pytest.skip(f"{BIN / 'dexd'} is missing: run make build")
    c = _Cluster(tmp_path, 3)
    try:
        c.wait_leaders_spread()
        _stream_in_every_partition(c, tmp_path)
    finally:
        c.stop()


def _stream_in_every_partition(c: _Cluster, tmp_path: Path) -> None:
    want = _numbered_text(150)  # 900 bytes: about a second of streaming
    ids: list[str] = []
    for i in range(1000):
        sid = f"live-{i}"
        if sum(partition_of(x, 3) == partition_of(sid, 3) for x in ids) < 2:
            ids.append(sid)
        if len(ids) == 6:
            break
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"turns": [{"match": "stream", "outputs": [{"text": want}]}]}))
    target = "dex:///" + ",".join(c.grpc)
    log = open(tmp_path / "worker.log", "wb")
    worker = subprocess.Popen(
        [sys.executable, "-m", "dex.demo", "--addr", target, "--ledger", str(tmp_path / "ledger.jsonl"),
         "--script", str(script), "--stream", "--poll-wait", "2s", "--id", "py-stream-p", "--concurrency", "12"],
        stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONPATH": str(PYDIR)})
    live = LiveText()

    async def main() -> dict:
        async with dex.Client(target, timeout=60.0) as cl:
            async def watch(sid: str) -> None:
                async for ev in cl.watch(sid, live_output=True):
                    live.add(ev)

            for sid in ids:
                await cl.create_session("stream", session_id=sid)
            # A watch from offset 0 gets the output the leader holds, then the rest.
            watching = [asyncio.ensure_future(watch(sid)) for sid in ids]

            async def whole() -> object:
                ends = [live.of(sid + "-s1#1")[1] for sid in ids]
                return ends.count("output_ended") == len(ids) or f"ended: {ends}"

            await _until(whole, "every watcher told its output is whole", 60.0)
            for w in watching:
                w.cancel()
            await asyncio.gather(*watching, return_exceptions=True)
            committed = {}
            for sid in ids:
                async def answered() -> object:
                    h = (await cl.get_session(sid)).session.history
                    return bool(h) and h[-1].kind == types_pb2.HISTORY_KIND_ASSISTANT or "not yet"

                await _until(answered, f"{sid}'s answer committed", 30.0)
                h = (await cl.get_session(sid)).session.history
                committed[sid] = [e.text for e in h if e.kind == types_pb2.HISTORY_KIND_ASSISTANT][-1]
            return committed

    try:
        committed = asyncio.run(main())
    finally:
        worker.terminate()
        try:
            worker.wait(10)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait()
        log.close()
    assert sorted(partition_of(sid, 3) for sid in ids) == [0, 0, 1, 1, 2, 2]
    assert live.errors == []
    for sid in ids:
        got, _ = live.of(sid + "-s1#1")
        assert got == want, f"{sid}: the watcher saw {len(got)} bytes; want the {len(want)} of the output"
        assert committed[sid] == want
