"""A call retried across a takeover keeps its sequence number: against two
fake nodes, one a follower naming the other in the dex-leader trailer, the
other losing the answer of the first ReportTask."""

from __future__ import annotations

import asyncio

import grpc
import grpc.aio

import dex
from dex.v1 import types_pb2, workers_pb2, workers_pb2_grpc
from conftest import free_port


class Follower(workers_pb2_grpc.WorkerServiceServicer):
    def __init__(self, leader: str) -> None:
        self.leader = leader
        self.calls = 0

    async def _refuse(self, request, context):
        self.calls += 1
        await context.abort_with_status(_status(grpc.StatusCode.UNAVAILABLE, "not the leader", self.leader))

    RegisterWorker = PollTask = ClaimTask = Heartbeat = ReportTask = _refuse


def _status(code, details, leader):
    class S(grpc.Status):
        pass

    s = S()
    s.code, s.details, s.trailing_metadata = code, details, (("dex-leader", leader),)
    return s


class Leader(workers_pb2_grpc.WorkerServiceServicer):
    def __init__(self) -> None:
        self.claims: list = []
        self.reports: list = []
        self.polls = 0
        self.reported = asyncio.Event()

    async def RegisterWorker(self, request, context):
        self.tools = [t.name for t in request.tools]
        return workers_pb2.RegisterWorkerResponse(heartbeat_interval_ms=100, heartbeat_timeout_ms=3000)

    async def PollTask(self, request, context):
        self.polls += 1
        if self.polls == 1:
            return workers_pb2.PollTaskResponse(tasks=[workers_pb2.Task(
                ref=types_pb2.AttemptRef(step_id="s1-s2", attempt=1, token="tok-1"), session_id="s1",
                kind=types_pb2.STEP_KIND_CALL_TOOL, runner=workers_pb2.TASK_RUNNER_TOOL,
                handler=workers_pb2.TASK_HANDLER_TOOL, tool="save_note", call_id="call-1-1", arguments='{"note":"x"}',
                idempotency_key="dex:s1:call-1-1", access=types_pb2.TOOL_ACCESS_IDEMPOTENT_WRITE,
                heartbeat_interval_ms=100)])
        await asyncio.sleep(min(request.wait_ms / 1000, 0.2))
        return workers_pb2.PollTaskResponse()

    async def ClaimTask(self, request, context):
        self.claims.append(types_pb2.AttemptRef.FromString(request.ref.SerializeToString()))
        return workers_pb2.ClaimTaskResponse()

    async def Heartbeat(self, request, context):
        return workers_pb2.HeartbeatResponse()

    async def ReportTask(self, request, context):
        self.reports.append((types_pb2.AttemptRef.FromString(request.ref.SerializeToString()),
                             request.result.tool_result.content))
        if len(self.reports) == 1:
            # Committed, but the answer is lost: the Worker must repeat it.
            await context.abort(grpc.StatusCode.UNAVAILABLE, "connection lost")
        self.reported.set()
        return workers_pb2.ReportTaskResponse()


async def _serve(servicer) -> tuple[grpc.aio.Server, str]:
    s = grpc.aio.server()
    workers_pb2_grpc.add_WorkerServiceServicer_to_server(servicer, s)
    addr = f"127.0.0.1:{free_port()}"
    s.add_insecure_port(addr)
    await s.start()
    return s, addr


def test_report_is_retried_with_the_same_seq_on_the_leader_the_trailer_names():
    async def main():
        leader = Leader()
        ls, laddr = await _serve(leader)
        follower = Follower(laddr)
        fs, faddr = await _serve(follower)
        keys = []
        w = dex.Worker(f"dex:///{faddr},{laddr}", id="w1", poll_wait=0.2)

        @w.tool(access="idempotent_write")
        async def save_note(call: dex.ToolCall) -> str:
            keys.append(call.idempotency_key)
            return "saved " + call.args["note"]

        stop = asyncio.Event()
        run = asyncio.ensure_future(w.run(stop))
        try:
            await asyncio.wait_for(leader.reported.wait(), 20)
        finally:
            stop.set()
            await asyncio.wait_for(run, 20)
            await ls.stop(None)
            await fs.stop(None)
        return leader, follower, keys

    leader, follower, keys = asyncio.run(main())
    assert follower.calls >= 1  # the first call went to the follower, which named the leader
    assert keys == ["dex:s1:call-1-1"]  # the handler ran once, with the write's key
    assert [(c.token, c.seq) for c in leader.claims] == [("tok-1", 1)]
    assert [(r.step_id, r.attempt, r.token, r.seq, content) for r, content in leader.reports] == [
        ("s1-s2", 1, "tok-1", 2, "saved x"),
        ("s1-s2", 1, "tok-1", 2, "saved x"),
    ]


def test_a_refusal_naming_the_leader_moves_the_connection_there():
    async def main():
        leader = Leader()
        ls, laddr = await _serve(leader)
        fs, faddr = await _serve(Follower(laddr))
        conn = dex.Connection(f"dex:///{faddr}")
        try:
            try:
                await conn.unary(workers_pb2_grpc.WorkerServiceStub, "RegisterWorker",
                                 workers_pb2.RegisterWorkerRequest(worker_id="w"), 5)
            except grpc.RpcError as e:
                assert e.code() == grpc.StatusCode.UNAVAILABLE
            else:
                raise AssertionError("the follower answered")
            assert await conn.node() == laddr
            resp = await conn.unary(workers_pb2_grpc.WorkerServiceStub, "RegisterWorker",
                                    workers_pb2.RegisterWorkerRequest(worker_id="w"), 5)
            assert resp.heartbeat_interval_ms == 100
        finally:
            await conn.close()
            await ls.stop(None)
            await fs.stop(None)

    asyncio.run(main())
