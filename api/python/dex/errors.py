"""Error types of model failures, and the not-run prefix of tool calls.

A port of api/client/errors.go (see docs/model-errors.md).
"""

from __future__ import annotations

import asyncio
import email.utils
import math
import socket
import ssl
import time
from datetime import timezone
from typing import Any, Optional

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
    (``"rate_limit"``). ``retry_after`` is a rate_limit failure's
    Retry-After as the provider sent it, in seconds (None: none): the
    cluster holds the session's provider for every Worker until then
    (docs/flow-control.md). It is reported for a rate_limit only.
    """

    def __init__(self, error_type: ErrorType | str, message: str = "", retry_after: Optional[float] = None) -> None:
        if isinstance(error_type, str):
            if error_type not in ERROR_TYPES:
                raise DexError(f"unknown error type {error_type!r} (known: {', '.join(k for k in ERROR_TYPES if k)})")
            error_type = ERROR_TYPES[error_type]
        if retry_after is not None and (isinstance(retry_after, bool) or not isinstance(retry_after, (int, float))
                                        or not 0 <= retry_after < math.inf):
            raise DexError(f"retry_after must be a number of seconds from 0, not {retry_after!r}")
        self.error_type: ErrorType = error_type
        self.message = message or types_pb2.ErrorType.Name(error_type)
        self.retry_after: Optional[float] = retry_after
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


def http_model_error(status: int, message: str, headers: Any = None) -> ModelError:
    """A model handler's error for a provider's HTTP error answer. With the
    answer's ``headers`` (a mapping), a rate_limit carries their
    Retry-After (see :func:`retry_after_from_headers`)."""
    error_type = error_type_for_http_status(status, message)
    retry_after = None
    if error_type == types_pb2.ERROR_TYPE_RATE_LIMIT and headers is not None:
        retry_after = retry_after_from_headers(headers)
    return ModelError(error_type, message, retry_after)


def _header(headers: Any, name: str) -> Optional[str]:
    """A header's value, its name matched in any case: httpx's and
    http.client's headers match it themselves, a plain dict may not."""
    try:
        v = headers.get(name)
        if v is None:
            v = next((v for k, v in headers.items() if str(k).lower() == name), None)
    except (AttributeError, TypeError):
        return None
    if isinstance(v, bytes):
        v = v.decode("latin-1")
    return None if v is None else str(v).strip()


def _positive_seconds(text: str, scale: float) -> Optional[float]:
    try:
        v = float(text) * scale
    except ValueError:
        return None
    return v if math.isfinite(v) and v > 0 else None


def retry_after_from_headers(headers: Any, now: Optional[float] = None) -> Optional[float]:
    """The Retry-After of a provider's HTTP answer, in seconds: its
    ``retry-after-ms`` header (milliseconds, as OpenAI sends it), else its
    ``retry-after`` (seconds, possibly fractional, or an HTTP date, counted
    from ``now``, a Unix time, default the clock's). None when neither
    gives a time to come; a header that does not parse is ignored."""
    ms = _header(headers, "retry-after-ms")
    if ms is not None:
        v = _positive_seconds(ms, 0.001)
        if v is not None:
            return v
    text = _header(headers, "retry-after")
    if not text:
        return None
    v = _positive_seconds(text, 1.0)
    if v is not None:
        return v
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):  # not a date (TypeError before Python 3.10)
        return None
    if when.tzinfo is None:  # "-0000": UTC
        when = when.replace(tzinfo=timezone.utc)
    left = when.timestamp() - (time.time() if now is None else now)
    return left if left > 0 else None


def _chain(err: BaseException):
    """err, then what it was raised from or during, each once."""
    seen = set()
    e: Optional[BaseException] = err
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        yield e
        e = e.__cause__ or e.__context__


def retry_after_of(err: Optional[BaseException]) -> Optional[float]:
    """The Retry-After, in seconds, a model handler's rate_limit error
    carries: a :class:`ModelError`'s ``retry_after``, else the headers of
    the HTTP answer an SDK error (or what it was raised from) holds, as
    ``response.headers`` (the openai and anthropic SDKs, httpx, requests)
    or ``headers`` (urllib). It does not look at the error's type: the
    Worker asks only for a rate_limit."""
    if err is None:
        return None
    for e in _chain(err):
        if isinstance(e, ModelError) and e.retry_after is not None:
            return e.retry_after
        for headers in (getattr(getattr(e, "response", None), "headers", None), getattr(e, "headers", None)):
            if headers is not None:
                v = retry_after_from_headers(headers)
                if v is not None:
                    return v
    return None


#: The largest retry_after_ms the wire takes (an int64).
_MAX_RETRY_AFTER_MS = 2**63 - 1


def retry_after_ms(seconds: Optional[float]) -> int:
    """A Retry-After in seconds as AttemptFailure.retry_after_ms: to the
    nearest millisecond, at least 1 when there is one; 0 for none."""
    if seconds is None or not seconds > 0:
        return 0
    if seconds == math.inf:
        return _MAX_RETRY_AFTER_MS
    return min(max(1, round(seconds * 1000)), _MAX_RETRY_AFTER_MS)


def _http_status_of(err: BaseException) -> Optional[int]:
    """The HTTP status an error (or what it was raised from) exposes, as
    provider SDKs do: ``status_code``, ``status`` or ``response.status_code``."""
    for e in _chain(err):
        for attr in ("status_code", "status", "http_status"):
            v = getattr(e, attr, None)
            if isinstance(v, int) and not isinstance(v, bool) and 100 <= v <= 599:
                return v
        resp = getattr(e, "response", None)
        v = getattr(resp, "status_code", None)
        if isinstance(v, int) and 100 <= v <= 599:
            return v
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
