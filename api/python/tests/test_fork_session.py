"""fork_session against a fake node: the request's fields sent, the fork
returned, a fork with an id retried after its answer was lost returns the
fork that try made, one without an id is repeated only when a node refused
it unread, refusals raised with their code, bad input refused before any
call."""

from __future__ import annotations

import asyncio

import grpc
import grpc.aio
import pytest

import dex
from dex.v1 import sessions_pb2, sessions_pb2_grpc, types_pb2
from conftest import free_port


class Sessions(sessions_pb2_grpc.SessionServiceServicer):
    """Knows session "src" (entries 1 to 4, agent bot@1, label team=red)
    and "taken" (not a fork). ``lose`` forks are made but answered
    UNAVAILABLE (the answer lost); ``unread`` calls are refused as a
    follower refuses them, naming the leader (itself), before anything is
    made. GetSession answers NOT_FOUND for the ids in ``unreadable``."""

    def __init__(self) -> None:
        self.addr = ""
        self.requests: list[sessions_pb2.ForkSessionRequest] = []
        self.gets: list[str] = []
        self.lose = 0
        self.unread = 0
        self.unreadable: set[str] = set()
        self.drawn = 0
        self.sessions = {
            "src": types_pb2.Session(id="src", agent="bot@1", labels=[types_pb2.Label(key="team", value="red")]),
            "taken": types_pb2.Session(id="taken", agent="bot@1"),
        }

    async def ForkSession(self, request, context):
        self.requests.append(request)
        if self.unread > 0:
            self.unread -= 1
            context.set_trailing_metadata((("dex-leader", self.addr),))
            await context.abort(grpc.StatusCode.UNAVAILABLE, "not the leader")
        src = self.sessions.get(request.source_session_id)
        if src is None or src.forked_from:
            await context.abort(grpc.StatusCode.NOT_FOUND, f'session "{request.source_session_id}" not found')
        if request.at_seq > 4:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                                f"session src has no history entry {request.at_seq}: its entries go up to 4")
        if request.session_id in self.sessions:
            await context.abort(grpc.StatusCode.ALREADY_EXISTS, f'session "{request.session_id}" already exists')
        fid = request.session_id
        if not fid:
            self.drawn += 1
            fid = f"ses-drawn{self.drawn}"
        fork = types_pb2.Session(id=fid, agent=request.agent or src.agent, forked_from=src.id,
                                 forked_at_seq=request.at_seq,
                                 status=types_pb2.SESSION_STATUS_RUNNING if request.message else types_pb2.SESSION_STATUS_IDLE,
                                 labels=request.labels or src.labels)
        self.sessions[fid] = fork
        if self.lose > 0:
            self.lose -= 1
            await context.abort(grpc.StatusCode.UNAVAILABLE, "leadership lost")
        return sessions_pb2.ForkSessionResponse(session=fork)

    async def GetSession(self, request, context):
        self.gets.append(request.session_id)
        s = self.sessions.get(request.session_id)
        if s is None or request.session_id in self.unreadable:
            await context.abort(grpc.StatusCode.NOT_FOUND, f'session "{request.session_id}" not found')
        return sessions_pb2.GetSessionResponse(session=s)


def _run(body):
    """body(client, fake) against a fresh fake node; its result."""
    async def main():
        fake = Sessions()
        server = grpc.aio.server()
        sessions_pb2_grpc.add_SessionServiceServicer_to_server(fake, server)
        fake.addr = f"127.0.0.1:{free_port()}"
        server.add_insecure_port(fake.addr)
        await server.start()
        client = dex.Client(f"dex:///{fake.addr}", timeout=10)
        try:
            return await body(client, fake)
        finally:
            await client.close()
            await server.stop(None)

    return asyncio.run(main())


async def _code(call) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as e:
        await call
    return e.value


def test_fork_session_sends_the_fields_given_and_returns_the_fork():
    async def body(client, fake):
        full = await client.fork_session("src", 3, message="try the other library",
                                         labels={"team": "blue", "env": "prod"}, agent="bot@2", session_id="f1")
        bare = await client.fork_session("src", 4)
        return fake, full, bare

    fake, full, bare = _run(body)
    req = fake.requests[0]
    assert (req.source_session_id, req.at_seq, req.message, req.agent, req.session_id) == (
        "src", 3, "try the other library", "bot@2", "f1")
    assert [(lb.key, lb.value) for lb in req.labels] == [("team", "blue"), ("env", "prod")]
    assert (full.id, full.forked_from, full.forked_at_seq, full.agent, full.status) == (
        "f1", "src", 3, "bot@2", types_pb2.SESSION_STATUS_RUNNING)
    assert [(lb.key, lb.value) for lb in full.labels] == [("team", "blue"), ("env", "prod")]
    # Nothing optional given: nothing sent for it, so the fork has the
    # source's agent and labels and an id the cluster drew.
    req = fake.requests[1]
    assert (req.message, req.agent, req.session_id, len(req.labels)) == ("", "", "", 0)
    assert (bare.id, bare.forked_from, bare.forked_at_seq, bare.agent, bare.status) == (
        "ses-drawn1", "src", 4, "bot@1", types_pb2.SESSION_STATUS_IDLE)
    assert [(lb.key, lb.value) for lb in bare.labels] == [("team", "red")]
    assert len(fake.requests) == 2 and fake.gets == []


def test_a_fork_with_an_id_whose_answer_was_lost_returns_the_fork_it_made():
    async def body(client, fake):
        fake.lose = 1
        got = await client.fork_session("src", 3, session_id="f1")
        return fake, got

    fake, got = _run(body)
    assert (got.id, got.forked_from, got.forked_at_seq) == ("f1", "src", 3)
    # The lost answer, the repeat that met ALREADY_EXISTS, then the read.
    assert [r.session_id for r in fake.requests] == ["f1", "f1"]
    assert fake.gets == ["f1"]
    assert sorted(fake.sessions) == ["f1", "src", "taken"]  # one fork made


def test_a_fork_without_an_id_is_repeated_only_when_nothing_was_made():
    async def body(client, fake):
        fake.lose = 1
        lost = await _code(client.fork_session("src", 3))
        after_lost = len(fake.requests)
        fake.unread = 1
        got = await client.fork_session("src", 2)
        return fake, lost, after_lost, got

    fake, lost, after_lost, got = _run(body)
    # The answer was lost after the fork was made: a repeat would make a
    # second one, so the error is raised after one try.
    assert lost.code() == grpc.StatusCode.UNAVAILABLE
    assert after_lost == 1
    # A follower's refusal changed nothing: repeated, one fork made.
    assert len(fake.requests) == 3
    assert (got.id, got.forked_at_seq) == ("ses-drawn2", 2)
    assert fake.gets == []


def test_already_exists_is_raised_unless_the_session_is_this_fork():
    async def body(client, fake):
        # First try: the id is someone else's, nothing of ours was tried.
        first = await _code(client.fork_session("src", 3, session_id="taken"))
        gets_after_first = list(fake.gets)
        # A repeat meets a session of that id that is not this fork: a
        # session that is not a fork, a fork at another entry, a fork that
        # cannot be read.
        fake.sessions["f-old"] = types_pb2.Session(id="f-old", forked_from="src", forked_at_seq=2)
        fake.sessions["f-gone"] = types_pb2.Session(id="f-gone", forked_from="src", forked_at_seq=3)
        fake.unreadable.add("f-gone")
        out = []
        for sid in ("taken", "f-old", "f-gone"):
            fake.unread = 1
            out.append(await _code(client.fork_session("src", 3, session_id=sid)))
        return fake, first, gets_after_first, out

    fake, first, gets_after_first, out = _run(body)
    assert first.code() == grpc.StatusCode.ALREADY_EXISTS
    assert gets_after_first == []
    assert [e.code() for e in out] == [grpc.StatusCode.ALREADY_EXISTS] * 3
    assert [e.details() for e in out] == [f'session "{sid}" already exists' for sid in ("taken", "f-old", "f-gone")]
    assert fake.gets == ["taken", "f-old", "f-gone"]


def test_refusals_are_raised_with_their_code():
    async def body(client, fake):
        unknown = await _code(client.fork_session("nobody", 1, session_id="f2"))
        beyond = await _code(client.fork_session("src", 9, session_id="f3"))
        return fake, unknown, beyond

    fake, unknown, beyond = _run(body)
    assert (unknown.code(), unknown.details()) == (grpc.StatusCode.NOT_FOUND, 'session "nobody" not found')
    assert (beyond.code(), beyond.details()) == (
        grpc.StatusCode.INVALID_ARGUMENT, "session src has no history entry 9: its entries go up to 4")
    assert len(fake.requests) == 2  # a refusal is not repeated
    assert sorted(fake.sessions) == ["src", "taken"]


@pytest.mark.parametrize("args,kwargs,want", [
    (("src", 0), {}, r"^fork_session: at_seq must be a whole number from 1 to 18446744073709551615, not 0$"),
    (("src", -2), {}, r"at_seq must be a whole number from 1 to .*, not -2$"),
    (("src", 2**64), {}, r"at_seq must be a whole number from 1 to 18446744073709551615, not 18446744073709551616$"),
    (("src", 2.0), {}, r"at_seq must be a whole number .*, not 2\.0$"),
    (("src", "3"), {}, r"at_seq must be a whole number .*, not '3'$"),
    (("src", True), {}, r"at_seq must be a whole number .*, not True$"),
    (("", 3), {}, r"^fork_session: source_session_id is empty: give the id of the session to fork$"),
    ((None, 3), {}, r"^fork_session: source_session_id must be a str, not None$"),
    (("src", 3), {"labels": {}}, r"^fork_session: labels is empty: a fork has the source's labels \(None\)"),
    (("src", 3), {"labels": ["team=red"]}, r"^fork_session: labels must be a mapping of key to value, not list$"),
    (("src", 3), {"labels": {"team": 5}}, r"^fork_session: label 'team''s value must be a str, not 5$"),
    (("src", 3), {"labels": {7: "x"}}, r"^fork_session: a label key must be a str, not 7$"),
    (("src", 3), {"message": b"hi"}, r"^fork_session: message must be a str, not b'hi'$"),
    (("src", 3), {"agent": None}, r"^fork_session: agent must be a str, not None$"),
    (("src", 3), {"session_id": 12}, r"^fork_session: session_id must be a str, not 12$"),
])
def test_bad_input_is_refused_before_any_call(args, kwargs, want):
    async def body(client, fake):
        with pytest.raises(ValueError, match=want):
            await client.fork_session(*args, **kwargs)
        return fake

    fake = _run(body)
    assert fake.requests == [] and fake.gets == []
