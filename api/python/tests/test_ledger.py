"""The execution ledger ($DEX_LEDGER, docs/ledger.md): against a real dexd,
the start and end lines of a model call and a tool call and the effect
line of dex.side_effect, with the fields of api/ledger-fields.json; none
without the variable; a ledger that cannot be opened or written."""

from __future__ import annotations

import asyncio
import json
import os
import threading
from pathlib import Path

import pytest

import dex
from dex.v1 import types_pb2, workers_pb2
from test_cluster import _run, _until

GOLDEN = json.loads((Path(__file__).resolve().parents[2] / "ledger-fields.json").read_text())


def _lines(path: Path) -> list:
    return [json.loads(x) for x in path.read_text().splitlines()]


def _setup(w: dex.Worker) -> None:
    @w.tool(access="idempotent_write")
    def save_note(call: dex.ToolCall) -> str:
        dex.side_effect(call, "notes.insert", call.idempotency_key)
        return "saved"

    @w.model
    async def model(inp: dex.ModelInput):
        if any(e.kind == types_pb2.HISTORY_KIND_TOOL_RESULT for e in inp.history):
            return "done"
        return dex.model_output("", [{"call_id": "call-1", "tool": "save_note", "arguments": {"note": "hi"}}])


async def _session(client: dex.Client):
    s = await client.create_session("save hi")

    async def idle():
        got = await client.get_session(s.id)
        return got if got.session.status == types_pb2.SESSION_STATUS_IDLE and len(got.steps) >= 3 else None

    return s, await _until(idle, "the session ended its turn")


@pytest.mark.e2e
def test_ledger_lines_against_dexd(dexd, tmp_path, monkeypatch):
    ledger = tmp_path / "ledger.jsonl"
    monkeypatch.setenv(dex.LEDGER_ENV, str(ledger))
    s, got = _run(dexd, _setup, _session)
    [step] = [x for x in got.steps if x.kind == types_pb2.STEP_KIND_CALL_TOOL]
    lines = _lines(ledger)
    assert [(x["phase"], x["kind"], x["tool"], x.get("outcome")) for x in lines] == [
        ("start", "model", "", None), ("end", "model", "", "ok"),
        ("start", "tool", "save_note", None), ("effect", "tool", "save_note", None), ("end", "tool", "save_note", "ok"),
        ("start", "model", "", None), ("end", "model", "", "ok")]
    for x in lines:
        assert (x["session"], x["worker"], x["attempt"], x["pid"]) == (s.id, "py-test", 1, os.getpid())
        assert sorted(x) == GOLDEN[x["phase"]], x  # the fields every library writes
    for x in lines[2:5]:
        assert (x["step"], x["call_id"], x["idempotency_key"]) == (step.id, "call-1", f"dex:{s.id}:call-1")
    assert (lines[3]["effect"], lines[3]["effect_key"]) == ("notes.insert", f"dex:{s.id}:call-1")
    assert lines[0]["step"] != lines[5]["step"]


@pytest.mark.e2e
def test_no_ledger_without_the_variable(dexd, tmp_path, monkeypatch):
    monkeypatch.delenv(dex.LEDGER_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    _run(dexd, _setup, _session)  # side_effect is a no-op
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dexd.log", "n1"]  # dexd's own


def test_unopenable_ledger_refuses_to_start(tmp_path, monkeypatch):
    path = tmp_path / "no-such-dir" / "ledger.jsonl"
    monkeypatch.setenv(dex.LEDGER_ENV, str(path))
    with pytest.raises(dex.DexError, match=f"{dex.LEDGER_ENV}: open ledger {path}"):
        dex.Worker("127.0.0.1:1")


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full")
def test_unwritable_start_line_fails_the_attempt_unrun(monkeypatch):
    monkeypatch.setenv(dex.LEDGER_ENV, "/dev/full")
    w = dex.Worker("127.0.0.1:1")
    ran = []
    w.add_tool("save_note", lambda call: ran.append(call) or "saved", access="idempotent_write")
    task = workers_pb2.Task(session_id="s1", kind=types_pb2.STEP_KIND_CALL_TOOL, runner=workers_pb2.TASK_RUNNER_TOOL,
                            handler=workers_pb2.TASK_HANDLER_TOOL, tool="save_note", call_id="c1",
                            idempotency_key="dex:s1:c1")
    task.ref.step_id, task.ref.attempt = "st1", 1
    out = asyncio.run(w._invoke(task, threading.Event()))
    assert ran == [] and out.complete is None
    assert "ledger start line was not written" in str(out.err)
