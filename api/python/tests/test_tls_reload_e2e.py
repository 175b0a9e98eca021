"""SIGHUP reloads the demo Worker's TLS files, as dexworker's: new
connections use the new files; a reload that fails keeps the files in use
and says why. Against a real dexd with mutual TLS, restarted (same data dir
and ports) with another CA so that the Worker must connect again."""

from __future__ import annotations

import signal
import threading
import time

import pytest

import dex
from conftest import BIN, Dexd
from demo_worker import DemoWorker, Proc, client_files, install, make_pki, run_session, server_flags

pytestmark = pytest.mark.e2e  # every test here starts processes


@pytest.fixture
def pkis(tmp_path):
    if not (BIN / "dexd").exists():
        pytest.skip(f"{BIN / 'dexd'} is missing: run make build")
    a, b = make_pki(tmp_path / "pki-a"), make_pki(tmp_path / "pki-b")
    # The Worker's own copies of the files, rotated in place.
    mine = tmp_path / "worker-tls"
    mine.mkdir()
    files = dex.TLSFiles(cert=str(mine / "client.pem"), key=str(mine / "client-key.pem"), ca=str(mine / "ca.pem"))
    install(client_files(a), files)
    return a, b, files


def _dexd(tmp_path, pki, ports=None) -> Dexd:
    d = Dexd(tmp_path, server_flags(pki), ports=ports)
    try:
        d.wait_ready()
    except Exception:
        d.stop()
        raise
    return d


def _worker(d: Dexd, files: dex.TLSFiles, tmp_path) -> DemoWorker:
    return DemoWorker("--addr", d.addr, "--ledger", str(tmp_path / "ledger.jsonl"), "--id", "w-tls", "--poll-wait", "1s",
                      "--tls-cert", files.cert, "--tls-key", files.key, "--tls-ca", files.ca)


def test_sighup_makes_the_worker_connect_with_the_new_files(pkis, tmp_path):
    a, b, files = pkis
    d = _dexd(tmp_path, a)
    w = _worker(d, files, tmp_path)
    try:
        w.wait_for("registered with leader n1", 20)
        assert run_session(d.addr, "hi", tls=client_files(a)).startswith("Done:")

        # The cluster moves to CA B: the Worker, on A's files, cannot reach it.
        d.stop()
        d = _dexd(tmp_path, b, ports=d.ports)
        mark = len(w.lines)
        session_left = SessionInThread(d.addr, client_files(b))
        time.sleep(2)
        assert not session_left.answered(), "the Worker reached a cluster of another CA with its old files"

        install(client_files(b), files)
        w.signal(signal.SIGHUP)
        w.wait_for("SIGHUP: TLS files reloaded", 10, after=mark)
        assert session_left.wait(30).startswith("Done:"), "the Worker did not connect with the new files"
    finally:
        assert w.stop() == 0, w.text()
        d.stop()
    assert "reloading the TLS files failed" not in w.text()


def test_a_failed_reload_keeps_the_files_in_use_and_says_why(pkis, tmp_path):
    a, _, files = pkis
    d = _dexd(tmp_path, a)
    w = _worker(d, files, tmp_path)
    try:
        w.wait_for("registered with leader n1", 20)
        for f in (files.ca, files.cert, files.key):
            with open(f, "w") as out:
                out.write("garbage\n")
        mark = len(w.lines)
        w.signal(signal.SIGHUP)
        failed = w.wait_for("SIGHUP: reloading the TLS files failed; the current ones stay in use", 10, after=mark)
        assert "--tls-ca" in failed["error"] and "holds no PEM certificate" in failed["error"], failed

        # A new connection (the cluster restarted) still uses A's files.
        d.stop()
        d = _dexd(tmp_path, a, ports=d.ports)
        assert run_session(d.addr, "hi", tls=client_files(a)).startswith("Done:")
        assert w.p.poll() is None, "a failed reload stopped the Worker"
    finally:
        assert w.stop() == 0, w.text()
        d.stop()
    assert "SIGHUP: TLS files reloaded" not in w.text()


def test_a_half_rotated_pair_is_refused(pkis):
    a, b, files = pkis
    # B's certificate with A's key (its key not yet written): no pair.
    half = dex.TLSFiles(cert=client_files(b).cert, key=client_files(a).key, ca=client_files(b).ca)
    with pytest.raises(dex.DexError, match="not a PEM certificate and its key"):
        half.credentials()
    assert files.credentials() is not None


class SessionInThread:
    """run_session in a thread, to look at before it is answered."""

    def __init__(self, addr: str, tls: dex.TLSFiles) -> None:
        self.result: list = []
        self.t = threading.Thread(target=self._run, args=(addr, tls), daemon=True)
        self.t.start()

    def _run(self, addr: str, tls: dex.TLSFiles) -> None:
        try:
            self.result.append(run_session(addr, "hi", tls=tls, within=60))
        except BaseException as e:  # reported by wait
            self.result.append(e)

    def answered(self) -> bool:
        return bool(self.result)

    def wait(self, within: float) -> str:
        self.t.join(within)
        assert self.result, f"not answered within {within}s"
        r = self.result[0]
        if isinstance(r, BaseException):
            raise r
        return r


# A Worker of the library with no logger, run with run_forever.
PLAIN_WORKER = """
import sys
import dex

tls = dex.TLSFiles(cert=sys.argv[2], key=sys.argv[3], ca=sys.argv[4])
w = dex.Worker(sys.argv[1], id="w1", poll_wait=1.0, tls=tls)

@w.tool(access="read")
def lookup(call):
    return "found"

w.run_forever()
"""


def test_run_forever_reloads_on_sighup_and_says_how_it_went(pkis, tmp_path):
    a, b, files = pkis
    d = _dexd(tmp_path, a)
    w = Proc(["-c", PLAIN_WORKER, d.addr, files.cert, files.key, files.ca])
    try:
        w.wait_text("dex worker w1: registered with leader n1")
        mark = len(w.lines)
        install(client_files(b), files)
        w.signal(signal.SIGHUP)
        w.wait_text("dex worker w1: SIGHUP: TLS files reloaded", 10, after=mark)

        mark = len(w.lines)
        with open(files.key, "w") as out:
            out.write("garbage\n")
        w.signal(signal.SIGHUP)
        w.wait_text("dex worker w1: SIGHUP: reloading the TLS files failed; the current ones stay in use (TLS: "
                    f"--tls-cert {files.cert} / --tls-key {files.key}: not a PEM certificate and its key", 10, after=mark)
        assert w.p.poll() is None, "a failed reload stopped the Worker"
    finally:
        assert w.stop() == 0, w.text()
        d.stop()
