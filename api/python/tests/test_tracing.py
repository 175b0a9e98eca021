"""A Worker hands each handler its task's traceparent and, when
OpenTelemetry's API can be imported, runs the handler in a span that is the
child of it. OpenTelemetry is not installed here: these tests put a fake of
its API (tests/fake_otel) on sys.path, or make it unimportable."""

from __future__ import annotations

import asyncio
import importlib.util
import logging
import sys
import threading
from pathlib import Path

import pytest

import dex
from dex import tracing
from dex.v1 import types_pb2, workers_pb2

FAKE_OTEL = Path(__file__).resolve().parent / "fake_otel"

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
SPAN_ID = "00f067aa0ba902b7"
TRACEPARENT = f"00-{TRACE_ID}-{SPAN_ID}-01"


def _drop_otel_modules(monkeypatch) -> None:
    for name in [m for m in sys.modules if m == "opentelemetry" or m.startswith("opentelemetry.")]:
        monkeypatch.delitem(sys.modules, name)


@pytest.fixture
def otel(monkeypatch):
    """The fake OpenTelemetry API on sys.path, not yet imported; gone after
    the test."""
    _drop_otel_modules(monkeypatch)
    monkeypatch.syspath_prepend(str(FAKE_OTEL))
    monkeypatch.setattr(tracing, "_api", tracing._UNSET)
    monkeypatch.setattr(tracing, "_warned", False)
    yield
    for name in [m for m in sys.modules if m == "opentelemetry" or m.startswith("opentelemetry.")]:
        del sys.modules[name]


@pytest.fixture
def no_otel(monkeypatch):
    """OpenTelemetry not importable (as here, where it is not installed)."""
    _drop_otel_modules(monkeypatch)
    monkeypatch.setitem(sys.modules, "opentelemetry", None)  # import raises ImportError
    monkeypatch.setattr(tracing, "_api", tracing._UNSET)


def finished() -> list:
    return sys.modules["opentelemetry.trace"].FINISHED


def _task(handler: int, kind: int, tool: str = "", traceparent: str = TRACEPARENT, step: str = "st1",
          attempt: int = 2) -> workers_pb2.Task:
    runner = workers_pb2.TASK_RUNNER_MODEL if handler in (workers_pb2.TASK_HANDLER_MODEL,
                                                          workers_pb2.TASK_HANDLER_COMPACT) else workers_pb2.TASK_RUNNER_TOOL
    t = workers_pb2.Task(session_id="s1", kind=kind, runner=runner, handler=handler, tool=tool,
                         call_id="c1", idempotency_key="dex:s1:c1", traceparent=traceparent)
    t.ref.step_id, t.ref.attempt = step, attempt
    return t


def tool_task(tool: str = "search", **kw) -> workers_pb2.Task:
    return _task(workers_pb2.TASK_HANDLER_TOOL, types_pb2.STEP_KIND_CALL_TOOL, tool, **kw)


def model_task(**kw) -> workers_pb2.Task:
    return _task(workers_pb2.TASK_HANDLER_MODEL, types_pb2.STEP_KIND_RUN_MODEL, **kw)


def invoke(w: dex.Worker, t: workers_pb2.Task):
    return asyncio.run(w._invoke(t, threading.Event()))


def test_the_handler_gets_the_traceparent_without_opentelemetry(no_otel):
    seen: list = []
    w = dex.Worker("127.0.0.1:1")
    w.add_tool("search", lambda call: seen.append(call.traceparent) or "found", access="read")
    w.model(lambda inp: seen.append(inp.traceparent) or "hi")

    assert invoke(w, tool_task()).complete.tool_result.content == "found"
    assert invoke(w, model_task()).complete.model_output.text == "hi"
    assert invoke(w, tool_task(traceparent="")).complete is not None
    assert seen == [TRACEPARENT, TRACEPARENT, ""]
    assert tracing._otel() is None


def test_opentelemetry_is_looked_for_at_the_first_task_not_at_import(otel):
    # The module run afresh, as `import dex` runs it.
    spec = importlib.util.spec_from_file_location("dex_tracing_afresh", tracing.__file__)
    spec.loader.exec_module(importlib.util.module_from_spec(spec))
    w = dex.Worker("127.0.0.1:1")
    w.add_tool("search", lambda call: "found", access="read")
    assert "opentelemetry" not in sys.modules
    invoke(w, tool_task())
    assert "opentelemetry" in sys.modules and len(finished()) == 1


@pytest.mark.parametrize("sync", [True, False])
def test_a_tool_handler_runs_in_a_child_of_the_traceparent(otel, sync):
    def handle(call: dex.ToolCall) -> str:
        from opentelemetry import trace
        trace.get_tracer("search-backend").start_span("backend.query").end()
        return "found"

    if sync:
        run = handle
    else:
        async def run(call: dex.ToolCall) -> str:
            await asyncio.sleep(0)
            return handle(call)

    w = dex.Worker("127.0.0.1:1")
    w.add_tool("search", run, access="read")
    assert "opentelemetry" not in sys.modules  # looked for at the first task, not at import
    out = invoke(w, tool_task(step="st7"))
    assert out.complete.tool_result.content == "found"

    own, span = finished()
    assert (span.name, span.tracer, span.ended) == ("dex.tool search", dex.TRACER_NAME, True)
    assert span.kind.name == "INTERNAL"
    assert (span.parent.trace_id, span.parent.span_id) == (int(TRACE_ID, 16), int(SPAN_ID, 16))
    assert span.parent.is_remote and span.parent.trace_flags == 1
    assert span.attributes == {"dex.session": "s1", "dex.step": "st7", "dex.attempt": 2,
                               "dex.kind": "STEP_KIND_CALL_TOOL", "dex.tool": "search"}
    assert span.status.status_code.name == "UNSET" and span.exceptions == []
    # The handler's own span (from its thread, for a sync handler) is the child.
    assert own.name == "backend.query"
    assert own.parent is span.get_span_context()


def test_a_model_handlers_error_is_recorded_on_its_span(otel):
    err = dex.ModelError(types_pb2.ERROR_TYPE_RATE_LIMIT, "provider says slow down")

    async def model(inp: dex.ModelInput) -> str:
        raise err

    w = dex.Worker("127.0.0.1:1")
    w.model(model)
    out = invoke(w, model_task())
    assert out.err is err and out.error_type == types_pb2.ERROR_TYPE_RATE_LIMIT

    [span] = finished()
    assert span.name == "dex.model" and span.ended
    assert span.parent.span_id == int(SPAN_ID, 16)
    assert span.attributes == {"dex.session": "s1", "dex.step": "st1", "dex.attempt": 2, "dex.kind": "STEP_KIND_RUN_MODEL"}
    assert span.exceptions == [err]
    assert (span.status.status_code.name, span.status.description) == ("ERROR", "provider says slow down")


def test_compact_and_poll_spans_are_named_by_their_runner(otel):
    w = dex.Worker("127.0.0.1:1")
    w.model(lambda inp: "")
    w.compactor(lambda inp: "summary")
    w.add_tool("build", lambda call: dex.ToolResult(task_id="b1"), access="read", long_running=True,
               poll=lambda call: False)
    invoke(w, _task(workers_pb2.TASK_HANDLER_COMPACT, types_pb2.STEP_KIND_COMPACT_CONTEXT))
    invoke(w, _task(workers_pb2.TASK_HANDLER_POLL, types_pb2.STEP_KIND_POLL_TOOL_TASK, "build"))
    compact, poll = finished()
    assert (compact.name, compact.attributes["dex.kind"]) == ("dex.model", "STEP_KIND_COMPACT_CONTEXT")
    assert (poll.name, poll.attributes["dex.kind"]) == ("dex.tool build", "STEP_KIND_POLL_TOOL_TASK")
    assert poll.parent.span_id == int(SPAN_ID, 16)


@pytest.mark.parametrize("traceparent", ["", f"00-{TRACE_ID.upper()}-{SPAN_ID}-01"])
def test_no_or_a_malformed_traceparent_gives_a_root_span(otel, traceparent):
    from opentelemetry import context, trace

    seen: list = []
    w = dex.Worker("127.0.0.1:1")
    w.add_tool("search", lambda call: seen.append(call.traceparent) or "found", access="read")
    outer = trace.get_tracer("app").start_span("app.main")

    async def main():
        token = context.attach(trace.set_span_in_context(outer))
        try:
            out = await w._invoke(tool_task(traceparent=traceparent), threading.Event())
            # The task's span is no longer current once the handler is done.
            assert trace.get_current_span() is outer
            return out
        finally:
            context.detach(token)

    assert asyncio.run(main()).complete.tool_result.content == "found"
    assert seen == [traceparent]
    [span] = finished()
    assert span.name == "dex.tool search"
    assert span.parent is None  # not the outer span current where the Worker runs


def test_a_broken_opentelemetry_is_logged_once_and_the_handlers_run(otel, caplog):
    from opentelemetry import trace

    def broken(*args, **kwargs):
        raise RuntimeError("no provider")

    trace.get_tracer = broken
    w = dex.Worker("127.0.0.1:1")
    w.add_tool("search", lambda call: "found", access="read")
    with caplog.at_level(logging.WARNING, logger="dex.worker"):
        assert invoke(w, tool_task()).complete.tool_result.content == "found"
        assert invoke(w, tool_task()).complete.tool_result.content == "found"
    warned = [r for r in caplog.records if "no span for the task" in r.getMessage()]
    assert len(warned) == 1
    assert warned[0].fields["error"] == "RuntimeError: no provider"
    assert finished() == []


def test_parse_traceparent():
    assert dex.parse_traceparent(TRACEPARENT) == (int(TRACE_ID, 16), int(SPAN_ID, 16), 1)
    assert dex.parse_traceparent(f"00-{TRACE_ID}-{SPAN_ID}-00") == (int(TRACE_ID, 16), int(SPAN_ID, 16), 0)
    # A later version may add fields.
    assert dex.parse_traceparent(f"01-{TRACE_ID}-{SPAN_ID}-01-more") == (int(TRACE_ID, 16), int(SPAN_ID, 16), 1)
    for bad in ["", "garbage", f"00-{TRACE_ID}-{SPAN_ID}", f"00-{TRACE_ID}-{SPAN_ID}-1",
                f"00-{TRACE_ID.upper()}-{SPAN_ID}-01", f"ff-{TRACE_ID}-{SPAN_ID}-01", f"00-{TRACE_ID}-{SPAN_ID}-01-more",
                f"00-{'0' * 32}-{SPAN_ID}-01", f"00-{TRACE_ID}-{'0' * 16}-01", f" {TRACEPARENT}", f"{TRACEPARENT}\n"]:
        assert dex.parse_traceparent(bad) is None, bad
