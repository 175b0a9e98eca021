"""Labels and the search of sessions against a fake node: create_session's
labels and each filter of list_sessions and list_sessions_page sent as
given; a filtered list read through short and empty pages until the token
is empty; a limit that stops reading; list_sessions with no argument
sending the request it always sent; set_labels sending set and remove and
retried after UNAVAILABLE; bad input refused before any call."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from datetime import datetime, timedelta, timezone

import grpc
import grpc.aio
import pytest

import dex
from dex.v1 import sessions_pb2, sessions_pb2_grpc, types_pb2
from conftest import free_port

IDLE, RUNNING = types_pb2.SESSION_STATUS_IDLE, types_pb2.SESSION_STATUS_RUNNING
T0 = 1767258000000  # 2026-01-01T09:00:00Z


def _labels(s) -> dict:
    return {lb.key: lb.value for lb in s.labels}


class Sessions(sessions_pb2_grpc.SessionServiceServicer):
    """Holds 20 sessions, s00 to s19, created a second apart: agent "bot"
    for every third (s00, s03, ...), else "other"; label team=red on every
    fifth (s00, s05, s10, s15), team=blue on the others, env=prod on the
    even ones. ListSessions filters on status, agent and labels, and like
    the cluster examines at most ``examine`` sessions a page, so a filtered
    page may come back short or empty with a token (the position of the
    last session examined). ``unavailable`` calls are answered UNAVAILABLE
    before anything is done; ``lose`` SetLabels are applied, then answered
    UNAVAILABLE (the answer lost)."""

    def __init__(self) -> None:
        self.lists: list[sessions_pb2.ListSessionsRequest] = []
        self.answers: list[sessions_pb2.ListSessionsResponse] = []
        self.sets: list[sessions_pb2.SetLabelsRequest] = []
        self.creates: list[sessions_pb2.CreateSessionRequest] = []
        self.examine = 4
        self.unavailable = 0
        self.lose = 0
        self.sessions = []
        for i in range(20):
            labels = {"team": "red" if i % 5 == 0 else "blue"}
            if i % 2 == 0:
                labels["env"] = "prod"
            self.sessions.append(types_pb2.Session(
                id=f"s{i:02}", agent="bot" if i % 3 == 0 else "other", status=IDLE if i % 2 else RUNNING,
                created_at_ms=T0 + 1000 * i, updated_at_ms=T0 + 1000 * i,
                labels=[types_pb2.Label(key=k, value=v) for k, v in sorted(labels.items())]))

    @property
    def calls(self) -> int:
        return len(self.lists) + len(self.sets) + len(self.creates)

    async def _refuse(self, context) -> None:
        if self.unavailable > 0:
            self.unavailable -= 1
            await context.abort(grpc.StatusCode.UNAVAILABLE, "no leader yet")

    def _matches(self, s, req) -> bool:
        return ((not req.status or s.status == req.status) and (not req.agent or s.agent == req.agent)
                and all(_labels(s).get(lb.key) == lb.value for lb in req.labels))

    async def ListSessions(self, request, context):
        self.lists.append(request)
        await self._refuse(context)
        start = int(request.page_token) + 1 if request.page_token else 0
        size = request.page_size or 1000
        out = sessions_pb2.ListSessionsResponse()
        i = start
        while i < len(self.sessions) and i - start < self.examine and len(out.sessions) < size:
            s = self.sessions[i]
            if self._matches(s, request):
                out.sessions.append(sessions_pb2.SessionSummary(id=s.id, agent=s.agent, status=s.status,
                                                                labels=s.labels, created_at_ms=s.created_at_ms))
            i += 1
        if i < len(self.sessions):
            out.next_page_token = str(i - 1)
        self.answers.append(out)
        return out

    async def SetLabels(self, request, context):
        self.sets.append(request)
        await self._refuse(context)
        s = next((s for s in self.sessions if s.id == request.session_id), None)
        if s is None:
            await context.abort(grpc.StatusCode.NOT_FOUND, f'session "{request.session_id}" not found')
        labels = {k: v for k, v in _labels(s).items() if k not in request.remove}
        labels.update((lb.key, lb.value) for lb in request.set)
        del s.labels[:]
        s.labels.extend(types_pb2.Label(key=k, value=v) for k, v in sorted(labels.items()))
        if self.lose > 0:
            self.lose -= 1
            await context.abort(grpc.StatusCode.UNAVAILABLE, "leadership lost")
        return sessions_pb2.SetLabelsResponse(session=s)

    async def CreateSession(self, request, context):
        self.creates.append(request)
        await self._refuse(context)
        s = types_pb2.Session(id=request.session_id or "ses-drawn", agent=request.agent, labels=request.labels)
        self.sessions.append(s)
        return sessions_pb2.CreateSessionResponse(session=s)


def _run(body):
    """body(client, fake) against a fresh fake node; its result."""
    async def main():
        fake = Sessions()
        server = grpc.aio.server()
        sessions_pb2_grpc.add_SessionServiceServicer_to_server(fake, server)
        addr = f"127.0.0.1:{free_port()}"
        server.add_insecure_port(addr)
        await server.start()
        client = dex.Client(f"dex:///{addr}", timeout=10)
        try:
            return await body(client, fake)
        finally:
            await client.close()
            await server.stop(None)

    return asyncio.run(main())


def _ids(sessions) -> list:
    return [s.id for s in sessions]


def test_create_session_sends_its_labels():
    async def body(client, fake):
        await client.create_session("hi", session_id="c1", labels={"team": "red", "env": ""})
        await client.create_session("hi", session_id="c2")
        return fake

    fake = _run(body)
    assert [(lb.key, lb.value) for lb in fake.creates[0].labels] == [("team", "red"), ("env", "")]
    assert len(fake.creates[1].labels) == 0


def test_list_sessions_with_no_argument_sends_the_request_it_always_sent():
    async def body(client, fake):
        return fake, await client.list_sessions()

    fake, got = _run(body)
    # Every session, through every page (4 a page: 5 pages), and each
    # request only the token of the page before.
    assert _ids(got) == [f"s{i:02}" for i in range(20)]
    assert fake.lists == [sessions_pb2.ListSessionsRequest(page_token=t) for t in ("", "3", "7", "11", "15")]


def test_each_filter_reaches_the_request():
    after = datetime(2026, 1, 1, 9, 0, 5, 250000, tzinfo=timezone.utc)
    before = datetime(2026, 1, 1, 11, 0, 5, tzinfo=timezone(timedelta(hours=2)))  # 09:00:05Z

    async def body(client, fake):
        fake.examine = 100
        await client.list_sessions(status="running", agent="bot", labels={"team": "red", "env": "prod"},
                                   parent_id="p1", forked_from="f1", created_after=after, created_before=before,
                                   updated_after=T0 + 1, updated_before=T0 + 2, order="updated", descending=True)
        fake.examine = 7
        page = await client.list_sessions_page(page_size=7, page_token="3", status=IDLE, agent="other",
                                               labels={"team": "blue"}, parent_id="p2", forked_from="f2",
                                               created_after=T0 + 3, created_before=T0 + 4, updated_after=after,
                                               updated_before=before, order="created")
        fake.examine = 100
        await client.list_sessions(order="created")
        await client.list_sessions(status="Errored", descending=True)
        return fake, page

    fake, page = _run(body)
    first, paged, ordered, desc = fake.lists
    assert (first.page_size, first.page_token, first.status, first.agent, first.parent_id, first.forked_from) == (
        0, "", RUNNING, "bot", "p1", "f1")
    assert [(lb.key, lb.value) for lb in first.labels] == [("team", "red"), ("env", "prod")]
    assert (first.created_after_ms, first.created_before_ms, first.updated_after_ms, first.updated_before_ms) == (
        T0 + 5250, T0 + 5000, T0 + 1, T0 + 2)
    assert (first.order_by, first.descending) == (sessions_pb2.SESSION_ORDER_UPDATED, True)
    assert (paged.page_size, paged.page_token, paged.status, paged.agent, paged.parent_id, paged.forked_from) == (
        7, "3", IDLE, "other", "p2", "f2")
    assert [(lb.key, lb.value) for lb in paged.labels] == [("team", "blue")]
    assert (paged.created_after_ms, paged.created_before_ms, paged.updated_after_ms, paged.updated_before_ms) == (
        T0 + 3, T0 + 4, T0 + 5250, T0 + 5000)
    assert (paged.order_by, paged.descending) == (sessions_pb2.SESSION_ORDER_CREATED, False)
    assert ordered == sessions_pb2.ListSessionsRequest(order_by=sessions_pb2.SESSION_ORDER_CREATED)
    assert desc == sessions_pb2.ListSessionsRequest(status=types_pb2.SESSION_STATUS_ERRORED, descending=True)
    # The page as the node answered it: of the 7 sessions it examined
    # (s04 to s10), the idle ones of agent other with team=blue (s07), and
    # the token after the last examined.
    assert (_ids(page.sessions), page.next_page_token) == (["s07"], "10")


def test_a_naive_datetime_is_local_time():
    local = datetime(2026, 1, 1, 10, 30)

    async def body(client, fake):
        await client.list_sessions_page(created_after=local)
        return fake

    fake = _run(body)
    assert fake.lists[0].created_after_ms == int(local.timestamp() * 1000)


def test_a_filtered_list_reads_short_and_empty_pages_until_the_token_is_empty():
    async def body(client, fake):
        red = await client.list_sessions(labels={"team": "red"}, agent="bot")
        return fake, red

    fake, red = _run(body)
    # team=red and agent bot: s00 and s15 only, in pages that examine 4
    # sessions each: [s00], [], [], [s15], [] and the last has no token.
    assert _ids(red) == ["s00", "s15"]
    assert [_ids(a.sessions) for a in fake.answers] == [["s00"], [], [], ["s15"], []]
    assert [a.next_page_token for a in fake.answers] == ["3", "7", "11", "15", ""]
    assert [r.page_token for r in fake.lists] == ["", "3", "7", "11", "15"]
    # Every page carries the filter.
    assert all(r.agent == "bot" and [(lb.key, lb.value) for lb in r.labels] == [("team", "red")]
               for r in fake.lists)


def test_a_list_page_that_failed_is_read_again():
    async def body(client, fake):
        fake.unavailable = 1
        return fake, await client.list_sessions(labels={"env": "prod"})

    fake, got = _run(body)
    assert _ids(got) == [f"s{i:02}" for i in range(0, 20, 2)]
    assert [r.page_token for r in fake.lists] == ["", "", "3", "7", "11", "15"]


def test_a_limit_stops_reading():
    async def body(client, fake):
        three = await client.list_sessions(labels={"team": "blue"}, limit=3)
        after_three = len(fake.lists)
        one = await client.list_sessions(limit=1)
        after_one = len(fake.lists)
        # More than there are: the list ends where the token does.
        every = await client.list_sessions(agent="bot", limit=100)
        return fake, three, after_three, one, after_one, every

    fake, three, after_three, one, after_one, every = _run(body)
    # team=blue: s01 to s03 on the first page, which is enough.
    assert _ids(three) == ["s01", "s02", "s03"] and after_three == 1
    assert fake.lists[0].page_size == 3
    assert _ids(one) == ["s00"] and after_one == 2
    assert fake.lists[1] == sessions_pb2.ListSessionsRequest(page_size=1)
    assert _ids(every) == ["s00", "s03", "s06", "s09", "s12", "s15", "s18"]
    # Each page asks for what is left to read.
    assert [r.page_size for r in fake.lists[2:]] == [100, 98, 97, 96, 94]


def test_a_limit_asks_each_page_for_what_is_left():
    async def body(client, fake):
        return fake, await client.list_sessions(labels={"env": "prod"}, limit=5)

    fake, got = _run(body)
    # env=prod: 2 of each 4 examined, so pages of 2, 2, then 1 asked.
    assert _ids(got) == ["s00", "s02", "s04", "s06", "s08"]
    assert [r.page_size for r in fake.lists] == [5, 3, 1]
    assert [r.page_token for r in fake.lists] == ["", "3", "7"]


def test_set_labels_sends_set_and_remove_and_returns_the_session():
    async def body(client, fake):
        got = await client.set_labels("s00", {"team": "green", "tier": "1"}, remove=["env"])
        only_remove = await client.set_labels("s02", remove=("team",))
        only_set = await client.set_labels("s03", set={"owner": "ana"})
        return fake, got, only_remove, only_set

    fake, got, only_remove, only_set = _run(body)
    req = fake.sets[0]
    assert req.session_id == "s00"
    assert [(lb.key, lb.value) for lb in req.set] == [("team", "green"), ("tier", "1")]
    assert list(req.remove) == ["env"]
    assert (got.id, _labels(got)) == ("s00", {"team": "green", "tier": "1"})
    assert (list(fake.sets[1].set), list(fake.sets[1].remove)) == ([], ["team"])
    assert _labels(only_remove) == {"env": "prod"}
    assert ([(lb.key, lb.value) for lb in fake.sets[2].set], list(fake.sets[2].remove)) == ([("owner", "ana")], [])
    assert _labels(only_set) == {"owner": "ana", "team": "blue"}
    assert len(fake.sets) == 3


def test_set_labels_is_retried_after_unavailable():
    async def body(client, fake):
        # Refused before anything changed, then applied with its answer lost.
        fake.unavailable = 1
        first = await client.set_labels("s01", {"team": "red"}, remove=["env"])
        after_first = len(fake.sets)
        fake.lose = 1
        second = await client.set_labels("s04", {"tier": "2"}, remove=["team"])
        return fake, first, after_first, second

    fake, first, after_first, second = _run(body)
    assert after_first == 2 and _labels(first) == {"team": "red"}
    # Applied twice, the same end state as once.
    assert len(fake.sets) == 4
    assert fake.sets[2] == fake.sets[3]
    assert _labels(second) == {"env": "prod", "tier": "2"}


def test_set_labels_raises_what_the_node_refused():
    async def body(client, fake):
        with pytest.raises(grpc.RpcError) as e:
            await client.set_labels("nobody", {"team": "red"})
        return fake, e.value

    fake, err = _run(body)
    assert (err.code(), err.details()) == (grpc.StatusCode.NOT_FOUND, 'session "nobody" not found')
    assert len(fake.sets) == 1  # a refusal is not repeated


class _Repeating(Mapping):
    """A mapping whose items give one key twice, as a multi-dict's do."""

    def __init__(self, *pairs) -> None:
        self.pairs = pairs

    def __getitem__(self, k):
        return dict(self.pairs)[k]

    def __iter__(self):
        return (k for k, _ in self.pairs)

    def __len__(self) -> int:
        return len(self.pairs)


_TWICE = _Repeating(("team", "red"), ("team", "blue"))

_BAD = [
    # create_session
    ("create_session", ("hi",), {"labels": ["team=red"]},
     r"^create_session: labels must be a mapping of key to value, not list$"),
    ("create_session", ("hi",), {"labels": {"": "red"}}, r"^create_session: a label key is empty$"),
    ("create_session", ("hi",), {"labels": {"team": 1}}, r"^create_session: label 'team''s value must be a str, not 1$"),
    ("create_session", ("hi",), {"labels": {None: "x"}}, r"^create_session: a label key must be a str, not None$"),
    ("create_session", ("hi",), {"labels": _TWICE}, r"^create_session: label 'team' is given twice$"),
    # list_sessions
    ("list_sessions", (), {"status": "sleeping"},
     r"^list_sessions: status 'sleeping': use idle, running, waiting, errored, paused or closed$"),
    ("list_sessions", (), {"status": 99}, r"^list_sessions: status must be a name or a types_pb2.SessionStatus, not 99$"),
    ("list_sessions", (), {"status": True}, r"^list_sessions: status must be a name .*, not True$"),
    ("list_sessions", (), {"agent": 3}, r"^list_sessions: agent must be a str, not 3$"),
    ("list_sessions", (), {"parent_id": None}, r"^list_sessions: parent_id must be a str, not None$"),
    ("list_sessions", (), {"forked_from": b"f"}, r"^list_sessions: forked_from must be a str, not b'f'$"),
    ("list_sessions", (), {"labels": "team=red"}, r"^list_sessions: labels must be a mapping of key to value, not str$"),
    ("list_sessions", (), {"labels": {"": "red"}}, r"^list_sessions: a label key is empty$"),
    ("list_sessions", (), {"labels": _TWICE}, r"^list_sessions: label 'team' is given twice$"),
    ("list_sessions", (), {"order": "newest"}, r"^list_sessions: order 'newest': use created or updated$"),
    ("list_sessions", (), {"order": 7}, r"^list_sessions: order must be None, 'created' or 'updated', not 7$"),
    ("list_sessions", (), {"descending": "yes"}, r"^list_sessions: descending must be a bool, not 'yes'$"),
    ("list_sessions", (), {"limit": -1}, r"^list_sessions: limit must be a whole number from 0 to \d+, not -1$"),
    ("list_sessions", (), {"limit": 2.5}, r"^list_sessions: limit must be a whole number .*, not 2\.5$"),
    ("list_sessions", (), {"created_after": -5},
     r"^list_sessions: created_after must be from 1970-01-01 UTC \(Unix milliseconds from 0 to \d+\), not -5$"),
    ("list_sessions", (), {"updated_before": "1h"},
     r"^list_sessions: updated_before must be a datetime or Unix milliseconds \(an int\), not '1h'$"),
    ("list_sessions", (), {"created_before": 1.5e12}, r"^list_sessions: created_before must be a datetime or Unix"),
    ("list_sessions", (), {"updated_after": datetime(1969, 12, 31, tzinfo=timezone.utc)},
     r"^list_sessions: updated_after must be from 1970-01-01 UTC"),
    # list_sessions_page
    ("list_sessions_page", (), {"page_size": -1},
     r"^list_sessions_page: page_size must be a whole number from 0 to 4294967295, not -1$"),
    ("list_sessions_page", (), {"page_size": 2**32}, r"^list_sessions_page: page_size must be a whole number"),
    ("list_sessions_page", (), {"page_size": "50"}, r"^list_sessions_page: page_size must be a whole number .*, not '50'$"),
    ("list_sessions_page", (), {"page_token": None}, r"^list_sessions_page: page_token must be a str, not None$"),
    ("list_sessions_page", (), {"order": "Created"}, r"^list_sessions_page: order 'Created': use created or updated$"),
    ("list_sessions_page", (), {"labels": {"team": None}},
     r"^list_sessions_page: label 'team''s value must be a str, not None$"),
    # set_labels
    ("set_labels", ("",), {"set": {"team": "red"}},
     r"^set_labels: session_id is empty: give the id of the session to label$"),
    ("set_labels", (None,), {"set": {"team": "red"}}, r"^set_labels: session_id must be a str, not None$"),
    ("set_labels", ("s00",), {}, r"^set_labels: nothing to change: give labels to set \(\{key: value\}\) or keys to remove$"),
    ("set_labels", ("s00", {}), {"remove": []}, r"^set_labels: nothing to change"),
    ("set_labels", ("s00", [("team", "red")]), {}, r"^set_labels: set must be a mapping of key to value, not list$"),
    ("set_labels", ("s00", {"": "red"}), {}, r"^set_labels: a label key in set is empty$"),
    ("set_labels", ("s00", {"team": 5}), {}, r"^set_labels: label 'team''s value must be a str, not 5$"),
    ("set_labels", ("s00", _TWICE), {}, r"^set_labels: label 'team' is given twice in set$"),
    ("set_labels", ("s00",), {"remove": "env"},
     r"^set_labels: remove must be an iterable of label keys, not a str \('env'\): put one key in a list$"),
    ("set_labels", ("s00",), {"remove": 5}, r"^set_labels: remove must be an iterable of label keys, not int$"),
    ("set_labels", ("s00",), {"remove": [""]}, r"^set_labels: a label key in remove is empty$"),
    ("set_labels", ("s00",), {"remove": [1]}, r"^set_labels: a label key in remove must be a str, not 1$"),
    ("set_labels", ("s00",), {"remove": ["env", "env"]}, r"^set_labels: label 'env' is given twice in remove$"),
    ("set_labels", ("s00", {"env": "dev"}), {"remove": ["env"]},
     r"^set_labels: label 'env' is both in set and in remove$"),
]


@pytest.mark.parametrize("method,args,kwargs,want", _BAD, ids=[f"{b[0]}-{i}" for i, b in enumerate(_BAD)])
def test_bad_input_is_refused_before_any_call(method, args, kwargs, want):
    async def body(client, fake):
        with pytest.raises(ValueError, match=want):
            await getattr(client, method)(*args, **kwargs)
        return fake

    fake = _run(body)
    assert fake.calls == 0
