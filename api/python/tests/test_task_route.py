"""A task says how it runs: the Worker routes it by its runner and handler,
not by its kind, and refuses, unclaimed, a task that does not say (sent by
an older server) or says it inconsistently."""

from __future__ import annotations

import asyncio

import grpc.aio

import dex
from dex.v1 import types_pb2, workers_pb2, workers_pb2_grpc
from conftest import free_port


def _task(step: str, runner: int, handler: int, **kw) -> workers_pb2.Task:
    return workers_pb2.Task(ref=types_pb2.AttemptRef(step_id=step, attempt=1, token="t-" + step), session_id="s",
                            runner=runner, handler=handler, heartbeat_interval_ms=100, **kw)


class Cluster(workers_pb2_grpc.WorkerServiceServicer):
    def __init__(self, tasks: list) -> None:
        self.tasks = tasks
        self.claims: list = []
        self.reports: dict = {}
        self.done = asyncio.Event()

    async def RegisterWorker(self, request, context):
        return workers_pb2.RegisterWorkerResponse(heartbeat_interval_ms=100, heartbeat_timeout_ms=3000)

    async def PollTask(self, request, context):
        if self.tasks:
            tasks, self.tasks = self.tasks, []
            return workers_pb2.PollTaskResponse(tasks=tasks)
        await asyncio.sleep(min(request.wait_ms / 1000, 0.2))
        return workers_pb2.PollTaskResponse()

    async def ClaimTask(self, request, context):
        self.claims.append(request.ref.step_id)
        return workers_pb2.ClaimTaskResponse()

    async def Heartbeat(self, request, context):
        return workers_pb2.HeartbeatResponse()

    async def ReportTask(self, request, context):
        self.reports[request.ref.step_id] = (request.ref.seq, request.result)
        if len(self.reports) == 4:
            self.done.set()
        return workers_pb2.ReportTaskResponse()


def test_the_worker_routes_by_the_tasks_runner_and_handler():
    tool, poll = workers_pb2.TASK_RUNNER_TOOL, workers_pb2.TASK_HANDLER_POLL
    tasks = [
        # kind says nothing here: the handler decides.
        _task("poll", tool, poll, tool="render", task_id="job-7", access=types_pb2.TOOL_ACCESS_READ),
        _task("old", workers_pb2.TASK_RUNNER_UNSPECIFIED, workers_pb2.TASK_HANDLER_UNSPECIFIED,
              kind=types_pb2.STEP_KIND_CALL_TOOL, tool="render"),
        _task("mixed", workers_pb2.TASK_RUNNER_MODEL, workers_pb2.TASK_HANDLER_TOOL,
              kind=types_pb2.STEP_KIND_CALL_TOOL, tool="render"),
        _task("nohandler", tool, workers_pb2.TASK_HANDLER_UNSPECIFIED,
              kind=types_pb2.STEP_KIND_CALL_TOOL, tool="render"),
    ]
    ran: list = []

    async def main():
        cluster = Cluster(tasks)
        server = grpc.aio.server()
        workers_pb2_grpc.add_WorkerServiceServicer_to_server(cluster, server)
        addr = f"127.0.0.1:{free_port()}"
        server.add_insecure_port(addr)
        await server.start()
        w = dex.Worker(addr, id="w1", poll_wait=0.2)

        @w.tool(access="read", long_running=True)
        def render(call: dex.ToolCall) -> str:
            ran.append("run " + call.step_id)
            return ""

        @w.poll("render")
        def render_poll(call: dex.ToolCall):
            ran.append("poll " + call.task_id)
            return True, "rendered"

        @w.model
        async def model(inp: dex.ModelInput):
            ran.append("model")
            return "hi"

        stop = asyncio.Event()
        run = asyncio.ensure_future(w.run(stop))
        try:
            await asyncio.wait_for(cluster.done.wait(), 20)
        finally:
            stop.set()
            await asyncio.wait_for(run, 20)
            await server.stop(None)
        return cluster

    cluster = asyncio.run(main())
    assert ran == ["poll job-7"]
    assert cluster.claims == ["poll"]
    seq, res = cluster.reports["poll"]
    assert res.poll_result.done and res.poll_result.result.content == "rendered"
    want = {
        "old": "worker w1 cannot run a STEP_KIND_CALL_TOOL Step: the task names no runner and no handler "
               "(a Dex server older than this Worker library sent it)",
        "mixed": "worker w1 cannot run a STEP_KIND_CALL_TOOL Step: "
                 "runner TASK_RUNNER_MODEL has no handler TASK_HANDLER_TOOL",
        "nohandler": "worker w1 cannot run a STEP_KIND_CALL_TOOL Step: "
                     "runner TASK_RUNNER_TOOL has no handler TASK_HANDLER_UNSPECIFIED",
    }
    for step, text in want.items():
        seq, res = cluster.reports[step]
        assert (seq, res.failure.error) == (1, text)
