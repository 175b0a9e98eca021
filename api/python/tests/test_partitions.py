"""A partitioned cluster: the Worker runs one poll loop per partition, each
PollTask naming its partition in the dex-partition metadata, and the loops
share the Worker's concurrency. A cluster of one partition (0 or 1) gets no
partition metadata. Against a fake cluster that hands a poll only the tasks
of the partition it names."""

from __future__ import annotations

import asyncio
from typing import Optional

import grpc
import grpc.aio
import pytest

import dex
from dex.v1 import types_pb2, workers_pb2, workers_pb2_grpc
from conftest import free_port


def _task(step: str) -> workers_pb2.Task:
    return workers_pb2.Task(ref=types_pb2.AttemptRef(step_id=step, attempt=1, token="t-" + step), session_id="s",
                            kind=types_pb2.STEP_KIND_CALL_TOOL, runner=workers_pb2.TASK_RUNNER_TOOL,
                            handler=workers_pb2.TASK_HANDLER_TOOL, tool="echo", arguments=f'{{"step":"{step}"}}',
                            access=types_pb2.TOOL_ACCESS_READ, heartbeat_interval_ms=100)


class Partitioned(workers_pb2_grpc.WorkerServiceServicer):
    """A fake cluster. Each registration answers the next of ``partitions``
    (the last one again after). A PollTask gets tasks of the partition its
    dex-partition metadata names (none: partition 0). It tracks the most
    tasks the Worker could hold at once: those handed out and not reported,
    plus those asked for by the polls it is answering."""

    def __init__(self, partitions: list, tasks: dict, down: tuple = (), refuse_first_poll: bool = False) -> None:
        self.partitions = list(partitions)
        self.queues = {k: [_task(s) for s in steps] for k, steps in tasks.items()}
        self.want = sum(len(s) for s in tasks.values())
        self.down = down  # partitions whose polls answer Unavailable (their leader is down)
        self.refuse_first_poll = refuse_first_poll  # NotFound: the Worker registers again
        self.registrations = 0
        self.polled: list[Optional[str]] = []  # each poll's dex-partition (None: absent)
        self.claims: list[str] = []
        self.reports: dict[str, str] = {}
        self.outstanding = self.asked = self.most = 0
        self.done = asyncio.Event()

    async def RegisterWorker(self, request, context):
        n = self.partitions[min(self.registrations, len(self.partitions) - 1)]
        self.registrations += 1
        return workers_pb2.RegisterWorkerResponse(heartbeat_interval_ms=100, heartbeat_timeout_ms=3000, partitions=n)

    async def DeregisterWorker(self, request, context):
        return workers_pb2.DeregisterWorkerResponse()

    async def PollTask(self, request, context):
        part = dict(context.invocation_metadata()).get("dex-partition")
        self.polled.append(part)
        if self.refuse_first_poll and len(self.polled) == 1:
            await context.abort(grpc.StatusCode.NOT_FOUND, "worker w1 is not registered")
        k = int(part) if part is not None else 0
        if k in self.down:
            await context.abort(grpc.StatusCode.UNAVAILABLE, f"partition {k} has no leader")
        self.asked += request.max_tasks
        self.most = max(self.most, self.outstanding + self.asked)
        try:
            queue = self.queues.get(k, [])
            if queue:
                tasks, self.queues[k] = queue[:request.max_tasks], queue[request.max_tasks:]
                self.outstanding += len(tasks)
                return workers_pb2.PollTaskResponse(tasks=tasks)
            await asyncio.sleep(min(request.wait_ms / 1000, 0.05))
            return workers_pb2.PollTaskResponse()
        finally:
            self.asked -= request.max_tasks

    async def ClaimTask(self, request, context):
        self.claims.append(request.ref.step_id)
        return workers_pb2.ClaimTaskResponse()

    async def Heartbeat(self, request, context):
        return workers_pb2.HeartbeatResponse()

    async def ReportTask(self, request, context):
        self.outstanding -= 1
        self.reports[request.ref.step_id] = request.result.tool_result.content
        if len(self.reports) == self.want:
            self.done.set()
        return workers_pb2.ReportTaskResponse()


def _run(cluster: Partitioned, concurrency: int = 4) -> int:
    """Runs a Worker against cluster until every task is reported; returns
    the most handlers that ran at once. A handler waits until as many run
    as the concurrency allows (or every task has started), so that the
    slots fill up."""
    started = 0
    running = most = 0

    async def main() -> None:
        nonlocal started, running, most
        full = asyncio.Event()
        server = grpc.aio.server()
        workers_pb2_grpc.add_WorkerServiceServicer_to_server(cluster, server)
        addr = f"127.0.0.1:{free_port()}"
        server.add_insecure_port(addr)
        await server.start()
        w = dex.Worker(addr, id="w1", poll_wait=0.2, concurrency=concurrency)

        @w.tool(access="read")
        async def echo(call: dex.ToolCall) -> str:
            nonlocal started, running, most
            started += 1
            running += 1
            most = max(most, running)
            if running >= concurrency or started == cluster.want:
                full.set()
            await full.wait()
            running -= 1
            return "ran " + call.args["step"]

        stop = asyncio.Event()
        run = asyncio.ensure_future(w.run(stop))
        try:
            await asyncio.wait_for(cluster.done.wait(), 20)
        finally:
            stop.set()
            await asyncio.wait_for(run, 20)
            await server.stop(None)

    asyncio.run(main())
    return most


def test_a_worker_polls_every_partition_and_shares_its_concurrency():
    steps = {k: [f"p{k}-a", f"p{k}-b"] for k in range(3)}
    cluster = Partitioned([3], steps)
    most_running = _run(cluster, concurrency=2)
    assert dex.PARTITION_METADATA_KEY == "dex-partition"
    assert {"0", "1", "2"} <= set(cluster.polled)
    assert None not in cluster.polled  # every poll names its partition, 0 too
    every = sorted(s for ss in steps.values() for s in ss)
    assert sorted(cluster.claims) == every
    assert cluster.reports == {s: "ran " + s for s in every}
    assert most_running <= 2
    assert cluster.most <= 2  # never more asked for and held than the concurrency, across the loops


@pytest.mark.parametrize("partitions", [0, 1])
def test_a_cluster_of_one_partition_gets_no_partition_metadata(partitions):
    cluster = Partitioned([partitions], {0: ["p0-a", "p0-b"]})
    _run(cluster)
    assert cluster.polled and set(cluster.polled) == {None}
    assert cluster.reports == {"p0-a": "ran p0-a", "p0-b": "ran p0-b"}


def test_a_partition_without_a_leader_does_not_stop_the_others():
    cluster = Partitioned([3], {0: ["p0-a"], 2: ["p2-a"]}, down=(1,))
    _run(cluster)
    assert "1" in cluster.polled
    assert cluster.reports == {"p0-a": "ran p0-a", "p2-a": "ran p2-a"}


def test_a_registration_again_that_gives_more_partitions_is_followed():
    cluster = Partitioned([1, 3], {1: ["p1-a"], 2: ["p2-a"]}, refuse_first_poll=True)
    _run(cluster)
    assert cluster.registrations == 2
    assert cluster.polled[0] is None  # one partition first: no metadata
    assert {"1", "2"} <= set(cluster.polled)
    assert cluster.reports == {"p1-a": "ran p1-a", "p2-a": "ran p2-a"}
