"""A node that stops answering (SIGSTOP) is left: its calls in flight are cut
off as Unavailable, so they go again elsewhere instead of waiting out their
deadline."""

from __future__ import annotations

import asyncio

import grpc
import grpc.aio

import dex
from dex.v1 import workers_pb2, workers_pb2_grpc
from conftest import free_port


class Frozen(workers_pb2_grpc.WorkerServiceServicer):
    async def PollTask(self, request, context):
        await asyncio.sleep(3600)


async def _hang(request, context):
    await asyncio.sleep(3600)


def test_a_call_to_a_node_that_stops_answering_is_cut_off():
    async def main():
        s = grpc.aio.server()
        workers_pb2_grpc.add_WorkerServiceServicer_to_server(Frozen(), s)
        s.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(
            "grpc.health.v1.Health", {"Check": grpc.unary_unary_rpc_method_handler(_hang)}),))
        addr = f"127.0.0.1:{free_port()}"
        s.add_insecure_port(addr)
        await s.start()
        conn = dex.Connection(addr)
        try:
            await conn.unary(workers_pb2_grpc.WorkerServiceStub, "PollTask",
                             workers_pb2.PollTaskRequest(worker_id="w", wait_ms=1000), 3600)
        except grpc.RpcError as e:
            return e.code(), e.details()
        finally:
            await conn.close()
            await s.stop(None)
        return None

    code, details = asyncio.run(main())
    assert code == grpc.StatusCode.UNAVAILABLE
    assert "stopped answering its health checks" in details
