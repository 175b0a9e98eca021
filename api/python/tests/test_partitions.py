"""A partitioned cluster: the Worker runs one poll loop per partition, each
PollTask naming its partition in the dex-partition metadata, and the loops
share the Worker's concurrency. A cluster of one partition (0 or 1) gets no
partition metadata. Against a fake cluster that hands a poll only the tasks
of the partition it names.

Given the node list, the Worker sends each partition's polls and attempt
calls to the partition's leader, which the nodes name in their trailers:
against fake nodes, and (e2e) against three dexd nodes of a 3-partition
cluster, where no node forwards the Worker's calls once it has learned, nor
the client's session calls (test_client_partitions.py: the client against
fake nodes)."""

from __future__ import annotations

import asyncio
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Optional

import grpc
import grpc.aio
import pytest

import dex
from dex.v1 import admin_pb2, admin_pb2_grpc, types_pb2, workers_pb2, workers_pb2_grpc
from conftest import BIN, free_port
from test_cluster import _until


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


# Partition leaders -----------------------------------------------------
#
# A node of a partitioned cluster serves every call, forwarding one of a
# partition it does not lead, and says so in trailers: dex-partitions (the
# count) and, when it forwarded, dex-partition-leader (where it sent it). A
# Worker given the node list sends a partition's next calls there itself.

_ATTEMPT_CALLS = ("ClaimTask", "Heartbeat", "ReportTask")


class Node(workers_pb2_grpc.WorkerServiceServicer):
    """One node of a fake partitioned cluster in front of a Partitioned: it
    serves every call and sets the trailers a real node sets, naming the
    partition's leader (leaders[k]) when that is another node. ``answers``
    replaces the answers of its next calls: (code, trailers), code None
    for a success."""

    def __init__(self, cluster: Partitioned, addr: str, leaders: dict, calls: list,
                 steps: Optional[dict] = None) -> None:
        self.cluster, self.addr, self.leaders, self.calls = cluster, addr, leaders, calls
        self.steps = steps or {}  # step id -> partition, for attempt calls
        self.answers: list = []

    async def _route(self, method: str, k: Optional[int], request, context):
        self.calls.append((self.addr, method, k))
        if self.answers:
            code, trailers = self.answers.pop(0)
            if code is not None:
                await context.abort(code, "scripted", trailing_metadata=trailers)
            context.set_trailing_metadata(trailers)
        elif k is not None:
            trailers = (("dex-partitions", str(len(self.leaders))),)
            if self.leaders[k] != self.addr:
                trailers += (("dex-partition-leader", self.leaders[k]),)
            context.set_trailing_metadata(trailers)
        return await getattr(self.cluster, method)(request, context)

    async def RegisterWorker(self, request, context):
        return await self._route("RegisterWorker", None, request, context)

    async def DeregisterWorker(self, request, context):
        return await self._route("DeregisterWorker", None, request, context)

    async def PollTask(self, request, context):
        part = dict(context.invocation_metadata()).get("dex-partition")
        return await self._route("PollTask", int(part) if part is not None else 0, request, context)

    async def ClaimTask(self, request, context):
        return await self._route("ClaimTask", self.steps[request.ref.step_id], request, context)

    async def Heartbeat(self, request, context):
        return await self._route("Heartbeat", self.steps[request.ref.step_id], request, context)

    async def ReportTask(self, request, context):
        return await self._route("ReportTask", self.steps[request.ref.step_id], request, context)


async def _start_nodes(cluster: Partitioned, calls: list, steps: Optional[dict] = None) -> tuple[list, list]:
    """Three nodes on free ports; node k leads partition k. Returns the
    nodes and their servers."""
    addrs = [f"127.0.0.1:{free_port()}" for _ in range(3)]
    leaders = dict(enumerate(addrs))
    nodes, servers = [], []
    for addr in addrs:
        node = Node(cluster, addr, leaders, calls, steps)
        server = grpc.aio.server()
        workers_pb2_grpc.add_WorkerServiceServicer_to_server(node, server)
        server.add_insecure_port(addr)
        await server.start()
        nodes.append(node)
        servers.append(server)
    return nodes, servers


def _with_nodes(body) -> list:
    """Runs body(nodes, calls) against three fresh nodes; returns calls:
    (node address, method, partition) of every call, in order."""
    calls: list = []

    async def main() -> None:
        nodes, servers = await _start_nodes(Partitioned([3], {}), calls)
        try:
            await body(nodes, calls)
        finally:
            for s in servers:
                await s.stop(None)

    asyncio.run(main())
    return calls


async def _poll(conn: dex.Connection, calls: list, k: int, code: Optional[grpc.StatusCode] = None) -> str:
    """Polls partition k once, as a Worker does; returns the node it
    reached. A call answered with an error must fail with code."""
    req = workers_pb2.PollTaskRequest(worker_id="w1", wait_ms=0, max_tasks=1)
    try:
        await conn.unary(workers_pb2_grpc.WorkerServiceStub, "PollTask", req, 5.0,
                         metadata=((dex.PARTITION_METADATA_KEY, str(k)),), partition=k)
        assert code is None
    except grpc.RpcError as e:
        assert e.code() == code, e
    return calls[-1][0]


async def _register(conn: dex.Connection, calls: list, code: Optional[grpc.StatusCode] = None) -> str:
    """A call of no partition; returns the node it reached."""
    try:
        await conn.unary(workers_pb2_grpc.WorkerServiceStub, "RegisterWorker",
                         workers_pb2.RegisterWorkerRequest(worker_id="w1"), 5.0)
        assert code is None
    except grpc.RpcError as e:
        assert e.code() == code, e
    return calls[-1][0]


def _conn(nodes: list) -> dex.Connection:
    return dex.Connection("dex:///" + ",".join(n.addr for n in nodes))


def test_a_partitions_calls_go_to_the_leader_the_trailer_names_and_stay_there():
    async def body(nodes: list, calls: list) -> None:
        a, b, c = (n.addr for n in nodes)
        conn = _conn(nodes)
        try:
            # A forwards partitions 1 and 2 and names their leaders: the
            # next calls go there, and stay.
            assert [await _poll(conn, calls, 1) for _ in range(3)] == [a, b, b]
            assert [await _poll(conn, calls, 2) for _ in range(3)] == [a, c, c]
            assert [await _poll(conn, calls, 0) for _ in range(2)] == [a, a]
            # A follower's dex-leader moves the calls of no partition to B...
            nodes[0].answers.append((grpc.StatusCode.UNAVAILABLE, (("dex-leader", b),)))
            assert await _register(conn, calls, grpc.StatusCode.UNAVAILABLE) == a
            assert await _register(conn, calls) == b
            # ...not a partition's: partition 0's stay with A, which taught
            # that it leads it by serving a call without a forward.
            assert [await _poll(conn, calls, k) for k in range(3)] == [a, b, c]
        finally:
            await conn.close()

    _with_nodes(body)


def test_a_dex_leader_trailer_is_not_a_partition_leader():
    async def body(nodes: list, calls: list) -> None:
        a, b, c = (n.addr for n in nodes)
        conn = _conn(nodes)
        try:
            # Refused naming C in dex-leader: partition 1's next call
            # still goes to A, which forwards it and names B.
            nodes[0].answers.append((grpc.StatusCode.FAILED_PRECONDITION, (("dex-partitions", "3"), ("dex-leader", c))))
            assert await _poll(conn, calls, 1, grpc.StatusCode.FAILED_PRECONDITION) == a
            assert [await _poll(conn, calls, 1) for _ in range(2)] == [a, b]
            # Served by A with a dex-leader trailer: A served it, so A is
            # taken for partition 2's leader until it names C.
            nodes[0].answers.append((None, (("dex-partitions", "3"), ("dex-leader", c))))
            assert [await _poll(conn, calls, 2) for _ in range(3)] == [a, a, c]
        finally:
            await conn.close()

    _with_nodes(body)


def test_a_partition_leader_that_fails_is_forgotten():
    async def body(nodes: list, calls: list) -> None:
        a, b, c = (n.addr for n in nodes)
        conn = _conn(nodes)
        try:
            assert [await _poll(conn, calls, 1) for _ in range(2)] == [a, b]
            # B answers Unavailable: the next try goes to the node in use,
            # A, which names the leader again; calls of no partition never
            # left A.
            nodes[1].answers.append((grpc.StatusCode.UNAVAILABLE, ()))
            assert await _poll(conn, calls, 1, grpc.StatusCode.UNAVAILABLE) == b
            assert [await _poll(conn, calls, 1) for _ in range(2)] == [a, b]
            assert await _register(conn, calls) == a
            # A new partition count forgets every leader.
            nodes[0].answers.append((None, (("dex-partitions", "4"),)))
            assert await _register(conn, calls) == a
            assert [await _poll(conn, calls, 1) for _ in range(2)] == [a, b]
            # A node that forwarded twice (the first leader could not be
            # dialled) names both: the last one took the call.
            nodes[0].answers.append((None, (("dex-partitions", "3"), ("dex-partition-leader", b),
                                            ("dex-partition-leader", c))))
            assert [await _poll(conn, calls, 2) for _ in range(2)] == [a, c]
        finally:
            await conn.close()

    _with_nodes(body)


def test_one_address_gets_every_call():
    async def body(nodes: list, calls: list) -> None:
        a = nodes[0].addr
        conn = dex.Connection(a)  # a load balancer's address: no routing
        try:
            assert [await _poll(conn, calls, k) for k in (1, 1, 2, 2)] == [a, a, a, a]
        finally:
            await conn.close()

    _with_nodes(body)


def test_a_worker_sends_each_partitions_polls_and_attempt_calls_to_its_leader():
    steps = {k: [f"p{k}-a", f"p{k}-b"] for k in range(3)}
    cluster = Partitioned([3], steps)
    calls: list = []

    async def main() -> list:
        nodes, servers = await _start_nodes(cluster, calls, {s: k for k, ss in steps.items() for s in ss})
        w = dex.Worker("dex:///" + ",".join(n.addr for n in nodes), id="w1", poll_wait=0.2, concurrency=3)

        @w.tool(access="read")
        async def echo(call: dex.ToolCall) -> str:
            await asyncio.sleep(0.25)  # a heartbeat or two (every 100 ms)
            return "ran " + call.args["step"]

        stop = asyncio.Event()
        run = asyncio.ensure_future(w.run(stop))
        try:
            await asyncio.wait_for(cluster.done.wait(), 20)
        finally:
            stop.set()
            await asyncio.wait_for(run, 20)
            for s in servers:
                await s.stop(None)
        return [n.addr for n in nodes]

    addrs = asyncio.run(main())
    assert cluster.reports == {s: "ran " + s for ss in steps.values() for s in ss}
    attempt_calls = [(addr, m, k) for addr, m, k in calls if m in _ATTEMPT_CALLS]
    assert {m for _, m, _ in attempt_calls} == set(_ATTEMPT_CALLS)
    assert [c for c in attempt_calls if c[0] != addrs[c[2]]] == []
    for k in range(3):
        polls = [addr for addr, m, kk in calls if m == "PollTask" and kk == k]
        # The first poll goes to the node in use (the first), which names
        # the leader; every later one goes to the leader.
        assert polls[0] == addrs[0] and len(polls) > 1 and set(polls[1:]) == {addrs[k]}, (k, polls)


# Against a real 3-partition cluster ------------------------------------

class _Cluster:
    """Three dexd nodes of a cluster of ``partitions`` partitions on
    127.0.0.1 free ports, stopped by their PIDs."""

    def __init__(self, tmp: Path, partitions: int) -> None:
        self.partitions = partitions
        ports = [(free_port(), free_port(), free_port()) for _ in range(3)]
        self.grpc = [f"127.0.0.1:{g}" for _, g, _ in ports]
        self.http = [f"127.0.0.1:{h}" for _, _, h in ports]
        peers = ",".join(f"n{i + 1}=127.0.0.1:{r}" for i, (r, _, _) in enumerate(ports))
        self.procs: list = []
        self.logs: list = []
        for i, (raft, _, _) in enumerate(ports):
            self.logs.append(open(tmp / f"n{i + 1}.log", "wb"))
            self.procs.append(subprocess.Popen(
                [str(BIN / "dexd"), "--id", f"n{i + 1}", "--data-dir", str(tmp / f"n{i + 1}"),
                 "--raft-addr", f"127.0.0.1:{raft}", "--grpc-addr", self.grpc[i], "--http-addr", self.http[i],
                 "--peers", peers, "--partitions", str(partitions), "--log-level", "warn",
                 "--heartbeat-interval", "300ms", "--heartbeat-timeout", "3s"],
                stdout=self.logs[i], stderr=subprocess.STDOUT))

    def _leaders(self, addr: str) -> list:
        with grpc.insecure_channel(addr) as ch:
            st = admin_pb2_grpc.AdminServiceStub(ch).Status(admin_pb2.StatusRequest(), timeout=2)
        return [p.leader_grpc_address for p in sorted(st.partitions, key=lambda p: p.id)]

    def wait_leaders_spread(self, timeout: float = 60.0) -> list:
        """Waits until every node is ready and names the same leader of
        every partition, one partition led by each node; returns each
        partition's leader's gRPC address."""
        deadline = time.monotonic() + timeout
        last = ""
        while time.monotonic() < deadline:
            for p in self.procs:
                if p.poll() is not None:
                    raise RuntimeError(f"dexd exited with {p.returncode}")
            try:
                for h in self.http:
                    with urllib.request.urlopen(f"http://{h}/readyz", timeout=1) as r:
                        assert r.status == 200
                views = [self._leaders(a) for a in self.grpc]
                last = str(views)
                if all(v == views[0] for v in views) and len(views[0]) == self.partitions \
                        and "" not in views[0] and len(set(views[0])) == 3:
                    return views[0]
            except (OSError, grpc.RpcError):
                pass
            time.sleep(0.2)
        raise RuntimeError("the partitions' leaders never spread over the nodes: " + last)

    def forwarded(self) -> int:
        """dex_forwarded_calls_total summed over every node and partition."""
        total = 0
        for h in self.http:
            with urllib.request.urlopen(f"http://{h}/metrics", timeout=5) as r:
                for line in r.read().decode().splitlines():
                    if line.startswith("dex_forwarded_calls_total{"):
                        total += int(float(line.rsplit(" ", 1)[1]))
        return total

    def stop(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.terminate()
        for p in self.procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        for log in self.logs:
            log.close()


@pytest.fixture
def partitioned(tmp_path: Path):
    if not (BIN / "dexd").exists():
        pytest.skip(f"{BIN / 'dexd'} is missing: run make build")
    c = _Cluster(tmp_path, 3)
    try:
        yield c
    finally:
        c.stop()


@pytest.mark.e2e
def test_the_worker_calls_each_partitions_leader_directly(partitioned: _Cluster):
    """Mirrors cmd/dexd's TestLibrariesCallEachPartitionsLeaderDirectly for
    the Python Worker: once it has learned the partition map from its
    calls' trailers, no node forwards any of its calls. (The sessions are
    created and read through their partition's leader, as a routing client
    would.) A client that knows one node only is still served, through a
    forward, which the metric counts."""
    c = partitioned
    leaders = c.wait_leaders_spread()

    async def main() -> tuple:
        w = dex.Worker("dex:///" + ",".join(c.grpc), id="py-route", poll_wait=1.0, shutdown_grace=1.0,
                       concurrency=6)

        @w.tool(access="read")
        async def note(call: dex.ToolCall) -> str:
            await asyncio.sleep(0.4)  # a heartbeat (every 300 ms)
            return "noted"

        @w.model
        async def model(inp: dex.ModelInput):
            if any(e.kind == types_pb2.HISTORY_KIND_TOOL_RESULT for e in inp.history):
                return "Noted."
            return dex.model_output("", [{"call_id": "c1", "tool": "note", "arguments": {}}])

        # A client on each node; a session's calls go to its partition's leader's.
        clients = {a: dex.Client(a) for a in c.grpc}

        def client_of(sid: str) -> dex.Client:
            return clients[leaders[dex.partition_of(sid, c.partitions)]]

        async def turns(per_partition: int) -> list:
            ids = []
            for k in range(c.partitions):
                while len(ids) < (k + 1) * per_partition:
                    sid = dex.new_session_id()
                    if dex.partition_of(sid, c.partitions) == k:
                        ids.append(sid)
            for i, sid in enumerate(ids):
                await client_of(sid).create_session(f"hello {i}", session_id=sid)
            for sid in ids:
                async def answered() -> bool:
                    h = (await client_of(sid).get_session(sid)).session.history
                    return bool(h) and h[-1].kind == types_pb2.HISTORY_KIND_ASSISTANT and h[-1].text == "Noted."

                await _until(answered, f"session {sid} answered")
            return ids

        stop = asyncio.Event()
        run = asyncio.ensure_future(w.run(stop))
        try:
            await turns(1)  # the first calls teach the Worker the map
            warm = c.forwarded()
            ids = await turns(3)
            grew = c.forwarded() - warm
            # Through the first node only: a session of a partition it
            # does not lead is reached through a forward.
            other = next(s for s in ids if leaders[dex.partition_of(s, c.partitions)] != c.grpc[0])
            before = c.forwarded()
            async with dex.Client(c.grpc[0]) as one:
                assert (await one.get_session(other)).session.id == other
            through_one = c.forwarded() - before
        finally:
            stop.set()
            await asyncio.wait_for(run, 15)
            for cl in clients.values():
                await cl.close()
        return warm, grew, through_one

    warm, grew, through_one = asyncio.run(main())
    assert warm >= 1  # the Worker's first polls went through the first node
    assert grew == 0, f"the nodes forwarded {grew} calls of 9 sessions' turns; the Worker should call each leader"
    assert through_one >= 1


@pytest.mark.e2e
def test_the_client_calls_each_sessions_partition_leader_directly(partitioned: _Cluster):
    """The client given the node list, once it has learned the partition
    map from its calls' trailers, makes each session call at the leader of
    the session's partition: while it creates sessions (with an id, without
    one, children), sends messages, reads, watches, budgets and closes them
    in every partition, no node forwards any call."""
    c = partitioned
    c.wait_leaders_spread()

    def ids(per_partition: int) -> list:
        """New session ids, per_partition of each partition."""
        out: list = []
        for k in range(c.partitions):
            while len(out) < (k + 1) * per_partition:
                sid = dex.new_session_id()
                if dex.partition_of(sid, c.partitions) == k:
                    out.append(sid)
        return out

    async def main() -> tuple:
        async with dex.Client("dex:///" + ",".join(c.grpc)) as client:
            async def use(sid: str) -> None:
                await client.create_session(session_id=sid)
                await client.send_message(sid, "hello")  # its turn waits: no Worker serves the model
                assert [e.text for e in (await client.get_session(sid)).session.history] == ["hello"]
                events = client.watch(sid)
                try:
                    await asyncio.wait_for(events.__anext__(), 10)
                finally:
                    await events.aclose()
                await client.set_budget(sid, max_turns=5)
                child = await client.create_session(parent_id=sid)
                assert dex.partition_of(child.id, c.partitions) == dex.partition_of(sid, c.partitions)
                assert (await client.get_session(child.id)).session.parent_id == sid
                await client.close_session(child.id)

            for sid in ids(1):  # the first calls teach the client the map
                await use(sid)
            warm = c.forwarded()
            for sid in ids(3):
                await use(sid)
            # Without an id the node in use draws one in a partition it leads.
            made = await client.create_session()
            await client.send_message(made.id, "hello")
            await client.get_session(made.id)
            return warm, c.forwarded() - warm

    warm, grew = asyncio.run(main())
    assert warm >= 1  # the first call of a partition another node leads went through the node in use
    assert grew == 0, f"the nodes forwarded {grew} of the client's calls of 10 sessions; it should call each leader"
