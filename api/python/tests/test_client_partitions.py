"""The client on a partitioned cluster: a call that names a session (or a
Step, or a create's parent or id) goes to the leader of the session's
partition once the connection has learned it from the trailers of its
calls; a create without an id goes to the node in use. Against fake nodes
on 127.0.0.1 that set the trailers a real node sets; the route table
mirrored from api/wirerules/routes.go."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Optional

import grpc
import grpc.aio
import pytest

import dex
from dex.partitions import BY_SESSION, BY_STEP, CREATE, PARENT_FIELD, SESSION_ROUTES, session_of_request
from dex.v1 import sessions_pb2, sessions_pb2_grpc, types_pb2
from conftest import free_port

_ROUTES_GO = Path(__file__).resolve().parents[2] / "wirerules" / "routes.go"

# The route table --------------------------------------------------------


def _go_session_routes() -> dict:
    """routes.go's SessionService routes: method -> (kind, field number or None)."""
    text = _ROUTES_GO.read_text()
    found = re.findall(r'"(/dex\.v1\.SessionService/\w+)":\s*\{Kind:\s*(\w+)(?:,\s*Field:\s*(\d+))?\}', text)
    return {m: (kind, int(field) if field else None) for m, kind, field in found}


def _request_of(method: str):
    """The request message class of a SessionService method."""
    name = method.rsplit("/", 1)[1]
    return sessions_pb2.DESCRIPTOR.services_by_name["SessionService"].methods_by_name[name].input_type


@pytest.mark.skipif(not _ROUTES_GO.exists(), reason="api/wirerules/routes.go is not beside this library")
def test_the_route_table_mirrors_the_clusters():
    go = _go_session_routes()
    assert len(go) == len(sessions_pb2.DESCRIPTOR.services_by_name["SessionService"].methods), \
        "routes.go should route every SessionService method"
    named = {m: r for m, r in go.items() if r[0] in (BY_SESSION, BY_STEP, CREATE)}
    assert set(SESSION_ROUTES) == set(named)
    for method, (kind, number) in named.items():
        assert SESSION_ROUTES[method].kind == kind, method
        assert _request_of(method).fields_by_number[number].name == SESSION_ROUTES[method].field, method
    parent = re.search(r"ParentField protoreflect\.FieldNumber = (\d+)", _ROUTES_GO.read_text())
    assert parent is not None
    assert sessions_pb2.CreateSessionRequest.DESCRIPTOR.fields_by_number[int(parent[1])].name == PARENT_FIELD


def test_partition_of_is_the_clusters():
    # api/wirerules/partitions_test.go's vectors.
    assert dex.partition_of("a", 3) == 0xE40C292C % 3
    assert dex.partition_of("", 7) == 0x811C9DC5 % 7
    assert dex.partition_of("foobar", 64) == 0xBF9CF968 % 64
    assert dex.partition_of("ses-0123456789abcdef", 1) == 0
    assert dex.partition_of("é", 1000) == dex.partition_of("\u00e9", 1000)


def test_the_session_a_request_names():
    # api/wirerules/routes_test.go's cases, for the SessionService.
    svc = "/dex.v1.SessionService/"
    cases = [
        ("CreateSession", sessions_pb2.CreateSessionRequest(session_id="ses-child", parent_id="ses-parent"), "ses-parent"),
        ("CreateSession", sessions_pb2.CreateSessionRequest(session_id="ses-root"), "ses-root"),
        ("CreateSession", sessions_pb2.CreateSessionRequest(message="hi"), ""),
        ("AnswerQuestion", sessions_pb2.AnswerQuestionRequest(step_id="ses-a-s12"), "ses-a"),
        ("AnswerQuestion", sessions_pb2.AnswerQuestionRequest(step_id="ses-a-s012"), ""),
        ("ResolveApproval", sessions_pb2.ResolveApprovalRequest(step_id="ses-b-s2-s3"), "ses-b-s2"),
        ("ReconcileOutcome", sessions_pb2.ReconcileOutcomeRequest(step_id="-s1"), ""),
        ("ReconcileOutcome", sessions_pb2.ReconcileOutcomeRequest(step_id="ses-a-s18446744073709551616"), ""),
        ("SendMessage", sessions_pb2.SendMessageRequest(session_id="ses-c", text="hi"), "ses-c"),
        ("WatchSession", sessions_pb2.WatchSessionRequest(session_id="ses-d"), "ses-d"),
        ("ListSessions", sessions_pb2.ListSessionsRequest(), ""),
        ("ImportSession", [sessions_pb2.ImportSessionRequest(chunk=b"x")], ""),
    ]
    assert [session_of_request(svc + m, req) for m, req, _ in cases] == [want for _, _, want in cases]


# Fake nodes -------------------------------------------------------------

_PARTITIONS = 3


def _id_in(k: int) -> str:
    """A new session id of partition k."""
    while True:
        sid = dex.new_session_id()
        if dex.partition_of(sid, _PARTITIONS) == k:
            return sid


class SessionNode(sessions_pb2_grpc.SessionServiceServicer):
    """One node of a fake cluster of three partitions, node k leading
    partition k: it serves every call and sets the trailers a real node
    sets, naming the partition's leader when it is another node. It records
    (its address, method, session) of each call. ``answers`` replaces the
    answers of its next calls: (code, trailers), code None for a success."""

    def __init__(self, addr: str, leaders: list, calls: list) -> None:
        self.addr, self.leaders, self.calls = addr, leaders, calls
        self.answers: list = []

    async def _route(self, method: str, session: str, context, partition: Optional[int] = None) -> None:
        """Records the call and sets its trailers: a call of session (or,
        given, of partition) is forwarded when this node does not lead it;
        one of neither is not routed by partition and gets none."""
        self.calls.append((self.addr, method, session))
        if self.answers:
            code, trailers = self.answers.pop(0)
            if code is not None:
                await context.abort(code, "scripted", trailing_metadata=trailers)
            context.set_trailing_metadata(trailers)
            return
        if partition is None and not session:
            return
        k = dex.partition_of(session, _PARTITIONS) if partition is None else partition
        trailers: tuple = (("dex-partitions", str(_PARTITIONS)),)
        if self.leaders[k] != self.addr:
            trailers += (("dex-partition-leader", self.leaders[k]),)
        context.set_trailing_metadata(trailers)

    async def CreateSession(self, request, context):
        if request.parent_id or request.session_id:
            await self._route("CreateSession", request.parent_id or request.session_id, context)
            sid = request.session_id or _id_in(dex.partition_of(request.parent_id, _PARTITIONS))
        else:
            # No id: this node draws one in the partition it leads.
            mine = self.leaders.index(self.addr)
            await self._route("CreateSession", "", context, partition=mine)
            sid = _id_in(mine)
        return sessions_pb2.CreateSessionResponse(session=types_pb2.Session(id=sid, parent_id=request.parent_id))

    async def SendMessage(self, request, context):
        await self._route("SendMessage", request.session_id, context)
        return sessions_pb2.SendMessageResponse()

    async def GetSession(self, request, context):
        await self._route("GetSession", request.session_id, context)
        return sessions_pb2.GetSessionResponse(session=types_pb2.Session(id=request.session_id))

    async def ResolveApproval(self, request, context):
        await self._route("ResolveApproval", request.step_id.rsplit("-s", 1)[0], context)
        return sessions_pb2.ResolveApprovalResponse()

    async def ListSessions(self, request, context):
        await self._route("ListSessions", "", context)
        return sessions_pb2.ListSessionsResponse()

    async def WatchSession(self, request, context):
        await self._route("WatchSession", request.session_id, context)
        yield types_pb2.Event(seq=request.after_seq + 1)


def _with_nodes(body) -> list:
    """Runs body(nodes, calls) against three fresh nodes; returns calls."""
    calls: list = []

    async def main() -> None:
        addrs = [f"127.0.0.1:{free_port()}" for _ in range(_PARTITIONS)]
        nodes, servers = [], []
        for addr in addrs:
            node = SessionNode(addr, addrs, calls)
            server = grpc.aio.server()
            sessions_pb2_grpc.add_SessionServiceServicer_to_server(node, server)
            server.add_insecure_port(addr)
            await server.start()
            nodes.append(node)
            servers.append(server)
        try:
            await body(nodes, calls)
        finally:
            for s in servers:
                await s.stop(None)

    asyncio.run(main())
    return calls


def _client(nodes: list) -> dex.Client:
    return dex.Client("dex:///" + ",".join(n.addr for n in nodes), timeout=10)


def _where(calls: list, since: int) -> list:
    """The node each call since the index went to."""
    return [addr for addr, _, _ in calls[since:]]


# Routing ----------------------------------------------------------------


def test_a_sessions_calls_go_to_its_partitions_leader_once_learned():
    async def body(nodes: list, calls: list) -> None:
        a, b, c = (n.addr for n in nodes)
        s0, s1, s2 = (_id_in(k) for k in range(_PARTITIONS))
        client = _client(nodes)
        try:
            # The first call goes to the node in use, A, which forwards it
            # and names B: its trailers give the count and B at once.
            await client.create_session(session_id=s1)
            await client.send_message(s1, "hi")
            await client.get_session(s1)
            assert _where(calls, 0) == [a, b, b]
            assert client.conn.partition_leader(1) == b
            # Partition 2: not known yet, so through A once, then at C; a
            # Step's call goes with its session.
            n = len(calls)
            await client.get_session(s2)
            await client.get_session(s2)
            await client.resolve_approval(s2 + "-s4", True)
            assert _where(calls, n) == [a, c, c]
            # A served partition 0's call itself: it leads it.
            n = len(calls)
            await client.send_message(s0, "hi")
            await client.get_session(s0)
            assert _where(calls, n) == [a, a]
            # A child goes to its parent's partition, whatever its own id.
            n = len(calls)
            child = await client.create_session(parent_id=s2)
            await client.create_session(session_id="ses-chosen-child", parent_id=s1)
            assert child.parent_id == s2
            assert _where(calls, n) == [c, b]
            # A create without an id, and a call of no session, go to the
            # node in use (A draws the id in a partition it leads).
            n = len(calls)
            made = await client.create_session("hello")
            await client.list_sessions()
            assert _where(calls, n) == [a, a]
            assert dex.partition_of(made.id, _PARTITIONS) == 0
            # A watch of a session is opened at its partition's leader.
            n = len(calls)
            events = client.watch(s2)
            assert (await events.__anext__()).seq == 1
            await events.aclose()
            assert _where(calls, n) == [c]
        finally:
            await client.close()

    _with_nodes(body)


def test_without_the_partition_count_every_call_goes_to_the_node_in_use():
    async def body(nodes: list, calls: list) -> None:
        a = nodes[0].addr
        s1 = _id_in(1)
        # A node of one partition (or of a build without partitions) says
        # dex-partitions: 1, or nothing.
        nodes[0].answers += [(None, (("dex-partitions", "1"),)), (None, ()), (None, ())]
        client = _client(nodes)
        try:
            await client.create_session(session_id=s1)
            await client.get_session(s1)
            await client.send_message(s1, "hi")
            assert _where(calls, 0) == [a, a, a]
            assert client.conn.partition_leader(1) == ""
        finally:
            await client.close()

    _with_nodes(body)


def test_a_partition_leader_that_fails_is_forgotten():
    async def body(nodes: list, calls: list) -> None:
        a, b, c = (n.addr for n in nodes)
        s1 = _id_in(1)
        client = _client(nodes)
        try:
            await client.get_session(s1)
            await client.get_session(s1)
            assert _where(calls, 0) == [a, b]
            # B does not answer: the retry goes to the node in use, A, which
            # forwards it and names B again; the next call goes to B.
            nodes[1].answers.append((grpc.StatusCode.UNAVAILABLE, ()))
            n = len(calls)
            await client.get_session(s1)
            assert _where(calls, n) == [b, a]
            assert client.conn.partition_leader(1) == b
            await client.send_message(s1, "hi")
            assert _where(calls, n) == [b, a, b]
            # A refusal that is not the leader's failure keeps it.
            nodes[1].answers.append((grpc.StatusCode.NOT_FOUND, (("dex-partitions", "3"),)))
            with pytest.raises(grpc.RpcError) as e:
                await client.get_session(s1)
            assert e.value.code() == grpc.StatusCode.NOT_FOUND
            assert client.conn.partition_leader(1) == b
            # A watch broken by the leader goes again through A.
            nodes[1].answers.append((grpc.StatusCode.UNAVAILABLE, ()))
            n = len(calls)
            events = client.watch(s1)
            assert (await events.__anext__()).seq == 1
            await events.aclose()
            assert _where(calls, n) == [b, a]
        finally:
            await client.close()

    _with_nodes(body)


def test_one_address_gets_every_session_call():
    async def body(nodes: list, calls: list) -> None:
        a = nodes[0].addr
        client = dex.Client(a, timeout=10)  # a load balancer's address: no routing
        try:
            for k in (1, 2, 1):
                sid = _id_in(k)
                await client.create_session(session_id=sid)
                await client.get_session(sid)
            assert set(_where(calls, 0)) == {a}
        finally:
            await client.close()

    _with_nodes(body)
