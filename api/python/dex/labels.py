"""Session labels and the cluster's search of sessions (docs/labels.md):
the checked requests of :class:`dex.Client`'s ``create_session(labels=)``,
``list_sessions``, ``list_sessions_page`` and ``set_labels``.

Only what is plainly wrong is refused here, with a ValueError naming the
method and the argument: a value of the wrong type, an empty label key, a
key given twice, an unknown status or order, a negative page size, time or
limit. The rules of a key's characters and a value's bytes, and the bounds
(32 labels, 63-byte keys, 256-byte values), are the cluster's: it answers
INVALID_ARGUMENT."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any, Iterable, Mapping, Optional, Union

from dex.v1 import sessions_pb2, types_pb2

#: The orders a list is read in, by the name list_sessions takes: by
#: creation time or by last update time (then by id).
ORDERS: dict[str, int] = {
    "created": sessions_pb2.SESSION_ORDER_CREATED,
    "updated": sessions_pb2.SESSION_ORDER_UPDATED,
}

#: A time bound: a datetime (a naive one is local time, as
#: ``datetime.timestamp`` reads it) or Unix milliseconds.
Time = Union[datetime, int]

_MAX_MS = 2**63 - 1
_MAX_PAGE = 2**32 - 1
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_MS = timedelta(milliseconds=1)
# The time bounds' arguments and the request field each fills.
_TIMES = (("created_after", "created_after_ms"), ("created_before", "created_before_ms"),
          ("updated_after", "updated_after_ms"), ("updated_before", "updated_before_ms"))


def label_list(method: str, arg: str, labels: Optional[Mapping[str, str]]) -> list:
    """``labels`` ({key: value}; None: none) as a request's labels, in the
    mapping's order. A ValueError for a value that is not a mapping, a key
    or value that is not a str, an empty key or a key given twice (a
    mapping whose items repeat a key, as a multi-dict may)."""
    if labels is None:
        return []
    if not isinstance(labels, Mapping):
        raise ValueError(f"{method}: {arg} must be a mapping of key to value, not {type(labels).__name__}")
    where = "" if arg == "labels" else f" in {arg}"
    out = []
    seen: set = set()
    for k, v in labels.items():
        if not isinstance(k, str):
            raise ValueError(f"{method}: a label key{where} must be a str, not {k!r}")
        if not k:
            raise ValueError(f"{method}: a label key{where} is empty")
        if k in seen:
            raise ValueError(f"{method}: label {k!r} is given twice{where}")
        if not isinstance(v, str):
            raise ValueError(f"{method}: label {k!r}'s value must be a str, not {v!r}")
        seen.add(k)
        out.append(types_pb2.Label(key=k, value=v))
    return out


def session_status(what: str, v: Any) -> int:
    """A session status by name ("running", any case) or as a
    types_pb2.SessionStatus number; ``what`` begins the ValueError."""
    if isinstance(v, str):
        name = "SESSION_STATUS_" + v.upper()
        if v and name in types_pb2.SessionStatus.keys():
            return types_pb2.SessionStatus.Value(name)
        raise ValueError(f"{what} {v!r}: use idle, running, waiting, errored, paused or closed")
    if isinstance(v, bool) or not isinstance(v, int) or v not in types_pb2.SessionStatus.values():
        raise ValueError(f"{what} must be a name or a types_pb2.SessionStatus, not {v!r}")
    return v


def _order(method: str, v: Any) -> int:
    if v is None:
        return sessions_pb2.SESSION_ORDER_UNSPECIFIED
    if isinstance(v, str):
        if v in ORDERS:
            return ORDERS[v]
        raise ValueError(f"{method}: order {v!r}: use {' or '.join(ORDERS)}")
    if isinstance(v, bool) or not isinstance(v, int) or v not in sessions_pb2.SessionOrder.values():
        raise ValueError(f"{method}: order must be None, {' or '.join(repr(k) for k in ORDERS)}, not {v!r}")
    return v


def unix_ms(method: str, arg: str, v: Any) -> int:
    """A time bound as Unix milliseconds (None: 0, no bound): a datetime,
    floored to its millisecond, or an int of milliseconds from 0."""
    if v is None:
        return 0
    if isinstance(v, datetime):
        try:
            ms = (v.astimezone(timezone.utc) - _EPOCH) // _MS
        except (OverflowError, OSError, ValueError) as e:
            raise ValueError(f"{method}: {arg} {v!r} is not a time the cluster can take ({e})") from None
    elif isinstance(v, int) and not isinstance(v, bool):
        ms = v
    else:
        raise ValueError(f"{method}: {arg} must be a datetime or Unix milliseconds (an int), not {v!r}")
    if not 0 <= ms <= _MAX_MS:
        raise ValueError(f"{method}: {arg} must be from 1970-01-01 UTC (Unix milliseconds from 0 to {_MAX_MS}), "
                         f"not {v!r}")
    return ms


def whole(what: str, v: Any, lo: int, hi: int) -> int:
    """v, an int from lo to hi; ``what`` begins the ValueError."""
    if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
        raise ValueError(f"{what} must be a whole number from {lo} to {hi}, not {v!r}")
    return v


def list_request(method: str, *, page_size: int = 0, page_token: str = "", status: Any = None, agent: str = "",
                 labels: Optional[Mapping[str, str]] = None, parent_id: str = "", forked_from: str = "",
                 created_after: Optional[Time] = None, created_before: Optional[Time] = None,
                 updated_after: Optional[Time] = None, updated_before: Optional[Time] = None,
                 order: Any = None, descending: bool = False) -> sessions_pb2.ListSessionsRequest:
    """The ListSessionsRequest of ``method``'s arguments, checked. Nothing
    given: an empty request, the list by id as before filters existed."""
    req = sessions_pb2.ListSessionsRequest(page_size=whole(f"{method}: page_size", page_size, 0, _MAX_PAGE))
    if not isinstance(page_token, str):
        raise ValueError(f"{method}: page_token must be a str, not {page_token!r}")
    req.page_token = page_token
    if status is not None:
        req.status = session_status(f"{method}: status", status)
    for arg, v in (("agent", agent), ("parent_id", parent_id), ("forked_from", forked_from)):
        if not isinstance(v, str):
            raise ValueError(f"{method}: {arg} must be a str, not {v!r}")
        setattr(req, arg, v)
    req.labels.extend(label_list(method, "labels", labels))
    given = {"created_after": created_after, "created_before": created_before, "updated_after": updated_after,
             "updated_before": updated_before}
    for arg, field in _TIMES:
        setattr(req, field, unix_ms(method, arg, given[arg]))
    req.order_by = _order(method, order)
    if not isinstance(descending, bool):
        raise ValueError(f"{method}: descending must be a bool, not {descending!r}")
    req.descending = descending
    return req


def set_labels_request(session_id: str, to_set: Optional[Mapping[str, str]],
                       remove: Iterable[str]) -> sessions_pb2.SetLabelsRequest:
    """The SetLabelsRequest of set_labels' arguments, checked: a session
    id, at least one label to set or key to remove, each key once."""
    method = "set_labels"
    if not isinstance(session_id, str):
        raise ValueError(f"{method}: session_id must be a str, not {session_id!r}")
    if not session_id:
        raise ValueError(f"{method}: session_id is empty: give the id of the session to label")
    put = label_list(method, "set", to_set)
    if isinstance(remove, (str, bytes)):
        raise ValueError(f"{method}: remove must be an iterable of label keys, not a {type(remove).__name__} "
                         f"({remove!r}): put one key in a list")
    try:
        keys = list(remove)
    except TypeError:
        raise ValueError(f"{method}: remove must be an iterable of label keys, not {type(remove).__name__}") from None
    setting = {lb.key for lb in put}
    seen: set = set()
    for k in keys:
        if not isinstance(k, str):
            raise ValueError(f"{method}: a label key in remove must be a str, not {k!r}")
        if not k:
            raise ValueError(f"{method}: a label key in remove is empty")
        if k in seen:
            raise ValueError(f"{method}: label {k!r} is given twice in remove")
        if k in setting:
            raise ValueError(f"{method}: label {k!r} is both in set and in remove")
        seen.add(k)
    if not put and not keys:
        raise ValueError(f"{method}: nothing to change: give labels to set ({{key: value}}) or keys to remove")
    return sessions_pb2.SetLabelsRequest(session_id=session_id, set=put, remove=keys)
