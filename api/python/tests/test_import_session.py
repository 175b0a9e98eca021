"""import_session against a fake node: the object arrives whole in chunks
of at most 1 MiB, a node that refused it unread is tried again with the
same chunks, and a refusal is raised with its code."""

from __future__ import annotations

import asyncio

import grpc
import grpc.aio
import pytest

import dex
from dex.v1 import sessions_pb2, sessions_pb2_grpc
from conftest import free_port


class Sessions(sessions_pb2_grpc.SessionServiceServicer):
    def __init__(self) -> None:
        self.calls = 0
        self.addr = ""
        self.received: list[bytes] = []
        self.chunk_sizes: list[int] = []

    async def ImportSession(self, request_iterator, context):
        self.calls += 1
        data = b""
        async for req in request_iterator:
            self.chunk_sizes.append(len(req.chunk))
            data += req.chunk
        if self.calls == 1:
            # A follower's answer naming the leader (here, itself again):
            # nothing was read into the state.
            context.set_trailing_metadata((("dex-leader", self.addr),))
            await context.abort(grpc.StatusCode.UNAVAILABLE, "not the leader")
        self.received.append(data)
        if not data.startswith(b"dex-session-archive 1\n"):
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "not an importable archived session")
        return sessions_pb2.ImportSessionResponse(session_id="s1", history=3, steps=2, events=5)


def test_import_session_sends_the_object_whole_and_raises_refusals():
    obj = b"dex-session-archive 1\n" + bytes(range(256)) * 4096  # 1 MiB and a bit, over several chunks

    async def main():
        fake = Sessions()
        server = grpc.aio.server(options=[("grpc.max_receive_message_length", 4 << 20)])
        sessions_pb2_grpc.add_SessionServiceServicer_to_server(fake, server)
        addr = f"127.0.0.1:{free_port()}"
        fake.addr = addr
        server.add_insecure_port(addr)
        await server.start()
        client = dex.Client(f"dex:///{addr}", timeout=10)
        try:
            got = await client.import_session(obj)
            with pytest.raises(grpc.RpcError) as e:
                await client.import_session(b"PK\\x03\\x04 a zip")
            with pytest.raises(ValueError):
                await client.import_session(b"x" * (dex.client.MAX_IMPORT + 1))
            return fake, got, e.value
        finally:
            await client.close()
            await server.stop(None)

    fake, got, err = asyncio.run(main())
    assert (got.session_id, got.history, got.steps, got.events) == ("s1", 3, 2, 5)
    assert fake.received[0] == obj
    assert max(fake.chunk_sizes) <= 1 << 20 and len(fake.chunk_sizes) > 2
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert fake.calls == 3  # the follower's refusal, its repeat, the foreign file
