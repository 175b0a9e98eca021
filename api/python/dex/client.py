"""A client of the SessionService (a port of api/client/client.go).

Reads and idempotent writes are retried across Unavailable (a takeover, a
follower) until ``timeout`` runs out; other writes are repeated only when a
node answered that it is not the leader (nothing was changed).

On a cluster of several partitions a call that names a session (or a Step,
or a create's parent or id) goes to the leader of the session's partition
once the connection has learned it (dex.partitions, dex.Connection).
"""

from __future__ import annotations

import asyncio
import secrets
import time
from typing import Any, AsyncIterator, Iterable, Mapping, Optional, Union

import grpc

from dex.bulk import BulkCalls
from dex.connection import LEADER_METADATA_KEY, Connection, TLSFiles, trailer_value
from dex.labels import Time, label_list, list_request, set_labels_request, whole
from dex.partitions import session_of_request
from dex.stream import LiveOffsets
from dex.v1 import schedules_pb2, schedules_pb2_grpc, sessions_pb2, sessions_pb2_grpc, types_pb2
from dex.worker import _Backoff, _transient

_Stub = sessions_pb2_grpc.SessionServiceStub
_SERVICE = "/dex.v1.SessionService/"
# Schedules (docs/schedules.md) live in partition 0; any node forwards there.
_ScheduleStub = schedules_pb2_grpc.ScheduleServiceStub
_OVERLAPS = {"skip": schedules_pb2.SCHEDULE_OVERLAP_SKIP, "queue_one": schedules_pb2.SCHEDULE_OVERLAP_QUEUE_ONE,
             "allow": schedules_pb2.SCHEDULE_OVERLAP_ALLOW}
_CATCH_UPS = {"skip": schedules_pb2.SCHEDULE_CATCH_UP_SKIP, "latest": schedules_pb2.SCHEDULE_CATCH_UP_LATEST,
              "all": schedules_pb2.SCHEDULE_CATCH_UP_ALL}

# The largest archive object a cluster imports, and the size of the chunks
# import_session sends it in (the cluster takes up to 1 MiB each).
MAX_IMPORT = 256 << 20
_IMPORT_CHUNK = 256 << 10


def new_session_id() -> str:
    """A new random session id (pick it yourself to retry CreateSession)."""
    return "ses-" + secrets.token_hex(8)


def new_idempotency_key() -> str:
    return "key-" + secrets.token_hex(16)


#: Dispatch order (docs/flow-control.md): a session's priority, from 1
#: (lowest) to 5, and its fairness weight, from 1 to 1,000; 0 for either is
#: the parent's, else the default (priority 3, weight 1). A fairness key is
#: at most 256 bytes.
MAX_PRIORITY = 5
MAX_FAIRNESS_WEIGHT = 1000
MAX_FAIRNESS_KEY = 256

#: A budget's fields (docs/budgets.md) and the largest value of each.
BUDGET_FIELDS: dict[str, int] = {
    "max_tokens": 2**64 - 1,
    "max_cost_micros": 2**64 - 1,
    "max_turns": 2**64 - 1,
    "max_model_calls_per_turn": 2**32 - 1,
    "max_tool_calls_per_turn": 2**32 - 1,
    "loop_limit": 2**32 - 1,
}


def _budget_fields(what: str, fields: dict) -> dict:
    """fields checked as a budget's: known names, whole numbers in range."""
    unknown = [k for k in fields if k not in BUDGET_FIELDS]
    if unknown:
        raise ValueError(f"{what}: unknown field {unknown[0]!r}: want one of {', '.join(BUDGET_FIELDS)}")
    return {k: whole(f"{what} {k}", v, 0, BUDGET_FIELDS[k]) for k, v in fields.items()}


def _check_dispatch_order(priority: int, fairness_key: str, fairness_weight: int) -> None:
    if priority != 0:
        whole("priority", priority, 1, MAX_PRIORITY)
    if fairness_weight != 0:
        whole("fairness_weight", fairness_weight, 1, MAX_FAIRNESS_WEIGHT)
    if not isinstance(fairness_key, str):
        raise ValueError(f"fairness_key must be a str, not {fairness_key!r}")
    if len(fairness_key.encode()) > MAX_FAIRNESS_KEY:
        raise ValueError(f"fairness_key is longer than {MAX_FAIRNESS_KEY} bytes")


#: The largest history seq (a uint64 on the wire).
MAX_SEQ = 2**64 - 1


def _str(what: str, v: Any) -> str:
    if not isinstance(v, str):
        raise ValueError(f"{what} must be a str, not {v!r}")
    return v


def _fork_labels(labels: Optional[Mapping[str, str]]) -> list:
    """A fork's labels ({key: value}) as the request's; None: the source's.
    The cluster checks the keys and values (docs/labels.md)."""
    if isinstance(labels, Mapping) and not labels:
        # An empty list on the wire keeps the source's labels: say so
        # rather than keep them when asked for none.
        raise ValueError("fork_session: labels is empty: a fork has the source's labels (None) or the ones given; "
                         "it cannot drop them all")
    return label_list("fork_session", "labels", labels)


def _not_applied(err: grpc.RpcError) -> bool:
    return err.code() == grpc.StatusCode.UNAVAILABLE and bool(trailer_value(err, LEADER_METADATA_KEY))


class Client(BulkCalls):
    """Sessions, forks, labels and the search of sessions (dex.labels),
    messages, approvals, answers, resume, reconcile, history edits, cancel,
    close, delete, schedules and bulk jobs (dex.bulk).

    ``target`` as for :class:`dex.Worker`. ``timeout`` (seconds) bounds one
    method call with its retries."""

    def __init__(self, target: Union[str, Connection], *, token: Optional[str] = None,
                 tls: Optional[TLSFiles] = None, timeout: float = 30.0, try_timeout: float = 5.0) -> None:
        self._own = not isinstance(target, Connection)
        self.conn = target if isinstance(target, Connection) else Connection(target, token=token, tls=tls)
        self.timeout = timeout
        self.try_timeout = try_timeout

    async def close(self) -> None:
        if self._own:
            await self.conn.close()

    async def __aenter__(self) -> "Client":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    async def _call(self, method: str, req: Any, idempotent: bool, tries_out: Optional[list] = None,
                    try_timeout: Optional[float] = None, stub: Any = _Stub) -> Any:
        deadline = time.monotonic() + self.timeout
        b = _Backoff()
        tries = 0
        session = session_of_request(_SERVICE + method, req) if stub is _Stub else ""
        while True:
            tries += 1
            if tries_out is not None:
                tries_out[0] = tries
            left = deadline - time.monotonic()
            try:
                return await self.conn.unary(stub, method, req, max(min(try_timeout or self.try_timeout, left), 0.01),
                                             session=session)
            except grpc.RpcError as e:
                retry = _not_applied(e) or (idempotent and _transient(e))
                if not retry or time.monotonic() >= deadline:
                    raise
                if tries > 1:
                    await asyncio.sleep(b.next())

    async def create_session(self, message: str = "", *, session_id: str = "", parent_id: str = "",
                             compaction_threshold: int = 0, idempotency_key: str = "", agent: str = "",
                             retention_ms: int | None = None,
                             budget: types_pb2.Budget | dict | None = None, priority: int = 0,
                             fairness_key: str = "", fairness_weight: int = 0,
                             labels: Optional[Mapping[str, str]] = None) -> types_pb2.Session:
        """Creates a session, optionally with its first message. With a
        session_id the call is idempotent and retried. ``agent`` names the
        agent that runs it (NAME or NAME@VERSION; "": the parent's, or the
        default agent): only a Worker of that agent runs its model.
        ``retention_ms`` is how long the session is kept once closed (0: for
        ever); None leaves it to the cluster's retention for its agent.

        ``budget`` (a ``types_pb2.Budget`` or a dict of its fields, e.g.
        ``{"max_tokens": 100000}``): each field given (non-zero) replaces the
        agent's default budget (docs/budgets.md). ``priority`` (1 lowest to
        5 highest), ``fairness_key`` and ``fairness_weight`` (1 to 1,000)
        order its dispatch (docs/flow-control.md); 0 and "" are the parent's,
        else priority 3, no key, weight 1. ``labels`` (``{key: value}``;
        None: none) are the session's labels (docs/labels.md); the cluster
        checks their keys and values. A bad one, a label that is not a str
        pair, an empty key or a key given twice raises ValueError before
        any call."""
        _check_dispatch_order(priority, fairness_key, fairness_weight)
        put = label_list("create_session", "labels", labels)
        if isinstance(budget, dict):
            budget = types_pb2.Budget(**_budget_fields("budget", budget))
        elif budget is not None and not isinstance(budget, types_pb2.Budget):
            raise ValueError(f"budget must be a types_pb2.Budget or a dict, not {type(budget).__name__}")
        req = sessions_pb2.CreateSessionRequest(session_id=session_id, parent_id=parent_id, message=message, agent=agent,
                                                compaction_threshold=compaction_threshold,
                                                idempotency_key=idempotency_key or (new_idempotency_key() if message else ""),
                                                budget=budget, priority=priority, fairness_key=fairness_key,
                                                fairness_weight=fairness_weight, labels=put)
        if retention_ms is not None:
            req.retention_ms = retention_ms
        tries = [0]
        try:
            return (await self._call("CreateSession", req, bool(session_id), tries)).session
        except grpc.RpcError as e:
            if session_id and tries[0] > 1 and e.code() == grpc.StatusCode.ALREADY_EXISTS:
                # An earlier try committed before its answer was lost.
                return (await self.get_session(session_id)).session
            raise

    async def create_schedule(self, schedule_id: str, *, cron: str = "", time_zone: str = "", interval_ms: int = 0,
                              message: str = "", agent: str = "", labels: Optional[Mapping[str, str]] = None,
                              overlap: str = "skip", catch_up: str = "skip",
                              paused: bool = False) -> schedules_pb2.Schedule:
        """Creates a schedule (docs/schedules.md): a session from the
        template (``agent``, ``message``, ``labels``) at each slot of
        ``cron`` in ``time_zone`` (IANA; "": UTC) or of ``interval_ms``.
        ``overlap``: "skip", "queue_one" or "allow"; ``catch_up``: "skip",
        "latest" or "all". Retried: a repeat that finds the schedule an
        earlier try created returns it. A bad spec is raised as
        INVALID_ARGUMENT; an unknown policy name raises ValueError before
        any call."""
        if overlap not in _OVERLAPS:
            raise ValueError(f"create_schedule: overlap {overlap!r}: use skip, queue_one or allow")
        if catch_up not in _CATCH_UPS:
            raise ValueError(f"create_schedule: catch_up {catch_up!r}: use skip, latest or all")
        req = schedules_pb2.CreateScheduleRequest(
            schedule_id=schedule_id, cron=cron, time_zone=time_zone, interval_ms=interval_ms, message=message,
            agent=agent, labels=[types_pb2.Label(key=k, value=v) for k, v in (labels or {}).items()],
            overlap=_OVERLAPS[overlap], catch_up=_CATCH_UPS[catch_up], paused=paused)
        tries = [0]
        try:
            return (await self._call("CreateSchedule", req, True, tries, stub=_ScheduleStub)).schedule
        except grpc.RpcError as e:
            if tries[0] > 1 and e.code() == grpc.StatusCode.ALREADY_EXISTS:
                got = await self.get_schedule(schedule_id)
                if (got.cron, got.interval_ms, got.message) == (cron, interval_ms, message):
                    return got
            raise

    async def get_schedule(self, schedule_id: str) -> schedules_pb2.Schedule:
        req = schedules_pb2.GetScheduleRequest(schedule_id=schedule_id)
        return (await self._call("GetSchedule", req, True, stub=_ScheduleStub)).schedule

    async def list_schedules(self) -> list[schedules_pb2.Schedule]:
        """Every schedule, by id."""
        resp = await self._call("ListSchedules", schedules_pb2.ListSchedulesRequest(), True, stub=_ScheduleStub)
        return list(resp.schedules)

    async def pause_schedule(self, schedule_id: str) -> schedules_pb2.Schedule:
        req = schedules_pb2.PauseScheduleRequest(schedule_id=schedule_id)
        return (await self._call("PauseSchedule", req, True, stub=_ScheduleStub)).schedule

    async def resume_schedule(self, schedule_id: str) -> schedules_pb2.Schedule:
        """Resumes at the first slot after now."""
        req = schedules_pb2.ResumeScheduleRequest(schedule_id=schedule_id)
        return (await self._call("ResumeSchedule", req, True, stub=_ScheduleStub)).schedule

    async def delete_schedule(self, schedule_id: str) -> None:
        """Deletes a schedule (its sessions stay); a retried delete that
        finds it gone succeeds."""
        tries = [0]
        try:
            await self._call("DeleteSchedule", schedules_pb2.DeleteScheduleRequest(schedule_id=schedule_id), True,
                             tries, stub=_ScheduleStub)
        except grpc.RpcError as e:
            if not (tries[0] > 1 and e.code() == grpc.StatusCode.NOT_FOUND):
                raise

    async def trigger_schedule(self, schedule_id: str) -> str:
        """Starts one session of the schedule now; returns its id. Not
        idempotent: repeated only when a node refused it unread."""
        req = schedules_pb2.TriggerScheduleRequest(schedule_id=schedule_id)
        return (await self._call("TriggerSchedule", req, False, stub=_ScheduleStub)).session_id

    async def fork_session(self, source_session_id: str, at_seq: int, *, message: str = "",
                           labels: Optional[Mapping[str, str]] = None, agent: str = "",
                           session_id: str = "") -> types_pb2.Session:
        """Creates a session whose history is a copy of the source's up to
        and including entry ``at_seq`` (docs/forks.md): nothing runs again.
        Returns the fork, which names its source in ``forked_from`` and
        ``forked_at_seq`` and lives in the source's partition. With a
        ``message`` the fork starts its first turn with it. ``labels``
        (``{key: value}``) and ``agent`` replace the source's; None and ""
        keep them.

        With a ``session_id`` (one of the source's partition) the call is
        idempotent and retried: a repeat that finds the fork an earlier try
        made returns it. Without one the cluster picks the id and the call
        is repeated only when a node refused it unread. A refused fork
        (NOT_FOUND, INVALID_ARGUMENT, FAILED_PRECONDITION, ...) is raised as
        a ``grpc.RpcError`` and changed nothing. An empty source id, an
        ``at_seq`` that is not a whole number from 1, empty labels or a
        value that is not a str raises ValueError before any call."""
        if not _str("fork_session: source_session_id", source_session_id):
            raise ValueError("fork_session: source_session_id is empty: give the id of the session to fork")
        whole("fork_session: at_seq", at_seq, 1, MAX_SEQ)
        req = sessions_pb2.ForkSessionRequest(source_session_id=source_session_id, at_seq=at_seq,
                                              message=_str("fork_session: message", message),
                                              labels=_fork_labels(labels), agent=_str("fork_session: agent", agent),
                                              session_id=_str("fork_session: session_id", session_id))
        tries = [0]
        try:
            return (await self._call("ForkSession", req, bool(session_id), tries)).session
        except grpc.RpcError as e:
            if session_id and tries[0] > 1 and e.code() == grpc.StatusCode.ALREADY_EXISTS:
                # An earlier try may have committed before its answer was
                # lost: the session of this id is ours if it is this fork.
                try:
                    got = (await self.get_session(session_id)).session
                except grpc.RpcError:
                    raise e from None
                if got.forked_from == source_session_id and got.forked_at_seq == at_seq:
                    return got
            raise

    async def set_budget(self, session_id: str, *, max_tokens: Optional[int] = None,
                         max_cost_micros: Optional[int] = None, max_turns: Optional[int] = None,
                         max_model_calls_per_turn: Optional[int] = None,
                         max_tool_calls_per_turn: Optional[int] = None,
                         loop_limit: Optional[int] = None) -> types_pb2.Session:
        """Changes the fields given of a session's budget (0: no limit); the
        others keep their values. Returns the session with its new budget. A
        session paused by its budget stays paused: resume it to continue.
        No field, or one out of range, raises ValueError before any call.
        The call sets values, so a repeat changes nothing and it is retried."""
        given = {k: v for k, v in (("max_tokens", max_tokens), ("max_cost_micros", max_cost_micros),
                                   ("max_turns", max_turns), ("max_model_calls_per_turn", max_model_calls_per_turn),
                                   ("max_tool_calls_per_turn", max_tool_calls_per_turn), ("loop_limit", loop_limit))
                 if v is not None}
        if not given:
            raise ValueError(f"set_budget: give at least one of {', '.join(BUDGET_FIELDS)}")
        change = types_pb2.BudgetChange(**_budget_fields("set_budget", given))
        resp = await self._call("SetBudget", sessions_pb2.SetBudgetRequest(session_id=session_id, change=change), True)
        return resp.session

    async def send_message(self, session_id: str, text: str, idempotency_key: str = "") -> bool:
        """Delivers text once (the same key on every retry). Returns whether
        the cluster had already seen the key."""
        req = sessions_pb2.SendMessageRequest(session_id=session_id, text=text,
                                              idempotency_key=idempotency_key or new_idempotency_key())
        tries = [0]
        resp = await self._call("SendMessage", req, True, tries)
        return resp.duplicate and tries[0] == 1

    async def get_session(self, session_id: str) -> sessions_pb2.GetSessionResponse:
        """A session with its whole history and all its Steps (every page)."""
        req = sessions_pb2.GetSessionRequest(session_id=session_id)
        history: list = []
        steps: list = []
        history_done = steps_done = False
        while True:
            resp = await self._call("GetSession", req, True)
            if not history_done:
                history.extend(resp.session.history)
            if not steps_done:
                steps.extend(resp.steps)
            history_done = history_done or resp.next_history_after_seq == 0
            steps_done = steps_done or resp.next_steps_after == 0
            if history_done and steps_done:
                break
            # A part already read whole is asked for from its end.
            req = sessions_pb2.GetSessionRequest(session_id=session_id, history_after_seq=resp.next_history_after_seq,
                                                 steps_after=resp.next_steps_after)
            if history_done and history:
                req.history_after_seq = history[-1].seq
            if steps_done and steps:
                req.steps_after = steps[-1].number
        del resp.session.history[:]
        resp.session.history.extend(history)
        del resp.steps[:]
        resp.steps.extend(steps)
        resp.next_history_after_seq = resp.next_steps_after = 0
        return resp

    async def list_sessions(self, *, status: Any = None, agent: str = "", labels: Optional[Mapping[str, str]] = None,
                            parent_id: str = "", forked_from: str = "", created_after: Optional[Time] = None,
                            created_before: Optional[Time] = None, updated_after: Optional[Time] = None,
                            updated_before: Optional[Time] = None, order: Optional[str] = None,
                            descending: bool = False, limit: int = 0) -> list[sessions_pb2.SessionSummary]:
        """The summaries of the sessions that match every filter given
        (docs/labels.md), reading page after page until the cluster's token
        is empty or ``limit`` summaries are read (0: all of them).

        ``status``: a ``types_pb2.SessionStatus`` or its name ("idle",
        "running", ...); ``agent``; ``labels`` ({key: value}, all of them);
        ``parent_id`` (its children); ``forked_from`` (its forks);
        ``created_after`` / ``created_before`` and ``updated_after`` /
        ``updated_before``: a datetime (naive: local time) or Unix
        milliseconds, after inclusive, before exclusive. ``order``:
        "created" or "updated" (None: by id with no filter, else by
        creation), ``descending``: newest first. With nothing given, every
        session by id. A filtered page may hold fewer sessions than asked,
        even none, and still have a token: the list is read on until the
        token is empty. Each page is retried as a read. A value of the
        wrong type, an unknown status or order, an empty or repeated label
        key, or a negative time or limit raises ValueError before any call;
        what the cluster refuses (a bad label key, a range whose after is
        later than its before) is raised as INVALID_ARGUMENT."""
        req = list_request("list_sessions", status=status, agent=agent, labels=labels, parent_id=parent_id,
                           forked_from=forked_from, created_after=created_after, created_before=created_before,
                           updated_after=updated_after, updated_before=updated_before, order=order,
                           descending=descending)
        whole("list_sessions: limit", limit, 0, 2**63 - 1)
        out: list = []
        while True:
            if limit:
                # Ask for no more than is left to read (a uint32 on the wire).
                req.page_size = min(limit - len(out), 2**32 - 1)
            resp = await self._call("ListSessions", req, True)
            out.extend(resp.sessions)
            if limit and len(out) >= limit:
                return out[:limit]
            if not resp.next_page_token:
                return out
            req.page_token = resp.next_page_token

    async def list_sessions_page(self, *, page_size: int = 0, page_token: str = "", status: Any = None,
                                 agent: str = "", labels: Optional[Mapping[str, str]] = None, parent_id: str = "",
                                 forked_from: str = "", created_after: Optional[Time] = None,
                                 created_before: Optional[Time] = None, updated_after: Optional[Time] = None,
                                 updated_before: Optional[Time] = None, order: Optional[str] = None,
                                 descending: bool = False) -> sessions_pb2.ListSessionsResponse:
        """One page of the list, as the cluster answers it: ``sessions``
        and ``next_page_token`` (empty: the list ends). ``page_size``: at
        most this many (0: the cluster's default page); ``page_token``: the
        token of the page before ("": the first). The filters and order are
        list_sessions'; give the same order and direction with a token (the
        cluster refuses a token of another order). A page may hold fewer
        sessions than asked, even none, with a token: read on. Retried as a
        read; bad input (a negative page size too) raises ValueError before
        any call."""
        req = list_request("list_sessions_page", page_size=page_size, page_token=page_token, status=status,
                           agent=agent, labels=labels, parent_id=parent_id, forked_from=forked_from,
                           created_after=created_after, created_before=created_before, updated_after=updated_after,
                           updated_before=updated_before, order=order, descending=descending)
        return await self._call("ListSessions", req, True)

    async def set_labels(self, session_id: str, set: Optional[Mapping[str, str]] = None,
                         remove: Iterable[str] = ()) -> types_pb2.Session:
        """Changes a session's labels (docs/labels.md): the keys of
        ``remove`` go, then the labels of ``set`` ({key: value}) are put, a
        key already there taking the new value; returns the session with
        its labels. The end state does not depend on repeats, so the call
        is retried. An empty session id, nothing to set or remove, a label
        that is not a str pair, an empty key, a key given twice or both set
        and removed, or a ``remove`` that is a str raises ValueError before
        any call; the cluster's refusals (INVALID_ARGUMENT for a bad key or
        value or more than 32 labels, NOT_FOUND) change nothing."""
        req = set_labels_request(session_id, set, remove)
        return (await self._call("SetLabels", req, True)).session

    async def watch(self, session_id: str, after_seq: int = 0, *,
                    live_output: bool = False) -> AsyncIterator[types_pb2.Event]:
        """The session's events after after_seq, resuming across takeovers
        from the last one delivered. Stop iterating to end it.

        ``live_output``: the running attempts' live output too
        (docs/design/streaming.md), as events of seq 0 and type "output"
        (``ev.output``: the attempt, the byte offset, the text),
        "output_ended" (the committed result replaces the stream) and
        "output_abandoned" (the attempt failed; its retry streams afresh).
        Across reconnections, a takeover or a watch that fell behind
        included, each attempt's output resumes from where it was: every
        byte once, in order, and each attempt's end once."""
        last = after_seq
        live = LiveOffsets() if live_output else None
        b = _Backoff()
        while True:
            req = sessions_pb2.WatchSessionRequest(session_id=session_id, after_seq=last)
            if live is not None:
                req.live_output = True
                req.output_offsets.extend(live.request())
            # A watch is served in its session's partition (BySession).
            addr, call = await self.conn.stream(_Stub, "WatchSession", req, session=session_id)
            try:
                async for ev in call:
                    b = _Backoff()
                    if ev.seq != 0 and ev.seq <= last:
                        continue  # already delivered
                    if live is not None and ev.HasField("output"):
                        ev = live.trim(ev)
                        if ev is None:
                            continue  # output or end already delivered
                    last = max(last, ev.seq)
                    yield ev
            except grpc.RpcError as e:
                self.conn.stream_failed(addr, e, session=session_id)
                # A live watch that fell behind resumes from the offsets it holds.
                behind = live is not None and e.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
                if not _transient(e) and not behind:
                    raise
            finally:
                call.cancel()
            await asyncio.sleep(b.next())

    async def resolve_approval(self, step_id: str, approved: bool, reason: str = "") -> None:
        await self._call("ResolveApproval", sessions_pb2.ResolveApprovalRequest(step_id=step_id, approved=approved,
                                                                                reason=reason), False)

    async def answer_question(self, step_id: str, answer: str) -> None:
        await self._call("AnswerQuestion", sessions_pb2.AnswerQuestionRequest(step_id=step_id, answer=answer), False)

    async def resume(self, session_id: str, choice: int = types_pb2.RESUME_CHOICE_RETRY) -> None:
        """Resumes a paused or errored session (RESUME_CHOICE_RETRY or _DROP)."""
        await self._call("ResumeSession", sessions_pb2.ResumeSessionRequest(session_id=session_id, choice=choice), False)

    async def reconcile_outcome(self, step_id: str, outcome: int, note: str = "") -> None:
        """Settles an outcome_unknown call as types_pb2.OUTCOME_SUCCEEDED or
        OUTCOME_FAILED; note is added to the history note the model reads."""
        await self._call("ReconcileOutcome", sessions_pb2.ReconcileOutcomeRequest(step_id=step_id, outcome=outcome,
                                                                                  note=note), False)

    async def edit_history(self, session_id: str, truncate_from_seq: int = 0,
                           note: str = "") -> sessions_pb2.EditHistoryResponse:
        """Splices an idle, errored or paused session's history: drops the
        entries from truncate_from_seq on (0: none) and adds note (if any).
        It clears the rejected-turn count. A retry after an ambiguous failure
        could add the note twice, so it is not retried."""
        return await self._call("EditHistory", sessions_pb2.EditHistoryRequest(
            session_id=session_id, truncate_from_seq=truncate_from_seq, note=note), False)

    async def cancel(self, session_id: str, reason: str = "", by: str = "") -> sessions_pb2.CancelSessionResponse:
        """Cancels the session's running turn."""
        return await self._call("CancelSession", sessions_pb2.CancelSessionRequest(session_id=session_id, by=by,
                                                                                   reason=reason), False)

    async def close_session(self, session_id: str) -> types_pb2.Session:
        """Closes a session: it takes no more messages and can still be read.
        One in a turn is closing until the turn ends (the session returned is
        still running or waiting). A close of a closed session succeeds, so
        the call is retried."""
        resp = await self._call("CloseSession", sessions_pb2.CloseSessionRequest(session_id=session_id), True)
        return resp.session

    async def import_session(self, data: bytes) -> sessions_pb2.ImportSessionResponse:
        """Brings an archived session back into the cluster: ``data`` is the
        archive object (``dexctl session export``, or the archive's file).
        The answer names the session and counts its history entries, Steps
        and events. The cluster verifies the whole object first:
        INVALID_ARGUMENT for a damaged or foreign one, FAILED_PRECONDITION
        for a session that was in a turn when it was exported,
        ALREADY_EXISTS for an id it holds. An import cut by a change of
        leader raises ABORTED and is discarded by the new leader: send it
        again. The call is repeated only when a node refused it unread; one
        try may take the client's whole timeout."""
        if len(data) > MAX_IMPORT:
            raise ValueError(f"an archived session to import is at most {MAX_IMPORT} bytes (256 MiB), got {len(data)}")
        # A list, not a generator: a repeat sends the same chunks again.
        chunks = [sessions_pb2.ImportSessionRequest(chunk=data[i:i + _IMPORT_CHUNK])
                  for i in range(0, len(data), _IMPORT_CHUNK)]
        return await self._call("ImportSession", chunks, False, try_timeout=self.timeout)

    async def delete(self, session_id: str) -> None:
        """Deletes an idle, paused, errored or closed session. NotFound on a retry
        counts as done."""
        tries = [0]
        try:
            await self._call("DeleteSession", sessions_pb2.DeleteSessionRequest(session_id=session_id), True, tries)
        except grpc.RpcError as e:
            if not (tries[0] > 1 and e.code() == grpc.StatusCode.NOT_FOUND):
                raise
