"""close_session against a fake node: a close whose answer was lost is
retried (a close of a closed session succeeds), an unknown session is
NotFound."""

from __future__ import annotations

import asyncio

import grpc
import grpc.aio
import pytest

import dex
from dex.v1 import sessions_pb2, sessions_pb2_grpc, types_pb2
from conftest import free_port


class Sessions(sessions_pb2_grpc.SessionServiceServicer):
    def __init__(self) -> None:
        self.calls = 0

    async def CloseSession(self, request, context):
        self.calls += 1
        if request.session_id != "s1":
            await context.abort(grpc.StatusCode.NOT_FOUND, f'session "{request.session_id}" not found')
        if self.calls == 1:
            await context.abort(grpc.StatusCode.UNAVAILABLE, "connection lost")
        return sessions_pb2.CloseSessionResponse(session=types_pb2.Session(
            id="s1", status=types_pb2.SESSION_STATUS_CLOSED, delete_at_ms=42))


def test_close_session_is_retried_and_not_found_is_raised():
    async def main():
        fake = Sessions()
        server = grpc.aio.server()
        sessions_pb2_grpc.add_SessionServiceServicer_to_server(fake, server)
        addr = f"127.0.0.1:{free_port()}"
        server.add_insecure_port(addr)
        await server.start()
        client = dex.Client(f"dex:///{addr}", timeout=10)
        try:
            s = await client.close_session("s1")
            with pytest.raises(grpc.RpcError) as e:
                await client.close_session("nobody")
            return fake.calls, s, e.value.code()
        finally:
            await client.close()
            await server.stop(None)

    calls, s, code = asyncio.run(main())
    assert (s.id, s.status, s.delete_at_ms) == ("s1", types_pb2.SESSION_STATUS_CLOSED, 42)
    assert calls == 3  # the lost answer, its retry, the unknown session
    assert code == grpc.StatusCode.NOT_FOUND
