"""create_session's retention against a fake node: a retention given is
sent (0 included: kept for ever), none given leaves the field unset, so the
cluster's retention for the agent applies."""

from __future__ import annotations

import asyncio

import grpc.aio

import dex
from dex.v1 import sessions_pb2, sessions_pb2_grpc, types_pb2
from conftest import free_port


class Sessions(sessions_pb2_grpc.SessionServiceServicer):
    def __init__(self) -> None:
        self.requests: list[sessions_pb2.CreateSessionRequest] = []

    async def CreateSession(self, request, context):
        self.requests.append(request)
        return sessions_pb2.CreateSessionResponse(session=types_pb2.Session(id=request.session_id))


def test_create_session_sends_the_retention_only_when_given():
    async def main():
        fake = Sessions()
        server = grpc.aio.server()
        sessions_pb2_grpc.add_SessionServiceServicer_to_server(fake, server)
        addr = f"127.0.0.1:{free_port()}"
        server.add_insecure_port(addr)
        await server.start()
        client = dex.Client(f"dex:///{addr}", timeout=10)
        try:
            await client.create_session(session_id="a", retention_ms=60_000)
            await client.create_session(session_id="b", retention_ms=0)
            await client.create_session(session_id="c")
            return fake.requests
        finally:
            await client.close()
            await server.stop(None)

    a, b, c = asyncio.run(main())
    assert a.HasField("retention_ms") and a.retention_ms == 60_000
    assert b.HasField("retention_ms") and b.retention_ms == 0
    assert not c.HasField("retention_ms")
