"""Fixtures: a real single-node dexd on 127.0.0.1 free ports in a temp dir
(bin/dexd, or $DEX_BIN/dexd), stopped by its PID.

The two test lanes: a test that starts a process (dexd, a Worker, an example,
dexctl...) is marked e2e and runs in `make e2e` (pytest -m e2e); every other
test runs in `make test` (pytest -m "not e2e"). A test not marked e2e that
starts a process fails, saying so."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Optional

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

BIN = Path(os.environ.get("DEX_BIN") or Path(__file__).resolve().parents[3] / "bin")


@pytest.fixture(autouse=True)
def _starts_no_process_unless_e2e(request, monkeypatch):
    """Outside the e2e marker, subprocess (subprocess.run, asyncio's
    subprocesses, the dexd fixture) refuses to start a process."""
    if request.node.get_closest_marker("e2e") is None:
        def refuse(*args, **kwargs):
            pytest.fail(f"{request.node.nodeid} starts a process ({args[0] if args else kwargs.get('args')}): "
                        "mark it @pytest.mark.e2e, for make e2e", pytrace=False)
        monkeypatch.setattr(subprocess, "Popen", refuse)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Dexd:
    """A single-node dexd. ``ports`` (raft, grpc, http) and the same tmp
    start it again where an earlier one ran (a restart: the same data dir)."""

    def __init__(self, tmp: Path, extra: tuple = (), ports: Optional[tuple] = None) -> None:
        self.ports = ports or (free_port(), free_port(), free_port())
        self.raft, self.grpc, self.http = self.ports
        self.addr = f"127.0.0.1:{self.grpc}"
        self.log = open(tmp / "dexd.log", "ab")
        self.proc = subprocess.Popen(
            [str(BIN / "dexd"), "--id", "n1", "--data-dir", str(tmp / "n1"), "--raft-addr", f"127.0.0.1:{self.raft}",
             "--grpc-addr", self.addr, "--http-addr", f"127.0.0.1:{self.http}",
             "--peers", f"n1=127.0.0.1:{self.raft}", "--log-level", "warn",
             "--heartbeat-interval", "300ms", "--heartbeat-timeout", "3s", *extra],
            stdout=self.log, stderr=subprocess.STDOUT)

    def wait_ready(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"dexd exited with {self.proc.returncode}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.http}/readyz", timeout=1) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.1)
        raise RuntimeError("dexd never became ready")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


@pytest.fixture
def dexd(tmp_path: Path):
    if not (BIN / "dexd").exists():
        pytest.skip(f"{BIN / 'dexd'} is missing: run make build")
    d = Dexd(tmp_path)
    try:
        d.wait_ready()
        yield d
    finally:
        d.stop()
