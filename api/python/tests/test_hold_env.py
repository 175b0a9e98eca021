"""Holds driven by the environment (DEX_HOLD, DEX_HOLD_ALL; dex.hold) and the
before-result moment, against a real dexd: a hold waits for <ledger>.release,
once per moment unless DEX_HOLD_ALL=1; before-result comes after the
handler's end line and before its result reaches the cluster; a bad DEX_HOLD
fails the Worker's construction."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest

import dex
from dex.v1 import types_pb2
from test_cluster import _run, _until


def _setup(w: dex.Worker) -> None:
    @w.tool(access="idempotent_write")
    def save_note(call: dex.ToolCall) -> str:
        dex.side_effect(call, "notes.insert", call.idempotency_key)
        return "saved"

    @w.model
    async def model(inp: dex.ModelInput):
        if any(e.kind == types_pb2.HISTORY_KIND_TOOL_RESULT for e in inp.history):
            return "done"
        return dex.model_output("", [{"call_id": "c1", "tool": "save_note", "arguments": {"note": "hi"}}])


def _ledger_lines(ledger: Path) -> list:
    return [json.loads(x) for x in ledger.read_text().splitlines()] if ledger.exists() else []


async def _idle(client: dex.Client, sid: str):
    async def idle():
        got = await client.get_session(sid)
        return got if got.session.status == types_pb2.SESSION_STATUS_IDLE and len(got.steps) >= 3 else None

    return await _until(idle, "the session ended its turn")


async def _release_all(ledger: Path, seen: list, on_hold=None) -> None:
    """Releases every hold, recording each .held line (once)."""
    held, rel = Path(str(ledger) + ".held"), Path(str(ledger) + ".release")
    while True:
        try:
            line = held.read_text()
        except FileNotFoundError:
            line = ""
        if line and line not in seen and not rel.exists():
            seen.append(line)
            if on_hold is not None:
                await on_hold(line)
            rel.write_text("")
        await asyncio.sleep(0.02)


def _env(monkeypatch, tmp_path: Path, moments: str, hold_all: bool = False) -> Path:
    ledger = tmp_path / "ledger.jsonl"
    monkeypatch.setenv(dex.LEDGER_ENV, str(ledger))
    monkeypatch.setenv("DEX_HOLD", moments)
    if hold_all:
        monkeypatch.setenv("DEX_HOLD_ALL", "1")
    else:
        monkeypatch.delenv("DEX_HOLD_ALL", raising=False)
    return ledger


@pytest.mark.e2e
def test_env_hold_waits_for_the_release_file(dexd, tmp_path, monkeypatch, capfd):
    ledger = _env(monkeypatch, tmp_path, "tool-running")
    held, rel = Path(str(ledger) + ".held"), Path(str(ledger) + ".release")

    async def body(client: dex.Client):
        async def holding():
            return held.exists()

        s = await client.create_session("save hi")
        await _until(holding, "the Worker held")
        line = held.read_text()
        await asyncio.sleep(0.3)  # held: the tool has not run
        assert [x["kind"] for x in _ledger_lines(ledger) if x["phase"] == "start"] == ["model"]
        rel.write_text("")
        return s, line, await _idle(client, s.id)

    s, line, got = _run(dexd, _setup, body)
    [step] = [x for x in got.steps if x.kind == types_pb2.STEP_KIND_CALL_TOOL]
    pid = os.getpid()
    assert line == (f"tool-running step={step.id} session={s.id} kind=STEP_KIND_CALL_TOOL tool=save_note "
                    f"attempt=1 pid={pid}\n")
    assert not held.exists() and not rel.exists()
    err = capfd.readouterr().err.splitlines()
    assert f"held tool-running step={step.id} pid={pid}" in err
    assert f"released tool-running step={step.id} pid={pid}" in err


@pytest.mark.e2e
@pytest.mark.parametrize("hold_all", [False, True])
def test_env_hold_once_or_every_time(dexd, tmp_path, monkeypatch, hold_all):
    ledger = _env(monkeypatch, tmp_path, "before-model", hold_all)
    seen: list = []

    async def body(client: dex.Client):
        releaser = asyncio.ensure_future(_release_all(ledger, seen))
        try:
            s = await client.create_session("save hi")
            return await _idle(client, s.id)
        finally:
            releaser.cancel()

    got = _run(dexd, _setup, body)
    models = [x.id for x in got.steps if x.kind == types_pb2.STEP_KIND_RUN_MODEL]
    assert len(models) == 2
    assert [x.split()[:2] for x in seen] == [["before-model", f"step={m}"] for m in models[:2 if hold_all else 1]]


@pytest.mark.e2e
def test_before_result_after_the_end_line_before_the_report(dexd, tmp_path, monkeypatch):
    ledger = _env(monkeypatch, tmp_path, "before-result", hold_all=True)
    seen: list = []
    checked: list = []

    async def body(client: dex.Client):
        s = await client.create_session("save hi")

        async def on_hold(line: str) -> None:
            step_id = line.split()[1].removeprefix("step=")
            mine = [x for x in _ledger_lines(ledger) if x["step"] == step_id]
            got = await client.get_session(s.id)
            [step] = [x for x in got.steps if x.id == step_id]
            checked.append(([(x["phase"], x.get("outcome")) for x in mine], step.status, step.kind))

        releaser = asyncio.ensure_future(_release_all(ledger, seen, on_hold))
        try:
            return await _idle(client, s.id)
        finally:
            releaser.cancel()

    _run(dexd, _setup, body)
    running = types_pb2.STEP_STATUS_RUNNING
    assert checked == [
        ([("start", None), ("end", "ok")], running, types_pb2.STEP_KIND_RUN_MODEL),
        ([("start", None), ("effect", None), ("end", "ok")], running, types_pb2.STEP_KIND_CALL_TOOL),
        ([("start", None), ("end", "ok")], running, types_pb2.STEP_KIND_RUN_MODEL)]


@pytest.mark.e2e
def test_code_hook_gets_before_result(dexd, tmp_path, monkeypatch):
    ledger = tmp_path / "ledger.jsonl"
    monkeypatch.setenv(dex.LEDGER_ENV, str(ledger))
    monkeypatch.setenv("DEX_HOLD", "before-claim")  # a hook in code wins
    seen: list = []

    def hold(moment, task):
        if task.kind == types_pb2.STEP_KIND_CALL_TOOL:
            seen.append((moment, [x["phase"] for x in _ledger_lines(ledger) if x["step"] == task.ref.step_id]))

    async def main():
        w = dex.Worker(dexd.addr, id="py-test", poll_wait=1.0, shutdown_grace=1.0, hold=hold)
        _setup(w)
        stop = asyncio.Event()
        run = asyncio.ensure_future(w.run(stop))
        async with dex.Client(dexd.addr) as client:
            try:
                s = await client.create_session("save hi")
                await _idle(client, s.id)
            finally:
                stop.set()
                await asyncio.wait_for(run, 15)

    asyncio.run(main())
    assert seen == [("before-claim", []), ("after-claim", []), ("tool-running", []),
                    ("before-result", ["start", "effect", "end"]), ("after-result-sent", ["start", "effect", "end"])]
    assert not Path(str(ledger) + ".held").exists()


def test_unknown_moment_fails_construction(tmp_path, monkeypatch):
    monkeypatch.setenv(dex.LEDGER_ENV, str(tmp_path / "ledger.jsonl"))
    monkeypatch.setenv("DEX_HOLD", "tool-running,before-lunch")
    with pytest.raises(dex.DexError, match=r"DEX_HOLD: unknown hold moment 'before-lunch'"):
        dex.Worker("127.0.0.1:1")


def test_hold_without_ledger_fails_construction(monkeypatch):
    monkeypatch.delenv(dex.LEDGER_ENV, raising=False)
    monkeypatch.setenv("DEX_HOLD", "before-result")
    with pytest.raises(dex.DexError, match=r"DEX_HOLD=before-result: holds need DEX_LEDGER"):
        dex.Worker("127.0.0.1:1")


def test_empty_hold_holds_nothing(monkeypatch):
    monkeypatch.delenv(dex.LEDGER_ENV, raising=False)
    monkeypatch.setenv("DEX_HOLD", "")
    assert dex.Worker("127.0.0.1:1").hold_hook is None
    assert "before-result" in dex.MOMENTS
