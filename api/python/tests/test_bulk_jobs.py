"""The bulk job calls against a fake node: the request's fields sent, the
job returned, a start retried after its answer was lost (with a job id
given or drawn) returns the job that try started, refusals raised with
their code, bad input refused before any call, wait_bulk_job ending on
done and on cancelled and giving up at its timeout."""

from __future__ import annotations

import asyncio
import re
import time

import grpc
import grpc.aio
import pytest

import dex
from dex.v1 import sessions_pb2, sessions_pb2_grpc, types_pb2
from conftest import free_port

RUNNING, DONE, CANCELLED = (sessions_pb2.BULK_JOB_STATUS_RUNNING, sessions_pb2.BULK_JOB_STATUS_DONE,
                            sessions_pb2.BULK_JOB_STATUS_CANCELLED)


class Bulk(sessions_pb2_grpc.SessionServiceServicer):
    """Keeps jobs by id. A running job acts on 10 more sessions at each
    read and is done after ``reads_to_end`` reads (0: never). ``lose``
    starts are made but answered UNAVAILABLE (the answer lost); ``unread``
    calls are refused as a follower refuses them, naming the leader
    (itself), before anything is made. ``cancel_at_read`` cancels a job at
    that read of it, as another client would. GetBulkJob answers NOT_FOUND
    for the ids in ``unreadable``."""

    def __init__(self) -> None:
        self.addr = ""
        self.starts: list[sessions_pb2.StartBulkActionRequest] = []
        self.gets: list[str] = []
        self.cancels: list[str] = []
        self.jobs: dict[str, sessions_pb2.BulkJob] = {}
        self.reads: dict[str, int] = {}
        self.lose = 0
        self.unread = 0
        self.reads_to_end = 3
        self.cancel_at_read = 0
        self.unreadable: set[str] = set()
        self.clock = 1767258000000

    async def _refuse_unread(self, context) -> None:
        if self.unread > 0:
            self.unread -= 1
            context.set_trailing_metadata((("dex-leader", self.addr),))
            await context.abort(grpc.StatusCode.UNAVAILABLE, "not the leader")

    async def StartBulkAction(self, request, context):
        self.starts.append(request)
        await self._refuse_unread(context)
        if request.job_id in self.jobs:
            await context.abort(grpc.StatusCode.ALREADY_EXISTS, f'bulk job "{request.job_id}" already exists')
        self.clock += 1
        job = sessions_pb2.BulkJob(id=request.job_id, action=request.action, filter=request.filter,
                                   labels=request.labels, reason=request.reason, by="ana", status=RUNNING,
                                   created_at_ms=self.clock)
        self.jobs[job.id] = job
        if self.lose > 0:
            self.lose -= 1
            await context.abort(grpc.StatusCode.UNAVAILABLE, "leadership lost")
        return sessions_pb2.StartBulkActionResponse(job=job)

    async def _job(self, job_id, context) -> sessions_pb2.BulkJob:
        if job_id not in self.jobs or job_id in self.unreadable:
            await context.abort(grpc.StatusCode.NOT_FOUND, f'bulk job "{job_id}" not found')
        return self.jobs[job_id]

    async def GetBulkJob(self, request, context):
        self.gets.append(request.job_id)
        await self._refuse_unread(context)
        job = await self._job(request.job_id, context)
        if job.status == RUNNING:
            n = self.reads[job.id] = self.reads.get(job.id, 0) + 1
            if n == self.cancel_at_read:
                job.status, job.cancelled_by = CANCELLED, "bob"
            else:
                job.acted += 10
                job.steps += 1
                if n == self.reads_to_end:
                    job.status = DONE
        return sessions_pb2.GetBulkJobResponse(job=job)

    async def ListBulkJobs(self, request, context):
        await self._refuse_unread(context)
        return sessions_pb2.ListBulkJobsResponse(
            jobs=sorted(self.jobs.values(), key=lambda j: j.created_at_ms, reverse=True))

    async def CancelBulkJob(self, request, context):
        self.cancels.append(request.job_id)
        job = await self._job(request.job_id, context)
        if job.status == RUNNING:
            job.status, job.cancelled_by = CANCELLED, "ana"
        if self.lose > 0:
            self.lose -= 1
            await context.abort(grpc.StatusCode.UNAVAILABLE, "leadership lost")
        return sessions_pb2.CancelBulkJobResponse(job=job)


def _run(body):
    """body(client, fake) against a fresh fake node; its result."""
    async def main():
        fake = Bulk()
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


def _labels(m) -> list:
    return [(lb.key, lb.value) for lb in m.labels]


def test_start_sends_the_fields_given_and_returns_the_job():
    async def body(client, fake):
        cancel = await client.start_bulk_action(
            "cancel", filter={"labels": {"batch": "nightly"}, "status": "running", "agent": "support",
                              "created_from_ms": 1767000000000}, reason="batch stopped", job_id="b1")
        label = await client.start_bulk_action("label", filter=sessions_pb2.BulkFilter(parent_id="p1"),
                                               labels={"owner": "ana", "team": "a"})
        delete = await client.start_bulk_action("delete", all=True)
        return fake, cancel, label, delete

    fake, cancel, label, delete = _run(body)
    req = fake.starts[0]
    assert (req.action, req.reason, req.job_id, req.all) == (sessions_pb2.BULK_ACTION_CANCEL, "batch stopped", "b1", False)
    f = req.filter
    assert (f.status, f.agent, f.created_from_ms, _labels(f)) == (
        types_pb2.SESSION_STATUS_RUNNING, "support", 1767000000000, [("batch", "nightly")])
    assert (cancel.id, cancel.action, cancel.status, cancel.reason) == (
        "b1", sessions_pb2.BULK_ACTION_CANCEL, RUNNING, "batch stopped")
    # No id given: the client drew one, so the call can be retried.
    req = fake.starts[1]
    assert re.fullmatch(r"bulk-[0-9a-f]{16}", req.job_id)
    assert (req.action, req.filter.parent_id, _labels(req)) == (
        sessions_pb2.BULK_ACTION_LABEL, "p1", [("owner", "ana"), ("team", "a")])
    assert (label.id, _labels(label)) == (req.job_id, [("owner", "ana"), ("team", "a")])
    req = fake.starts[2]
    assert (req.action, req.all, req.filter == sessions_pb2.BulkFilter()) == (sessions_pb2.BULK_ACTION_DELETE, True, True)
    assert delete.id == req.job_id and delete.id != label.id
    assert len(fake.starts) == 3 and fake.gets == []


def test_get_list_and_cancel_return_the_jobs():
    async def body(client, fake):
        a = await client.start_bulk_action("close", filter={"agent": "old"}, job_id="a")
        await client.start_bulk_action("resume", filter={"status": "errored"}, job_id="b")
        got = await client.get_bulk_job("a")
        listed = await client.list_bulk_jobs()
        cancelled = await client.cancel_bulk_job("b")
        again = await client.cancel_bulk_job("b")  # an ended job is left as it is
        unknown = await _code(client.get_bulk_job("nobody"))
        unknown_cancel = await _code(client.cancel_bulk_job("nobody"))
        return fake, a, got, listed, cancelled, again, unknown, unknown_cancel

    fake, a, got, listed, cancelled, again, unknown, unknown_cancel = _run(body)
    assert (a.status, a.acted) == (RUNNING, 0)
    assert (got.id, got.action, got.filter.agent, got.status, got.acted) == (
        "a", sessions_pb2.BULK_ACTION_CLOSE, "old", RUNNING, 10)
    assert [j.id for j in listed] == ["b", "a"]  # newest first
    assert (cancelled.id, cancelled.status, cancelled.cancelled_by) == ("b", CANCELLED, "ana")
    assert (again.status, again.cancelled_by) == (CANCELLED, "ana")
    assert (unknown.code(), unknown.details()) == (grpc.StatusCode.NOT_FOUND, 'bulk job "nobody" not found')
    assert unknown_cancel.code() == grpc.StatusCode.NOT_FOUND
    assert fake.gets == ["a", "nobody"]  # a refusal is not repeated
    assert fake.cancels == ["b", "b", "nobody"]


@pytest.mark.parametrize("job_id", ["b1", ""])
def test_a_start_whose_answer_was_lost_returns_the_job_it_started(job_id):
    async def body(client, fake):
        fake.lose = 1
        got = await client.start_bulk_action("cancel", filter={"labels": {"batch": "nightly"}}, job_id=job_id)
        return fake, got

    fake, got = _run(body)
    # The lost answer, the repeat (same id) that met ALREADY_EXISTS, then
    # the read: one job started, the one returned.
    ids = [r.job_id for r in fake.starts]
    assert len(ids) == 2 and ids[0] == ids[1] and (ids[0] == job_id or not job_id)
    assert list(fake.jobs) == [ids[0]]
    assert fake.gets == [ids[0]]
    assert (got.id, got.action, got.status) == (ids[0], sessions_pb2.BULK_ACTION_CANCEL, RUNNING)


def test_a_start_refused_unread_is_repeated_and_starts_one_job():
    async def body(client, fake):
        fake.unread = 2
        got = await client.start_bulk_action("close", filter={"agent": "old"})
        return fake, got

    fake, got = _run(body)
    assert len(fake.starts) == 3 and len(fake.jobs) == 1 and got.id in fake.jobs
    assert fake.gets == []  # the repeat found no job of its id: nothing to read


def test_already_exists_is_raised_unless_the_job_is_this_one():
    async def body(client, fake):
        # First try: the id is another job's, nothing of ours was tried.
        await client.start_bulk_action("close", filter={"agent": "old"}, job_id="taken")
        first = await _code(client.start_bulk_action("close", filter={"agent": "old"}, job_id="taken"))
        gets_after_first = list(fake.gets)
        # A repeat meets a job of that id with another action.
        fake.unread = 1
        other = await _code(client.start_bulk_action("cancel", filter={"agent": "old"}, job_id="taken"))
        # A repeat meets a job of that id it cannot read.
        await client.start_bulk_action("close", filter={"agent": "old"}, job_id="hidden")
        fake.unreadable.add("hidden")
        fake.unread = 1
        hidden = await _code(client.start_bulk_action("close", filter={"agent": "old"}, job_id="hidden"))
        return fake, first, gets_after_first, other, hidden

    fake, first, gets_after_first, other, hidden = _run(body)
    assert (first.code(), first.details()) == (grpc.StatusCode.ALREADY_EXISTS, 'bulk job "taken" already exists')
    assert gets_after_first == []
    assert (other.code(), other.details()) == (grpc.StatusCode.ALREADY_EXISTS, 'bulk job "taken" already exists')
    assert (hidden.code(), hidden.details()) == (grpc.StatusCode.ALREADY_EXISTS, 'bulk job "hidden" already exists')
    assert fake.gets == ["taken", "hidden"]
    assert fake.jobs["taken"].action == sessions_pb2.BULK_ACTION_CLOSE


def test_a_lost_cancel_answer_is_retried():
    async def body(client, fake):
        await client.start_bulk_action("resume", job_id="r")
        fake.lose = 1
        return fake, await client.cancel_bulk_job("r")

    fake, got = _run(body)
    assert fake.cancels == ["r", "r"]
    assert (got.id, got.status) == ("r", CANCELLED)


def test_wait_returns_the_job_when_it_is_done():
    async def body(client, fake):
        await client.start_bulk_action("cancel", filter={"labels": {"batch": "nightly"}}, job_id="w")
        seen = []
        got = await asyncio.wait_for(
            client.wait_bulk_job("w", interval=0.01, progress=lambda j: seen.append((j.status, j.acted))), 5)
        return fake, got, seen

    fake, got, seen = _run(body)
    assert (got.id, got.status, got.acted, got.steps) == ("w", DONE, 30, 3)
    assert seen == [(RUNNING, 10), (RUNNING, 20), (DONE, 30)]
    assert fake.gets == ["w"] * 3  # no read after the job ended


def test_wait_returns_the_job_when_it_is_cancelled():
    async def body(client, fake):
        fake.reads_to_end, fake.cancel_at_read = 0, 2
        await client.start_bulk_action("close", filter={"agent": "old"}, job_id="w")
        return fake, await asyncio.wait_for(client.wait_bulk_job("w", interval=0.01), 5)

    fake, got = _run(body)
    assert (got.status, got.cancelled_by, got.acted) == (CANCELLED, "bob", 10)
    assert fake.gets == ["w", "w"]


def test_wait_gives_up_at_its_timeout_and_leaves_the_job_running():
    async def body(client, fake):
        fake.reads_to_end = 0
        await client.start_bulk_action("close", filter={"agent": "old"}, job_id="w")
        t0 = time.monotonic()
        with pytest.raises(TimeoutError, match=r"^bulk job w still running after 0\.3s \(\d+0 acted on, \d+ steps\)$"):
            # wait_for's own timeout (5 s) would be asyncio's TimeoutError
            # without this message.
            await asyncio.wait_for(client.wait_bulk_job("w", interval=0.05, timeout=0.3), 5)
        return fake, time.monotonic() - t0

    fake, took = _run(body)
    assert took >= 0.3  # not before its timeout
    assert fake.jobs["w"].status == RUNNING and fake.cancels == []
    assert len(fake.gets) >= 1


def test_wait_raises_a_read_that_fails():
    async def body(client, fake):
        return await _code(client.wait_bulk_job("nobody", interval=0.01, timeout=5))

    e = _run(body)
    assert e.code() == grpc.StatusCode.NOT_FOUND


@pytest.mark.parametrize("args,kwargs,want", [
    (("stop",), {}, r"^start_bulk_action: action 'stop': use cancel, resume, close, delete, label$"),
    (("label",), {"filter": {"agent": "a"}}, r"^start_bulk_action: a label job needs labels"),
    (("label",), {"labels": {}}, r"^start_bulk_action: a label job needs labels"),
    (("close",), {"labels": {"a": "b"}}, r"^start_bulk_action: labels are for a label job, not a close job$"),
    (("resume",), {"reason": "why"}, r"^start_bulk_action: a reason is for a cancel job, not a resume job$"),
    (("delete",), {}, r"^start_bulk_action: a delete with no filter deletes every session: pass all=True"),
    (("delete",), {"filter": {}}, r"a delete with no filter"),
    (("label",), {"labels": ["a=b"]}, r"^start_bulk_action: labels must be a mapping of key to value, not list$"),
    (("label",), {"labels": {"a": 1}}, r"^start_bulk_action: labels: a label's key and value must be str"),
    (("close",), {"filter": {"state": "running"}}, r"^start_bulk_action: filter: unknown field 'state': want one of"),
    (("close",), {"filter": {"status": "asleep"}}, r"^start_bulk_action: filter status 'asleep': use idle, running"),
    (("close",), {"filter": {"status": 99}}, r"filter status must be a name or a types_pb2.SessionStatus, not 99$"),
    (("close",), {"filter": {"agent": 3}}, r"^start_bulk_action: filter agent must be a str, not 3$"),
    (("close",), {"filter": {"created_from_ms": -1}}, r"filter created_from_ms must be a whole number of Unix ms"),
    (("close",), {"filter": {"labels": "a=b"}}, r"^start_bulk_action: filter labels must be a mapping"),
    (("close",), {"filter": "label=a=b"}, r"^start_bulk_action: filter must be a sessions_pb2.BulkFilter or a dict"),
    (("cancel",), {"reason": None}, r"^start_bulk_action: reason must be a str, not None$"),
    (("cancel",), {"job_id": 5}, r"^start_bulk_action: job_id must be a str, not 5$"),
    (("delete",), {"all": "yes"}, r"^start_bulk_action: all must be a bool, not 'yes'$"),
])
def test_bad_input_is_refused_before_any_call(args, kwargs, want):
    async def body(client, fake):
        with pytest.raises(ValueError, match=want):
            await client.start_bulk_action(*args, **kwargs)
        return fake

    fake = _run(body)
    assert fake.starts == [] and fake.gets == []


@pytest.mark.parametrize("kwargs,want", [
    ({"interval": 0}, r"^wait_bulk_job: interval must be a number of seconds above 0, not 0$"),
    ({"interval": "1"}, r"^wait_bulk_job: interval must be a number of seconds above 0, not '1'$"),
    ({"timeout": -1}, r"^wait_bulk_job: timeout must be None or a number of seconds from 0, not -1$"),
])
def test_a_bad_wait_is_refused_before_any_call(kwargs, want):
    async def body(client, fake):
        with pytest.raises(ValueError, match=want):
            await client.wait_bulk_job("w", **kwargs)
        return fake

    assert _run(body).gets == []
