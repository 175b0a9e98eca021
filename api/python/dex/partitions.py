"""Where a call of a partitioned cluster is served (a port of api/wirerules).

A cluster of several partitions (``dexd --partitions N``) keeps each session
in one partition, each with its own leader: a root session in the partition
its id hashes to (:func:`partition_of`), a child in its parent's (an id Dex
draws for a child hashes there too). Any node serves any call, forwarding it
to the leader of the partition that serves it. :data:`SESSION_ROUTES`
mirrors the cluster's route table for the SessionService methods whose
request names that session, so that the connection can send the call to
the leader itself (:class:`dex.Connection`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

#: The route kinds that name a session (api/wirerules RouteKind): the
#: session the request names; the session of the Step it names; for a
#: create, the parent of a child, else the new session's id.
BY_SESSION = "BySession"
BY_STEP = "ByStep"
CREATE = "Create"

#: The field of a CreateSessionRequest naming a child's parent (wirerules.ParentField).
PARENT_FIELD = "parent_id"

_MAX_STEP = 2**64 - 1
_STEP_NUMBER = re.compile(r"(0|[1-9][0-9]*)")


@dataclass(frozen=True)
class Route:
    """How a method is routed: its kind and the request field holding the
    id that kind reads (for a create, the new session's id)."""

    kind: str
    field: str


#: The SessionService methods a partitioned cluster serves in the partition
#: of the session they name (api/wirerules/routes.go, Routes). Every other
#: method (ListSessions, ImportSession) goes to any node.
SESSION_ROUTES: dict[str, Route] = {
    "/dex.v1.SessionService/CreateSession": Route(CREATE, "session_id"),
    "/dex.v1.SessionService/SendMessage": Route(BY_SESSION, "session_id"),
    "/dex.v1.SessionService/GetSession": Route(BY_SESSION, "session_id"),
    "/dex.v1.SessionService/WatchSession": Route(BY_SESSION, "session_id"),
    "/dex.v1.SessionService/ResolveApproval": Route(BY_STEP, "step_id"),
    "/dex.v1.SessionService/AnswerQuestion": Route(BY_STEP, "step_id"),
    "/dex.v1.SessionService/ResumeSession": Route(BY_SESSION, "session_id"),
    "/dex.v1.SessionService/ReconcileOutcome": Route(BY_STEP, "step_id"),
    "/dex.v1.SessionService/DeleteSession": Route(BY_SESSION, "session_id"),
    "/dex.v1.SessionService/EditHistory": Route(BY_SESSION, "session_id"),
    "/dex.v1.SessionService/CancelSession": Route(BY_SESSION, "session_id"),
    "/dex.v1.SessionService/CloseSession": Route(BY_SESSION, "session_id"),
    "/dex.v1.SessionService/SetBudget": Route(BY_SESSION, "session_id"),
    "/dex.v1.SessionService/SetLabels": Route(BY_SESSION, "session_id"),
    "/dex.v1.SessionService/ForkSession": Route(BY_SESSION, "source_session_id"),
}


def partition_of(session_id: str, partitions: int) -> int:
    """The partition a root session of this id lives in, in a cluster of
    ``partitions`` partitions: FNV-1a (32 bits) of the id's UTF-8 bytes,
    modulo the count, as the cluster computes it."""
    if partitions <= 1:
        return 0
    h = 0x811C9DC5
    for byte in session_id.encode():
        h = ((h ^ byte) * 0x01000193) & 0xFFFFFFFF
    return h % partitions


def session_of_step(step_id: str) -> str:
    """The session a Step id ("SESSION-sN") names; "" for anything the
    cluster does not write as a Step id."""
    i = step_id.rfind("-s")
    if i <= 0:
        return ""
    number = step_id[i + 2:]
    if not _STEP_NUMBER.fullmatch(number) or int(number) > _MAX_STEP:
        return ""
    return step_id[:i]


def session_of_request(method: str, request: Any) -> str:
    """The session whose partition serves a call of ``method`` (its full
    gRPC name) with ``request``: the session, the Step's session, or for a
    create the parent or the new id. "" when the method names no session or
    the id is missing or malformed (the cluster answers it wherever it
    lands)."""
    route = SESSION_ROUTES.get(method)
    if route is None:
        return ""
    if route.kind == CREATE:
        return getattr(request, PARENT_FIELD, "") or getattr(request, route.field, "")
    named = getattr(request, route.field, "")
    return session_of_step(named) if route.kind == BY_STEP else named
