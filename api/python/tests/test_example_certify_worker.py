"""The Worker of docs/examples/python, as `dexchaos certify` runs it: its
policies are those of its tools.json, and against a real dexd and the
scripted provider (`dexchaos provider`) each tool runs one turn, its
side effects in the ledger and the invoice store, a provider's 429 a
rate_limit attempt. docs/examples/broken-python differs where its README
says."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import dex
from conftest import BIN
from dex.v1 import types_pb2
from test_cluster import _until

EXAMPLES = Path(__file__).resolve().parents[3] / "docs" / "examples"
LIB = Path(__file__).resolve().parents[1]
POLICY = {v: k for k, v in dex.ACCESS.items()}


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _declared(example: str) -> dict:
    return {t["name"]: t["policy"] for t in json.loads((EXAMPLES / example / "tools.json").read_text())["tools"]}


def _registered(w: dex.Worker) -> dict:
    return {n: POLICY[t.spec.access] for n, t in w.tools.items()}


def test_example_registers_what_tools_json_declares(monkeypatch):
    monkeypatch.syspath_prepend(str(EXAMPLES / "python"))
    good = _load(EXAMPLES / "python" / "worker.py", "example_worker")
    w = good.new_worker()
    w.check()
    assert _registered(w) == _declared("python")
    assert w.tools["send_invoice"].spec.description == "Sends the invoice of an order (amount in cents)."
    broken = _load(EXAMPLES / "broken-python" / "worker.py", "broken_worker")
    assert _declared("broken-python") == _declared("python")
    assert _registered(good.new_worker(broken.TOOLS)) == {**_declared("python"), "charge_card": "read"}


SCRIPT = {"turns": [
    {"contains": "call lookup_order", "outputs": [
        {"tool_calls": [{"name": "lookup_order", "arguments": {"order_id": "A-1001"}}]}, {"text": "done"}]},
    {"contains": "call send_invoice", "outputs": [
        {"tool_calls": [{"name": "send_invoice", "arguments": {"order_id": "A-1001", "amount_cents": 1250}}]},
        {"text": "done"}],
     "errors": [{"output": 0, "status": 429, "times": 1}]},
    {"contains": "call charge_card", "outputs": [
        {"tool_calls": [{"name": "charge_card", "arguments": {"order_id": "A-1001", "amount_cents": 1250}}]},
        {"text": "done"}]},
]}


def _start(args: list, tmp: Path, name: str, **kw) -> subprocess.Popen:
    """Starts a process, its stderr (and stdout unless piped) in tmp."""
    with open(tmp / f"{name}.out", "wb") as out, open(tmp / f"{name}.err", "wb") as err:
        return subprocess.Popen(args, stdout=kw.pop("stdout", out), stderr=err, **kw)


def _stop(p: subprocess.Popen) -> None:
    if p.poll() is None:
        p.terminate()
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    if p.stdout is not None:
        p.stdout.close()


def _turns(dexd, tmp: Path, example: str, tools: list) -> tuple:
    """Runs the example Worker against dexd and the scripted provider, one
    session a tool; returns the sessions, the ledger lines and the invoices."""
    if not (BIN / "dexchaos").exists():
        pytest.skip(f"{BIN / 'dexchaos'} is missing: run make build")
    (tmp / "script.json").write_text(json.dumps(SCRIPT))
    provider = _start([str(BIN / "dexchaos"), "provider", "--script", str(tmp / "script.json")], tmp, "provider",
                      stdout=subprocess.PIPE)
    worker = None
    try:
        base = provider.stdout.readline().decode().strip()
        assert base.startswith("OPENAI_BASE_URL=http://127.0.0.1:"), base
        env = {**os.environ, "PYTHONPATH": str(LIB), "DEX_ADDR": dexd.addr, "DEX_WORKER_ID": "w1",
               "DEX_LEDGER": str(tmp / "ledger.jsonl"), "OPENAI_BASE_URL": base.split("=", 1)[1],
               "OPENAI_API_KEY": "dex-certify", "INVOICE_STORE": str(tmp / "invoices.json")}
        for k in ("DEX_TOKEN", "DEX_HOLD", "DEX_HOLD_ALL"):
            env.pop(k, None)
        worker = _start([sys.executable, "worker.py"], tmp, "worker", cwd=EXAMPLES / example, env=env)

        async def main():
            async with dex.Client(dexd.addr) as c:
                out = []
                for i, tool in enumerate(tools, 1):
                    s = await c.create_session(f"certify {i}: call {tool}")

                    async def idle():
                        assert worker.poll() is None, (tmp / "worker.err").read_text()
                        got = await c.get_session(s.id)
                        return got if got.session.status == types_pb2.SESSION_STATUS_IDLE and len(got.steps) >= 3 \
                            else None

                    out.append(await _until(idle, f"the turn calling {tool} ended"))
                return out

        sessions = asyncio.run(main())
    finally:
        if worker is not None:
            _stop(worker)
        _stop(provider)
    ledger = [json.loads(x) for x in (tmp / "ledger.jsonl").read_text().splitlines()]
    invoices = json.loads((tmp / "invoices.json").read_text()) if (tmp / "invoices.json").exists() else {}
    return sessions, ledger, invoices


def _tool_step(got):
    [step] = [x for x in got.steps if x.kind in (types_pb2.STEP_KIND_CALL_TOOL,
                                                  types_pb2.STEP_KIND_CALL_SINGLE_ATTEMPT_TOOL)]
    return step


@pytest.mark.e2e
def test_example_runs_each_tool_through_the_provider(dexd, tmp_path):
    tools = ["lookup_order", "send_invoice", "charge_card"]
    sessions, ledger, invoices = _turns(dexd, tmp_path, "python", tools)
    for tool, got in zip(tools, sessions):
        step = _tool_step(got)
        assert (step.tool, step.outcome, step.attempts[-1].worker_id) == (tool, types_pb2.OUTCOME_SUCCEEDED, "w1")
        assert got.session.history[-1].text == "done"
        runs = [x for x in ledger if x["step"] == step.id]
        assert [x["phase"] for x in runs] == (["start", "end"] if tool == "lookup_order" else ["start", "effect", "end"])
    assert '"status": "shipped"' in _tool_step(sessions[0]).result

    invoice = _tool_step(sessions[1])
    [effect] = [x for x in ledger if x["phase"] == "effect" and x["tool"] == "send_invoice"]
    assert (effect["effect"], effect["effect_key"]) == ("invoice", invoice.idempotency_key)
    assert list(invoices) == [invoice.idempotency_key] and invoice.result == "sent INV-1"
    [model] = [x for x in sessions[1].steps if x.kind == types_pb2.STEP_KIND_RUN_MODEL][:1]
    assert [a.error_type for a in model.attempts] == [types_pb2.ERROR_TYPE_RATE_LIMIT, types_pb2.ERROR_TYPE_UNSPECIFIED]

    charge = _tool_step(sessions[2])
    assert charge.kind == types_pb2.STEP_KIND_CALL_SINGLE_ATTEMPT_TOOL
    [effect] = [x for x in ledger if x["phase"] == "effect" and x["tool"] == "charge_card"]
    assert (effect["effect"], effect["effect_key"]) == ("charge", "")


@pytest.mark.e2e
def test_broken_example_writes_without_its_key(dexd, tmp_path):
    sessions, ledger, invoices = _turns(dexd, tmp_path, "broken-python", ["send_invoice", "charge_card"])
    invoice = _tool_step(sessions[0])
    [effect] = [x for x in ledger if x["phase"] == "effect" and x["tool"] == "send_invoice"]
    assert effect["effect_key"] == "" and invoice.idempotency_key not in invoices and len(invoices) == 1
    assert _tool_step(sessions[1]).kind == types_pb2.STEP_KIND_CALL_TOOL  # a read: Dex may run it again
