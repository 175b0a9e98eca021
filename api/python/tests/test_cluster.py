"""Against a real dexd: a session end to end, a model output the cluster
would refuse, and a handler cancelled with its attempt."""

from __future__ import annotations

import asyncio
import threading

import pytest

import dex
from dex.v1 import types_pb2

pytestmark = pytest.mark.e2e  # every test here starts processes


async def _until(pred, what: str, limit: float = 30.0):
    """Polls pred until it is true (a bound for a broken run, not a timing)."""
    loop = asyncio.get_running_loop()
    end = loop.time() + limit
    while True:
        v = await pred()
        if v:
            return v
        if loop.time() > end:
            raise AssertionError("never happened: " + what)
        await asyncio.sleep(0.05)


def _run(dexd, setup, body):
    async def main():
        w = dex.Worker(dexd.addr, id="py-test", poll_wait=1.0, shutdown_grace=1.0)
        setup(w)
        stop = asyncio.Event()
        run = asyncio.ensure_future(w.run(stop))
        client = dex.Client(dexd.addr)
        try:
            return await body(client)
        finally:
            stop.set()
            await asyncio.wait_for(run, 15)
            await client.close()

    return asyncio.run(main())


def test_session_runs_end_to_end(dexd):
    calls: list = []

    def setup(w: dex.Worker):
        @w.tool(access="idempotent_write")
        def save_note(call: dex.ToolCall) -> str:  # a plain function runs in a thread
            calls.append(call)
            return "saved"

        @w.model
        async def model(inp: dex.ModelInput):
            if any(e.kind == types_pb2.HISTORY_KIND_TOOL_RESULT for e in inp.history):
                return "All saved."
            return dex.model_output("", [{"call_id": "c1", "tool": "save_note", "arguments": {"note": "hi"}}])

    async def body(client: dex.Client):
        s = await client.create_session("remember hi")

        async def idle():
            got = await client.get_session(s.id)
            return got if got.session.status == types_pb2.SESSION_STATUS_IDLE and got.session.history else None

        got = await _until(idle, "the session went idle")
        assert [x.id for x in await client.list_sessions()] == [s.id]
        return s, got

    s, got = _run(dexd, setup, body)
    assert [(c.tool, c.call_id, c.idempotency_key, c.attempt) for c in calls] == [
        ("save_note", "c1", f"dex:{s.id}:c1", 1)]
    assert got.session.history[-1].kind == types_pb2.HISTORY_KIND_ASSISTANT
    assert got.session.history[-1].text == "All saved."


def test_model_output_without_a_call_id_fails_the_attempt(dexd):
    def setup(w: dex.Worker):
        @w.tool(access="read")
        def lookup(call):
            return "found"

        @w.model
        def model(inp):
            return {"text": "", "tool_calls": [{"tool": "lookup", "arguments": "{}"}]}

    async def body(client: dex.Client):
        s = await client.create_session("look")

        async def failed_attempt():
            got = await client.get_session(s.id)
            return [a for st in got.steps for a in st.attempts if a.error]

        return await _until(failed_attempt, "an attempt failed")

    attempts = _run(dexd, setup, body)
    assert "the model handler's output was not sent: tool call 1 of the model output (tool 'lookup') has no call id" \
        in attempts[0].error
    assert attempts[0].error_type == types_pb2.ERROR_TYPE_UNKNOWN


def test_handler_is_cancelled_when_its_attempt_is(dexd):
    started = threading.Event()
    cancelled = threading.Event()
    finished = threading.Event()

    def setup(w: dex.Worker):
        @w.tool(access="idempotent_write")
        async def deploy(call: dex.ToolCall) -> str:
            started.set()
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                cancelled.set()
                raise
            finished.set()
            return "deployed"

        @w.model
        async def model(inp):
            return dex.model_output("", [{"call_id": "c1", "tool": "deploy"}])

    async def body(client: dex.Client):
        s = await client.create_session("deploy")

        async def running():
            return started.is_set()

        await _until(running, "the tool started")
        resp = await client.cancel(s.id, reason="test")

        async def was_cancelled():
            return cancelled.is_set()

        await _until(was_cancelled, "the handler was cancelled")
        return resp

    resp = _run(dexd, setup, body)
    assert resp.attempts_cancelled == 1
    assert cancelled.is_set() and not finished.is_set()
