"""TLS files are checked as they are read, at start and at every reload: a
file that is not PEM is refused with the flag it came from, and a reload
of a connection without TLS says there is nothing to reload."""

from __future__ import annotations

import asyncio

import pytest

import dex


def test_files_that_are_not_pem_are_refused_naming_the_flag(tmp_path):
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("not a certificate\n")
    with pytest.raises(dex.DexError, match=f"--tls-ca {garbage} holds no PEM certificate"):
        dex.TLSFiles(cert=str(garbage), key=str(garbage), ca=str(garbage)).credentials()
    with pytest.raises(dex.DexError, match="--tls-ca: .*No such file"):
        dex.TLSFiles(cert=str(garbage), key=str(garbage), ca=str(tmp_path / "missing.pem")).credentials()
    with pytest.raises(dex.DexError, match="--tls-ca"):
        dex.Connection("127.0.0.1:1", tls=dex.TLSFiles(cert=str(garbage), key=str(garbage), ca=str(garbage)))


def test_reload_without_tls_is_refused():
    async def main():
        conn = dex.Connection("127.0.0.1:1")
        try:
            with pytest.raises(dex.DexError, match="does not use TLS"):
                conn.reload_tls()
        finally:
            await conn.close()

    asyncio.run(main())
    w = dex.Worker("127.0.0.1:1", id="w")
    with pytest.raises(dex.DexError, match="does not use TLS"):
        w.reload_tls()


def test_a_worker_not_yet_running_checks_the_files_it_will_read(tmp_path):
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("not a certificate\n")
    w = dex.Worker("127.0.0.1:1", id="w", tls=dex.TLSFiles(cert=str(garbage), key=str(garbage), ca=str(garbage)))
    with pytest.raises(dex.DexError, match="holds no PEM certificate"):
        w.reload_tls()
