"""A Worker's spans: one around each handler run, a child of the attempt's
span that the cluster's leader exports, so a turn is one trace from the
client through the leader to the Worker's model and tool calls
(docs/tracing.md).

OpenTelemetry is optional: the spans are made through its API package
(``opentelemetry-api``, ``pip install dex-worker[tracing]``) when it can be
imported, looked for at the first task, never at ``import dex``. Without it
a handler still gets the task's traceparent (``ModelInput.traceparent``,
``ToolCall.traceparent``) to pass on by hand.
"""

from __future__ import annotations

import contextlib
import logging
import re
from typing import Any, Iterator, Optional, Tuple

from dex.v1 import types_pb2, workers_pb2

#: The name of the tracer the Worker's spans come from.
TRACER_NAME = "dex.worker"

# W3C Trace Context: version-traceid-parentid-flags, lowercase hex; a later
# version may add fields after a "-".
_TRACEPARENT = re.compile(r"([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?")

_UNSET = object()
_api: Any = _UNSET  # (trace, context) once looked for; None: not importable
_warned = False  # a span that could not be started was logged once


def parse_traceparent(tp: str) -> Optional[Tuple[int, int, int]]:
    """The trace id, span id and trace flags a W3C traceparent header names,
    or None when it is empty or malformed (version ff, a version 00 with more
    fields, an all-zero trace or span id)."""
    m = _TRACEPARENT.fullmatch(tp)
    if m is None or m.group(1) == "ff" or (m.group(1) == "00" and m.group(5) is not None):
        return None
    trace_id, span_id = int(m.group(2), 16), int(m.group(3), 16)
    if trace_id == 0 or span_id == 0:
        return None
    return trace_id, span_id, int(m.group(4), 16)


def span_name(t: workers_pb2.Task) -> str:
    """"dex.model" for a model or compact handler, "dex.tool NAME" for a
    tool's run or poll handler."""
    if t.handler in (workers_pb2.TASK_HANDLER_MODEL, workers_pb2.TASK_HANDLER_COMPACT):
        return "dex.model"
    return f"dex.tool {t.tool}"


def span_attributes(t: workers_pb2.Task) -> dict:
    """The task's session, Step, attempt, kind, and tool when it names one."""
    try:
        kind = types_pb2.StepKind.Name(t.kind)
    except ValueError:
        kind = str(t.kind)
    attrs = {"dex.session": t.session_id, "dex.step": t.ref.step_id, "dex.attempt": t.ref.attempt, "dex.kind": kind}
    if t.tool:
        attrs["dex.tool"] = t.tool
    return attrs


def _otel() -> Any:
    """OpenTelemetry's (trace, context) modules, or None when not installed."""
    global _api
    if _api is _UNSET:
        try:
            from opentelemetry import context, trace
        except ImportError:
            _api = None
        else:
            _api = (trace, context)
    return _api


def _start(trace: Any, context: Any, t: workers_pb2.Task) -> Tuple[Any, Any]:
    """Starts t's span and makes it the current context; the span and the
    token that detaches it."""
    # The parent is the task's traceparent or nothing: never the context
    # the Worker happened to start in.
    parent = context.Context()
    ids = parse_traceparent(t.traceparent)
    if ids is not None:
        sc = trace.SpanContext(trace_id=ids[0], span_id=ids[1], is_remote=True, trace_flags=trace.TraceFlags(ids[2]))
        parent = trace.set_span_in_context(trace.NonRecordingSpan(sc), parent)
    span = trace.get_tracer(TRACER_NAME).start_span(span_name(t), context=parent, kind=trace.SpanKind.INTERNAL,
                                                    attributes=span_attributes(t))
    return span, context.attach(trace.set_span_in_context(span, parent))


@contextlib.contextmanager
def task_span(t: workers_pb2.Task, log: logging.Logger) -> Iterator[None]:
    """Runs the body, a handler's run for task t, inside its span when
    OpenTelemetry is installed: the child of the task's traceparent, or a
    root span when the task has none (the turn is not traced) or a malformed
    one. The span is the current context in the body, so the handler's own
    spans nest under it; an exception the body raises is recorded on the
    span and raised on. A span that cannot be started (a broken
    OpenTelemetry) is logged once, on log, and the handler runs untraced."""
    global _warned
    api = _otel()
    started = None
    if api is not None:
        try:
            started = _start(api[0], api[1], t)
        except Exception as e:  # tracing never stops a handler
            if not _warned:
                _warned = True
                log.warning("no span for the task: OpenTelemetry failed; handlers run untraced",
                            extra={"fields": {"error": f"{type(e).__name__}: {e}"}})
    if started is None:
        yield
        return
    trace, context = api
    span, token = started
    try:
        yield
    except BaseException as e:
        span.record_exception(e)
        span.set_status(trace.Status(trace.StatusCode.ERROR, str(e) or type(e).__name__))
        raise
    finally:
        context.detach(token)
        span.end()
