"""Bulk jobs (docs/bulk.md): one action on every session a filter matches,
carried out by the cluster a bounded page at a time. The calls of
:class:`dex.Client` (a port of api/client/bulk.go)."""

from __future__ import annotations

import asyncio
import secrets
import time
from typing import Any, Callable, Mapping, Optional, Union

import grpc

from dex.labels import session_status
from dex.v1 import sessions_pb2, types_pb2

#: The actions a job can take, by the name start_bulk_action takes.
BULK_ACTIONS: dict[str, int] = {
    "cancel": sessions_pb2.BULK_ACTION_CANCEL,
    "resume": sessions_pb2.BULK_ACTION_RESUME,
    "close": sessions_pb2.BULK_ACTION_CLOSE,
    "delete": sessions_pb2.BULK_ACTION_DELETE,
    "label": sessions_pb2.BULK_ACTION_LABEL,
}

# A filter's fields given as a dict: the whole-number ones (Unix ms).
_FILTER_TIMES = ("created_from_ms", "created_to_ms", "updated_from_ms", "updated_to_ms")
_FILTER_STRS = ("agent", "parent_id", "forked_from")
_FILTER_FIELDS = ("status", "labels") + _FILTER_STRS + _FILTER_TIMES
_MAX_MS = 2**63 - 1


def new_bulk_job_id() -> str:
    """A new random job id (start_bulk_action draws one when given none)."""
    return "bulk-" + secrets.token_hex(8)


def _labels(what: str, labels: Any) -> list:
    if not isinstance(labels, Mapping):
        raise ValueError(f"{what} must be a mapping of key to value, not {type(labels).__name__}")
    out = []
    for k, v in labels.items():
        if not isinstance(k, str) or not isinstance(v, str):
            raise ValueError(f"{what}: a label's key and value must be str, not {k!r}: {v!r}")
        out.append(types_pb2.Label(key=k, value=v))
    return out


def _status(v: Any) -> int:
    """A session status by name ("running") or as types_pb2's number."""
    return session_status("start_bulk_action: filter status", v)


def bulk_filter(f: Union[sessions_pb2.BulkFilter, Mapping[str, Any], None]) -> sessions_pb2.BulkFilter:
    """A job's filter from a BulkFilter or a dict of its fields (``labels``
    as ``{key: value}``, ``status`` by name); a ValueError naming a field
    that is unknown or of the wrong type."""
    if f is None:
        return sessions_pb2.BulkFilter()
    if isinstance(f, sessions_pb2.BulkFilter):
        return f
    if not isinstance(f, Mapping):
        raise ValueError(f"start_bulk_action: filter must be a sessions_pb2.BulkFilter or a dict, not {type(f).__name__}")
    out = sessions_pb2.BulkFilter()
    for k, v in f.items():
        if k not in _FILTER_FIELDS:
            raise ValueError(f"start_bulk_action: filter: unknown field {k!r}: want one of {', '.join(_FILTER_FIELDS)}")
        if k == "status":
            out.status = _status(v)
        elif k == "labels":
            out.labels.extend(_labels("start_bulk_action: filter labels", v))
        elif k in _FILTER_STRS:
            if not isinstance(v, str):
                raise ValueError(f"start_bulk_action: filter {k} must be a str, not {v!r}")
            setattr(out, k, v)
        else:
            if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= _MAX_MS:
                raise ValueError(f"start_bulk_action: filter {k} must be a whole number of Unix ms from 0, not {v!r}")
            setattr(out, k, v)
    return out


def bulk_request(action: str, filter: Any, labels: Optional[Mapping[str, str]], reason: str, all: bool,
                 job_id: str) -> sessions_pb2.StartBulkActionRequest:
    """The request start_bulk_action sends, checked as the cluster checks
    it (docs/bulk.md) so that a bad one fails before any call."""
    if action not in BULK_ACTIONS:
        raise ValueError(f"start_bulk_action: action {action!r}: use {', '.join(BULK_ACTIONS)}")
    f = bulk_filter(filter)
    if not isinstance(reason, str):
        raise ValueError(f"start_bulk_action: reason must be a str, not {reason!r}")
    if not isinstance(job_id, str):
        raise ValueError(f"start_bulk_action: job_id must be a str, not {job_id!r}")
    if not isinstance(all, bool):
        raise ValueError(f"start_bulk_action: all must be a bool, not {all!r}")
    if action == "label" and not labels:
        raise ValueError("start_bulk_action: a label job needs labels ({key: value}) to set")
    if action != "label" and labels:
        raise ValueError(f"start_bulk_action: labels are for a label job, not a {action} job")
    if reason and action != "cancel":
        raise ValueError(f"start_bulk_action: a reason is for a cancel job, not a {action} job")
    if action == "delete" and f == sessions_pb2.BulkFilter() and not all:
        raise ValueError("start_bulk_action: a delete with no filter deletes every session: pass all=True to mean it")
    return sessions_pb2.StartBulkActionRequest(
        action=BULK_ACTIONS[action], filter=f, labels=_labels("start_bulk_action: labels", labels or {}),
        reason=reason, all=all, job_id=job_id or new_bulk_job_id())


class BulkCalls:
    """The bulk job calls of :class:`dex.Client` (which gives ``_call``)."""

    _call: Callable[..., Any]

    async def start_bulk_action(self, action: str, *,
                                filter: Union[sessions_pb2.BulkFilter, Mapping[str, Any], None] = None,
                                labels: Optional[Mapping[str, str]] = None, reason: str = "", all: bool = False,
                                job_id: str = "") -> sessions_pb2.BulkJob:
        """Starts a bulk job (docs/bulk.md): ``action`` ("cancel", "resume",
        "close", "delete" or "label") on every session ``filter`` matches
        that was created up to the job's start. ``filter`` is a
        ``sessions_pb2.BulkFilter`` or a dict of its fields: ``status``
        ("running", ...), ``agent``, ``parent_id``, ``forked_from``,
        ``labels`` ({key: value}, all of them) and ``created_from_ms`` /
        ``created_to_ms`` / ``updated_from_ms`` / ``updated_to_ms`` (Unix
        ms, from inclusive, to exclusive). ``labels`` are the ones a label
        job sets; ``reason`` is what a cancel job's note gives; a delete
        with no filter needs ``all=True``. Returns the job as it started
        (see wait_bulk_job).

        The client draws ``job_id`` when none is given, so the call is
        retried: a repeat that finds the job an earlier try started returns
        it. A refused start (INVALID_ARGUMENT, ALREADY_EXISTS for a taken
        id, FAILED_PRECONDITION when 100 jobs run) is raised as a
        ``grpc.RpcError`` and started nothing. An unknown action or filter
        field, labels or a reason on a job that takes none, a label job
        without labels or a delete of everything without ``all`` raises
        ValueError before any call."""
        req = bulk_request(action, filter, labels, reason, all, job_id)
        tries = [0]
        try:
            return (await self._call("StartBulkAction", req, True, tries)).job
        except grpc.RpcError as e:
            if tries[0] > 1 and e.code() == grpc.StatusCode.ALREADY_EXISTS:
                # An earlier try may have started the job before its answer
                # was lost: the job of this id is ours if it is this action.
                try:
                    got = await self.get_bulk_job(req.job_id)
                except grpc.RpcError:
                    raise e from None
                if got.action == req.action:
                    return got
            raise

    async def get_bulk_job(self, job_id: str) -> sessions_pb2.BulkJob:
        """A job and its progress: ``status``, ``acted``, ``skipped`` (by
        why), ``failed``. An unknown id is NOT_FOUND."""
        return (await self._call("GetBulkJob", sessions_pb2.GetBulkJobRequest(job_id=job_id), True)).job

    async def list_bulk_jobs(self) -> list[sessions_pb2.BulkJob]:
        """The jobs the cluster keeps (running or ended), newest first."""
        return list((await self._call("ListBulkJobs", sessions_pb2.ListBulkJobsRequest(), True)).jobs)

    async def cancel_bulk_job(self, job_id: str) -> sessions_pb2.BulkJob:
        """Stops a running job: the sessions already acted on stay as they
        are, no further one is. A job that ended is left as it is, so the
        call is retried. Returns the job."""
        return (await self._call("CancelBulkJob", sessions_pb2.CancelBulkJobRequest(job_id=job_id), True)).job

    async def wait_bulk_job(self, job_id: str, *, interval: float = 1.0, timeout: Optional[float] = None,
                            progress: Optional[Callable[[sessions_pb2.BulkJob], None]] = None) -> sessions_pb2.BulkJob:
        """Reads the job every ``interval`` seconds until it is no longer
        running (done or cancelled) and returns it as it ended, calling
        ``progress`` (when given) with each read. After ``timeout`` seconds
        (None: no limit) with the job still running it raises TimeoutError;
        the job runs on. An ``interval`` that is not above 0 or a
        ``timeout`` below 0 raises ValueError before any call."""
        if isinstance(interval, bool) or not isinstance(interval, (int, float)) or not interval > 0:
            raise ValueError(f"wait_bulk_job: interval must be a number of seconds above 0, not {interval!r}")
        if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout >= 0):
            raise ValueError(f"wait_bulk_job: timeout must be None or a number of seconds from 0, not {timeout!r}")
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            job = await self.get_bulk_job(job_id)
            if progress is not None:
                progress(job)
            if job.status != sessions_pb2.BULK_JOB_STATUS_RUNNING:
                return job
            wait = interval
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"bulk job {job_id} still running after {timeout}s "
                                       f"({job.acted} acted on, {job.steps} steps)")
                wait = min(wait, left)
            await asyncio.sleep(wait)
