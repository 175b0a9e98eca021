"""What a person starting a Worker sees: why it cannot register (repeated,
spaced out), where it registered, and that a Worker stopped with SIGTERM
leaves the Worker list at once. Workers run as real processes, stopped by
their PID."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import grpc
import pytest

from conftest import free_port
from dex.v1 import admin_pb2, admin_pb2_grpc

pytestmark = pytest.mark.e2e  # every test here starts processes

PYDIR = Path(__file__).resolve().parents[1]

# A Worker with no logger, as a user's first script would be.
PLAIN_WORKER = """
import sys
import dex

w = dex.Worker(sys.argv[1], id="w1", poll_wait=1.0)

@w.tool(access="read")
def lookup(call):
    return "found"

w.run_forever()
"""


class Proc:
    """A process whose stderr is collected as it comes."""

    def __init__(self, args: list) -> None:
        env = {**os.environ, "PYTHONPATH": str(PYDIR)}
        self.p = subprocess.Popen(args, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, env=env, text=True)
        self.lines: list[str] = []
        self.t = threading.Thread(target=self._read, daemon=True)
        self.t.start()

    def _read(self) -> None:
        for line in self.p.stderr:
            self.lines.append(line)

    def text(self) -> str:
        return "".join(self.lines)

    def wait_count(self, want: str, n: int, within: float) -> None:
        deadline = time.monotonic() + within
        while self.text().count(want) < n:
            assert time.monotonic() < deadline, f"{want!r} not seen {n} times within {within}s; stderr:\n{self.text()}"
            assert self.p.poll() is None, f"exited {self.p.returncode}; stderr:\n{self.text()}"
            time.sleep(0.05)

    def stop(self, timeout: float = 15.0) -> float:
        """SIGTERM; returns how long the process took to exit."""
        start = time.monotonic()
        self.p.send_signal(signal.SIGTERM)
        try:
            self.p.wait(timeout)
        finally:
            if self.p.poll() is None:
                self.p.kill()
                self.p.wait()
        self.t.join(5)
        return time.monotonic() - start


def plain_worker(target: str) -> Proc:
    return Proc([sys.executable, "-c", PLAIN_WORKER, target])


def closed_addr() -> str:
    return f"127.0.0.1:{free_port()}"  # the port was bound and closed: nothing listens


def test_worker_with_no_logger_says_why_it_cannot_register_and_repeats_it():
    addr = closed_addr()
    w = plain_worker(addr)
    try:
        want = f"dex worker w1: cannot register with {addr}: Connection refused; retrying"
        w.wait_count(want, 1, 10)
        w.wait_count(want, 2, 20)
    finally:
        w.stop()
    print(w.text())
    assert w.p.returncode == 0
    assert "deregister" not in w.text(), "a Worker that never registered has nothing to deregister"


def test_demo_worker_says_why_it_cannot_register(tmp_path):
    addr = closed_addr()
    w = Proc([sys.executable, "-m", "dex.demo", "--addr", addr, "--ledger", str(tmp_path / "ledger.jsonl"), "--id", "w1"])
    try:
        w.wait_count(f"cannot register with {addr}: Connection refused; retrying", 1, 10)
    finally:
        w.stop()
    assert '"msg": "cannot register with' in w.text() or '"msg":"cannot register with' in w.text(), w.text()


def _listed(addr: str, worker_id: str) -> bool:
    with grpc.insecure_channel(addr) as ch:
        resp = admin_pb2_grpc.AdminServiceStub(ch).ListWorkers(admin_pb2.ListWorkersRequest(), timeout=10)
    return any(ws.worker.id == worker_id for ws in resp.workers)


def test_worker_says_its_leader_and_leaves_the_worker_list_on_sigterm(dexd):
    w = plain_worker(dexd.addr)
    try:
        w.wait_count(f"dex worker w1: registered with leader n1 at {dexd.addr}\n", 1, 20)
        assert _listed(dexd.addr, "w1")
    finally:
        took = w.stop()
    print(f"the Worker exited {took:.2f}s after SIGTERM")
    assert w.p.returncode == 0, w.text()
    assert "dex worker w1: deregistered" in w.text()
    assert not _listed(dexd.addr, "w1"), "a Worker stopped with SIGTERM is still listed (its TTL is a minute)"


def test_worker_says_when_it_cannot_deregister(dexd):
    w = plain_worker(dexd.addr)
    try:
        w.wait_count("registered with leader n1", 1, 20)
    finally:
        dexd.stop()  # the cluster goes first
        w.stop()
    assert f"dex worker w1: could not deregister from {dexd.addr}" in w.text(), w.text()
    assert "the cluster drops the Worker after its TTL" in w.text()
