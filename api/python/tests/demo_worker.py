"""Helpers of the e2e tests: the Python demo Worker as a process (its JSON
log lines collected as they come, stopped by its PID), a session run to its
end, a /metrics scrape, and certificates made with bin/dexctl."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Optional

import dex
from conftest import BIN
from dex.v1 import types_pb2

PYDIR = Path(__file__).resolve().parents[1]


class Proc:
    """A Python process of this library, its stderr collected line by line."""

    def __init__(self, argv: list) -> None:
        env = {**os.environ, "PYTHONPATH": str(PYDIR)}
        self.p = subprocess.Popen([sys.executable, *argv], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env,
                                  text=True)
        self.lines: list[str] = []
        self._t = threading.Thread(target=self._read, daemon=True)
        self._t.start()

    def _read(self) -> None:
        assert self.p.stderr is not None
        for line in self.p.stderr:
            self.lines.append(line)

    def text(self) -> str:
        return "".join(self.lines)

    def records(self, start: int = 0) -> list[dict]:
        out = []
        for line in self.lines[start:]:
            try:
                out.append(json.loads(line))
            except ValueError:
                pass
        return out

    def wait_for(self, msg: str, within: float = 20.0, after: int = 0) -> dict:
        """The first log record whose msg starts with msg among the lines
        from index after on, waiting (bounded) for it."""
        deadline = time.monotonic() + within
        while True:
            for r in self.records(after):
                if str(r.get("msg", "")).startswith(msg):
                    return r
            assert time.monotonic() < deadline, f"{msg!r} not logged within {within}s; stderr:\n{self.text()}"
            assert self.p.poll() is None, f"exited {self.p.returncode}; stderr:\n{self.text()}"
            time.sleep(0.05)

    def wait_text(self, want: str, within: float = 20.0, after: int = 0) -> None:
        """Waits (bounded) until a line from index after on holds want."""
        deadline = time.monotonic() + within
        while not any(want in line for line in self.lines[after:]):
            assert time.monotonic() < deadline, f"{want!r} not written within {within}s; stderr:\n{self.text()}"
            assert self.p.poll() is None, f"exited {self.p.returncode}; stderr:\n{self.text()}"
            time.sleep(0.05)

    def signal(self, sig: int) -> None:
        self.p.send_signal(sig)

    def stop(self) -> int:
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
            try:
                self.p.wait(15)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
        self._t.join(5)
        return self.p.returncode


class DemoWorker(Proc):
    """The demo Worker (python -m dex.demo) with these flags."""

    def __init__(self, *args: str) -> None:
        super().__init__(["-m", "dex.demo", *args])


def run_session(addr: str, text: str, *, tls: Optional[dex.TLSFiles] = None, within: float = 30.0) -> str:
    """Creates a session and waits (bounded) until a Worker answered it:
    the session's last assistant text."""

    async def main() -> str:
        async with dex.Client(addr, tls=tls, timeout=10.0) as c:
            s = await c.create_session(text)
            end = time.monotonic() + within
            while time.monotonic() < end:
                got = await c.get_session(s.id)
                h = got.session.history
                if got.session.status == types_pb2.SESSION_STATUS_IDLE and h and h[-1].kind == types_pb2.HISTORY_KIND_ASSISTANT:
                    return h[-1].text
                await asyncio.sleep(0.05)
            raise AssertionError(f"session {s.id} was not answered within {within}s")

    return asyncio.run(main())


def scrape(addr: str) -> str:
    with urllib.request.urlopen(f"http://{addr}/metrics", timeout=5) as r:
        assert r.status == 200
        return r.read().decode()


_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)$")


def sample(body: str, name: str, **labels: str) -> float:
    """The value of the sample of name with exactly these labels (0: none)."""
    want = {k: v for k, v in labels.items()}
    for line in body.splitlines():
        m = _SAMPLE.match(line)
        if not m or m.group(1) != name:
            continue
        got = dict(re.findall(r'(\w+)="([^"]*)"', m.group(2) or ""))
        if got == want:
            return float(m.group(3))
    return 0.0


def make_pki(d: Path) -> Path:
    """A new CA with a server certificate for n1 (127.0.0.1) and a client
    one for w1, made by bin/dexctl in d."""
    d.mkdir(parents=True)
    for args in (["ca", "create"], ["cert", "create", "--server", "n1", "--ip", "127.0.0.1"],
                 ["cert", "create", "--client", "w1"]):
        subprocess.run([str(BIN / "dexctl"), "tls", *args], cwd=d, check=True, capture_output=True)
    return d


def client_files(pki: Path) -> dex.TLSFiles:
    return dex.TLSFiles(cert=str(pki / "w1-client.pem"), key=str(pki / "w1-client-key.pem"), ca=str(pki / "dex-ca.pem"))


def server_flags(pki: Path) -> tuple:
    return ("--tls-cert", str(pki / "n1-server.pem"), "--tls-key", str(pki / "n1-server-key.pem"),
            "--tls-ca", str(pki / "dex-ca.pem"))


def install(src: dex.TLSFiles, dst: dex.TLSFiles) -> None:
    """Copies src's files over dst's, each replaced whole (as a rotation does)."""
    for s, d in ((src.ca, dst.ca), (src.cert, dst.cert), (src.key, dst.key)):
        shutil.copyfile(s, d + ".new")
        os.replace(d + ".new", d)
