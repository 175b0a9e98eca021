"""opentelemetry.trace, faked: tracers whose spans are kept in FINISHED
when they end, with what they were started with."""

from __future__ import annotations

import enum
import random
from typing import Any, Optional

from opentelemetry import context as context_api

_SPAN_KEY = "current-span"

#: The spans ended, in order.
FINISHED: list = []


class TraceFlags(int):
    SAMPLED = 0x01


class SpanContext:
    def __init__(self, trace_id: int, span_id: int, is_remote: bool, trace_flags: Optional[TraceFlags] = None,
                 trace_state: Any = None) -> None:
        self.trace_id, self.span_id, self.is_remote = trace_id, span_id, is_remote
        self.trace_flags = trace_flags if trace_flags is not None else TraceFlags(0)

    @property
    def is_valid(self) -> bool:
        return self.trace_id != 0 and self.span_id != 0


class SpanKind(enum.Enum):
    INTERNAL = 0
    SERVER = 1
    CLIENT = 2


class StatusCode(enum.Enum):
    UNSET = 0
    OK = 1
    ERROR = 2


class Status:
    def __init__(self, status_code: StatusCode = StatusCode.UNSET, description: Optional[str] = None) -> None:
        self.status_code, self.description = status_code, description


class NonRecordingSpan:
    def __init__(self, context: SpanContext) -> None:
        self._context = context

    def get_span_context(self) -> SpanContext:
        return self._context


INVALID_SPAN = NonRecordingSpan(SpanContext(0, 0, False))


def set_span_in_context(span: Any, context: Optional[context_api.Context] = None) -> context_api.Context:
    return context_api.set_value(_SPAN_KEY, span, context)


def get_current_span(context: Optional[context_api.Context] = None) -> Any:
    span = context_api.get_value(_SPAN_KEY, context)
    return span if span is not None else INVALID_SPAN


class Span:
    """A recording span: its name, tracer, parent (a SpanContext or None),
    kind, attributes, exceptions, status and whether it ended."""

    def __init__(self, name: str, tracer: str, parent: Optional[SpanContext], kind: SpanKind, attributes: dict) -> None:
        self.name, self.tracer, self.parent, self.kind = name, tracer, parent, kind
        self.attributes = dict(attributes)
        trace_id = parent.trace_id if parent is not None else random.getrandbits(128)
        self._context = SpanContext(trace_id, random.getrandbits(64) or 1, False, TraceFlags(1))
        self.exceptions: list = []
        self.status = Status()
        self.ended = False

    def get_span_context(self) -> SpanContext:
        return self._context

    def record_exception(self, exception: BaseException, attributes: Any = None, timestamp: Any = None,
                         escaped: bool = False) -> None:
        self.exceptions.append(exception)

    def set_status(self, status: Status, description: Optional[str] = None) -> None:
        self.status = status

    def end(self, end_time: Any = None) -> None:
        assert not self.ended, f"span {self.name} ended twice"
        self.ended = True
        FINISHED.append(self)


class Tracer:
    def __init__(self, name: str) -> None:
        self.name = name

    def start_span(self, name: str, context: Optional[context_api.Context] = None, kind: SpanKind = SpanKind.INTERNAL,
                   attributes: Any = None, links: Any = None, start_time: Any = None, record_exception: bool = True,
                   set_status_on_exception: bool = True) -> Span:
        parent = get_current_span(context).get_span_context()
        return Span(name, self.name, parent if parent.is_valid else None, kind, attributes or {})


def get_tracer(instrumenting_module_name: str, *args: Any, **kwargs: Any) -> Tracer:
    return Tracer(instrumenting_module_name)
