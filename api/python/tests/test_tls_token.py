"""Mutual TLS and an ACL token against a real dexd."""

from __future__ import annotations

import asyncio
import subprocess

import grpc
import pytest

import dex
from dex.v1 import types_pb2
from conftest import BIN, Dexd

pytestmark = pytest.mark.e2e  # every test here starts processes

SECRET = "python-worker-test-secret"


@pytest.fixture
def secure_dexd(tmp_path):
    if not (BIN / "dexd").exists():
        pytest.skip("bin/dexd is missing: run make build")
    pki = tmp_path / "pki"
    pki.mkdir()
    for args in (["ca", "create"], ["cert", "create", "--server", "n1", "--ip", "127.0.0.1"],
                 ["cert", "create", "--client", "w1"]):
        subprocess.run([str(BIN / "dexctl"), "tls", *args], cwd=pki, check=True, capture_output=True)
    (tmp_path / "boot").write_text(SECRET + "\n")
    d = Dexd(tmp_path, ("--tls-cert", str(pki / "n1-server.pem"), "--tls-key", str(pki / "n1-server-key.pem"),
                        "--tls-ca", str(pki / "dex-ca.pem"), "--acl-bootstrap-token-file", str(tmp_path / "boot")))
    try:
        d.wait_ready()
        yield d, dex.TLSFiles(cert=str(pki / "w1-client.pem"), key=str(pki / "w1-client-key.pem"),
                              ca=str(pki / "dex-ca.pem"))
    finally:
        d.stop()


def test_worker_and_client_over_tls_with_a_token(secure_dexd):
    d, tls = secure_dexd

    async def main():
        w = dex.Worker(f"dex:///{d.addr}", id="tls-worker", tls=tls, token=SECRET, poll_wait=1.0)

        @w.model
        async def model(inp):
            return "hello over TLS"

        stop = asyncio.Event()
        run = asyncio.ensure_future(w.run(stop))
        try:
            async with dex.Client(d.addr, tls=tls, timeout=3.0) as anonymous:
                with pytest.raises(grpc.RpcError) as refused:
                    await anonymous.create_session("hi")
            async with dex.Client(d.addr, tls=tls, token=SECRET) as c:
                s = await c.create_session("hi")
                for _ in range(600):
                    got = await c.get_session(s.id)
                    if got.session.status == types_pb2.SESSION_STATUS_IDLE and len(got.session.history) >= 2:
                        return refused.value.code(), got.session.history[-1].text
                    await asyncio.sleep(0.05)
            return refused.value.code(), None
        finally:
            stop.set()
            await asyncio.wait_for(run, 15)

    code, text = asyncio.run(main())
    assert code == grpc.StatusCode.UNAUTHENTICATED
    assert text == "hello over TLS"
