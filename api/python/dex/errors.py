"""Error types of model failures, and the not-run prefix of tool calls.

A port of api/client/errors.go (see docs/model-errors.md).
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from typing import Optional

from dex.v1 import types_pb2

#: Begins the result of a tool call that never ran (docs/attempts.md): no
#: attempt of it was ever claimed by a Worker, so the tool had no side effect
#: and it is safe to call it again. Test a failed call's result with
#: ``result.startswith(TOOL_CALL_NOT_RUN_ERROR_PREFIX)``.
TOOL_CALL_NOT_RUN_ERROR_PREFIX = "the tool did not run, so it is safe to call again"

ErrorType = int  # a types_pb2.ErrorType value

#: Error type names as docs/model-errors.md spells them.
ERROR_TYPES: dict[str, ErrorType] = {
    "": types_pb2.ERROR_TYPE_UNSPECIFIED,
    "none": types_pb2.ERROR_TYPE_UNSPECIFIED,
    "invalid_request": types_pb2.ERROR_TYPE_INVALID_REQUEST,
    "context_length": types_pb2.ERROR_TYPE_CONTEXT_LENGTH,
    "rate_limit": types_pb2.ERROR_TYPE_RATE_LIMIT,
    "overloaded": types_pb2.ERROR_TYPE_OVERLOADED,
    "server_error": types_pb2.ERROR_TYPE_SERVER_ERROR,
    "timeout": types_pb2.ERROR_TYPE_TIMEOUT,
    "network": types_pb2.ERROR_TYPE_NETWORK,
    "unknown": types_pb2.ERROR_TYPE_UNKNOWN,
}


class DexError(Exception):
    """Bad input to the library (a tool without a policy, ...)."""


class RegistrationError(DexError):
    """The cluster refused the Worker's registration."""


class ModelError(Exception):
    """A handler's error with an error type: the attempt fails with that type.

    ``error_type`` is a ``types_pb2.ErrorType`` value or its name
    (``"rate_limit"``).
    """

    def __init__(self, error_type: ErrorType | str, message: str = "") -> None:
        if isinstance(error_type, str):
            if error_type not in ERROR_TYPES:
                raise DexError(f"unknown error type {error_type!r} (known: {', '.join(k for k in ERROR_TYPES if k)})")
            error_type = ERROR_TYPES[error_type]
        self.error_type: ErrorType = error_type
        self.message = message or types_pb2.ErrorType.Name(error_type)
        super().__init__(self.message)


_CONTEXT_LENGTH_PHRASES = (
    "context_length_exceeded",
    "context length",
    "context window",
    "maximum context",
    "prompt is too long",
    "input is too long",
    "too many tokens",
    "maximum number of tokens",
)


def is_context_length_message(message: str) -> bool:
    """Whether a provider's error message says the request does not fit the
    model's context window."""
    m = message.lower()
    return any(p in m for p in _CONTEXT_LENGTH_PHRASES)


def error_type_for_http_status(status: int, message: str = "") -> ErrorType:
    """A provider's HTTP error status (and message) as Dex's error type."""
    if status in (400, 404, 413, 422):
        if is_context_length_message(message):
            return types_pb2.ERROR_TYPE_CONTEXT_LENGTH
        return types_pb2.ERROR_TYPE_INVALID_REQUEST
    if status in (408, 504):
        return types_pb2.ERROR_TYPE_TIMEOUT
    if status == 429:
        return types_pb2.ERROR_TYPE_RATE_LIMIT
    if status == 529 or (status == 503 and "overloaded" in message.lower()):
        return types_pb2.ERROR_TYPE_OVERLOADED
    if 500 <= status <= 599:
        return types_pb2.ERROR_TYPE_SERVER_ERROR
    return types_pb2.ERROR_TYPE_UNKNOWN


def http_model_error(status: int, message: str) -> ModelError:
    """A model handler's error for a provider's HTTP error answer."""
    return ModelError(error_type_for_http_status(status, message), message)


def _http_status_of(err: BaseException) -> Optional[int]:
    """The HTTP status an error (or what it was raised from) exposes, as
    provider SDKs do: ``status_code``, ``status`` or ``response.status_code``."""
    seen = set()
    e: Optional[BaseException] = err
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        for attr in ("status_code", "status", "http_status"):
            v = getattr(e, attr, None)
            if isinstance(v, int) and not isinstance(v, bool) and 100 <= v <= 599:
                return v
        resp = getattr(e, "response", None)
        v = getattr(resp, "status_code", None)
        if isinstance(v, int) and 100 <= v <= 599:
            return v
        e = e.__cause__ or e.__context__
    return None


def classify_error(err: Optional[BaseException]) -> ErrorType:
    """The error type a model handler's error is reported with: a
    :class:`ModelError`'s own type; an HTTP status an SDK error exposes; a
    timeout; a failed connection (network); anything else unknown."""
    if err is None:
        return types_pb2.ERROR_TYPE_UNSPECIFIED
    if isinstance(err, ModelError):
        return err.error_type
    status = _http_status_of(err)
    if status is not None:
        return error_type_for_http_status(status, str(err))
    if isinstance(err, (TimeoutError, asyncio.TimeoutError, socket.timeout)):
        return types_pb2.ERROR_TYPE_TIMEOUT
    if isinstance(err, (ConnectionError, socket.gaierror, ssl.SSLError, EOFError)):
        return types_pb2.ERROR_TYPE_NETWORK
    return types_pb2.ERROR_TYPE_UNKNOWN
