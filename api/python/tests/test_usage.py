"""Model usage: what a model handler returns with its output reaches the
wire as ModelOutput.usage (against a fake node), a bad one is refused, and
the demo Worker's scripted model reports cmd/dexworker's fixed usage unless
its script output gives "usage"; on a real dexd the session totals it."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import grpc.aio
import pytest

import dex
from conftest import free_port
from dex.demo.flags import parse_flags
from dex.demo.script import DEMO_MODEL_NAME, DEMO_USAGE, Model, ScriptError, parse_script
from dex.v1 import types_pb2, workers_pb2, workers_pb2_grpc
from test_cluster import _until

PYDIR = Path(__file__).resolve().parents[1]


def _usage(u: types_pb2.Usage) -> tuple:
    return (u.input_tokens, u.output_tokens, u.cost_micros, u.model)


class Cluster(workers_pb2_grpc.WorkerServiceServicer):
    """Hands out one RunModel task per history and keeps each report."""

    def __init__(self, histories: list) -> None:
        self.tasks = [
            workers_pb2.Task(ref=types_pb2.AttemptRef(step_id=f"m{i}", attempt=1, token=f"t{i}"), session_id="s",
                             kind=types_pb2.STEP_KIND_RUN_MODEL, runner=workers_pb2.TASK_RUNNER_MODEL,
                             handler=workers_pb2.TASK_HANDLER_MODEL, heartbeat_interval_ms=100,
                             model_input=workers_pb2.ModelInput(history=h))
            for i, h in enumerate(histories)]
        self.want = len(self.tasks)
        self.reports: dict = {}
        self.done = asyncio.Event()

    async def RegisterWorker(self, request, context):
        return workers_pb2.RegisterWorkerResponse(heartbeat_interval_ms=100, heartbeat_timeout_ms=3000)

    async def PollTask(self, request, context):
        if self.tasks:
            tasks, self.tasks = self.tasks, []
            return workers_pb2.PollTaskResponse(tasks=tasks)
        await asyncio.sleep(min(request.wait_ms / 1000, 0.2))
        return workers_pb2.PollTaskResponse()

    async def ClaimTask(self, request, context):
        return workers_pb2.ClaimTaskResponse()

    async def Heartbeat(self, request, context):
        return workers_pb2.HeartbeatResponse()

    async def ReportTask(self, request, context):
        self.reports[request.ref.step_id] = request.result
        if len(self.reports) == self.want:
            self.done.set()
        return workers_pb2.ReportTaskResponse()


def _run_model(handler, histories: list) -> dict:
    """Runs handler on one RunModel task per history against a fake node;
    returns the reported results by step id (m0, m1, ...)."""

    async def main():
        cluster = Cluster(histories)
        server = grpc.aio.server()
        workers_pb2_grpc.add_WorkerServiceServicer_to_server(cluster, server)
        addr = f"127.0.0.1:{free_port()}"
        server.add_insecure_port(addr)
        await server.start()
        w = dex.Worker(addr, id="w1", poll_wait=0.2)
        w.model(handler)
        stop = asyncio.Event()
        run = asyncio.ensure_future(w.run(stop))
        try:
            await asyncio.wait_for(cluster.done.wait(), 20)
        finally:
            stop.set()
            await asyncio.wait_for(run, 20)
            await server.stop(None)
        return cluster.reports

    return asyncio.run(main())


def _user(seq: int, text: str) -> types_pb2.HistoryEntry:
    return types_pb2.HistoryEntry(seq=seq, kind=types_pb2.HISTORY_KIND_USER, text=text)


def test_a_model_handlers_usage_reaches_the_wire():
    """Each way a handler can give its usage (model_output's usage=, a dict's
    "usage" as a Usage or a dict, a ModelOutput built by hand) is sent in
    ModelOutput.usage; an output without one is sent without one."""
    answers = {
        "built": lambda: dex.model_output("a", [{"call_id": "c1", "tool": "lookup", "arguments": {}}],
                                          usage=dex.Usage(input_tokens=1200, output_tokens=80, cost_micros=3456,
                                                          model="gpt-test")),
        "dict": lambda: {"text": "b", "usage": {"input_tokens": 7, "output_tokens": 3, "model": "m"}},
        "dict-usage": lambda: {"text": "c", "usage": dex.Usage(output_tokens=2**64 - 1)},
        "proto": lambda: types_pb2.ModelOutput(text="d", usage=types_pb2.Usage(input_tokens=5, cost_micros=9)),
        "none": lambda: "e",
    }
    names = list(answers)

    def model(inp: dex.ModelInput):
        return answers[inp.history[0].text]()

    reports = _run_model(model, [[_user(1, n)] for n in names])
    outs = {n: reports[f"m{i}"].model_output for i, n in enumerate(names)}
    assert _usage(outs["built"].usage) == (1200, 80, 3456, "gpt-test")
    assert [(c.call_id, c.tool) for c in outs["built"].tool_calls] == [("c1", "lookup")]
    assert _usage(outs["dict"].usage) == (7, 3, 0, "m")
    assert _usage(outs["dict-usage"].usage) == (0, 2**64 - 1, 0, "")
    assert _usage(outs["proto"].usage) == (5, 0, 9, "")
    assert outs["none"].text == "e" and not outs["none"].HasField("usage")


def test_a_bad_usage_fails_the_attempt_and_sends_no_output():
    reports = _run_model(lambda inp: {"text": "x", "usage": {"input_tokens": -1}}, [[_user(1, "hi")]])
    res = reports["m0"]
    assert res.WhichOneof("outcome") == "failure"
    assert "usage input_tokens must be a whole number from 0 to 2**64-1, not -1" in res.failure.error


@pytest.mark.parametrize("usage,msg", [
    (dex.Usage(input_tokens=-1), "usage input_tokens must be a whole number"),
    (dex.Usage(output_tokens=1.5), "usage output_tokens must be a whole number"),
    (dex.Usage(cost_micros=True), "usage cost_micros must be a whole number"),
    (dex.Usage(cost_micros=2**64), "usage cost_micros must be a whole number"),
    (dex.Usage(model=3), "usage model must be a str"),
    ({"input_tokens": 1, "cost_usd": 0.1}, "usage has unknown fields 'cost_usd'"),
    ("100 tokens", "usage is a str"),
])
def test_model_output_refuses_a_bad_usage(usage, msg):
    with pytest.raises(dex.DexError, match=msg.replace("*", r"\*")):
        dex.model_output("hi", usage=usage)


class _Ledger:
    def append(self, **line) -> None:
        pass


def _demo_input(*entries: types_pb2.HistoryEntry, attempt: int = 1) -> dex.ModelInput:
    return dex.ModelInput(session_id="s", step_id="st", attempt=attempt, history=list(entries), tools=[])


SCRIPT = json.dumps({"turns": [
    {"match": "pricey", "outputs": [
        {"text": "expensive", "usage": {"input_tokens": 400, "output_tokens": 100, "cost_micros": 900}}]},
    {"match": "partial", "outputs": [{"text": "cheap", "usage": {"output_tokens": 5}}]},
    {"match": "flaky", "outputs": [{"error": {"type": "rate_limit"}}, {"text": "ok"}]},
]})


def test_the_demo_model_reports_the_go_demos_fixed_usage_unless_the_script_gives_one():
    assert DEMO_USAGE == {"input_tokens": 100, "output_tokens": 20, "cost_micros": 150}
    fixed = (100, 20, 150, "dex-demo")
    assert DEMO_MODEL_NAME == "dex-demo"
    demo = Model(None, _Ledger(), "w")
    # The built-in demo: its tool calls, its answer, and past its outputs.
    _, first, _ = demo.output(_demo_input(_user(1, "hi")))
    assert len(first.tool_calls) == 3 and _usage(first.usage) == fixed
    h = [_user(1, "hi"), types_pb2.HistoryEntry(seq=2, kind=types_pb2.HISTORY_KIND_ASSISTANT)]
    _, answer, _ = demo.output(_demo_input(*h))
    assert answer.text.startswith("Done") and _usage(answer.usage) == fixed
    _, past, _ = demo.output(_demo_input(*h, types_pb2.HistoryEntry(seq=3, kind=types_pb2.HISTORY_KIND_ASSISTANT)))
    assert past.text == "done" and _usage(past.usage) == fixed

    scripted = Model(parse_script(SCRIPT), _Ledger(), "w")
    _, out, _ = scripted.output(_demo_input(_user(1, "pricey")))
    assert _usage(out.usage) == (400, 100, 900, "dex-demo")
    _, out, _ = scripted.output(_demo_input(_user(1, "partial")))
    assert _usage(out.usage) == (0, 5, 0, "dex-demo")  # a field left out is 0, as in Go
    _, out, err = scripted.output(_demo_input(_user(1, "flaky")))
    assert out is None and err is not None
    _, out, _ = scripted.output(_demo_input(_user(1, "flaky"), attempt=2))
    assert out.text == "ok" and _usage(out.usage) == fixed
    _, out, _ = scripted.output(_demo_input(_user(1, "anything else")))
    assert _usage(out.usage) == fixed


def test_the_demo_models_usage_reaches_the_wire():
    model = Model(parse_script(SCRIPT), _Ledger(), "w")
    reports = _run_model(model.run_model, [[_user(1, "pricey")], [_user(1, "other")]])
    assert _usage(reports["m0"].model_output.usage) == (400, 100, 900, "dex-demo")
    assert _usage(reports["m1"].model_output.usage) == (100, 20, 150, "dex-demo")


@pytest.mark.parametrize("usage,msg", [
    ('{"input_tokens": -1}', "usage: field 'input_tokens' must be from 0 to 2\\*\\*64-1, not -1"),
    ('{"output_tokens": 1.5}', "usage: field 'output_tokens' has the wrong type"),
    ('{"cost_micros": "150"}', "usage: field 'cost_micros' has the wrong type"),
    ('{"cost_micros": 18446744073709551616}', "must be from 0 to 2\\*\\*64-1"),
    ('{"tokens": 5}', 'unknown field "tokens"'),
    ('[5]', "field 'usage' has the wrong type"),
])
def test_the_demo_refuses_a_bad_scripted_usage(usage, msg):
    with pytest.raises(ScriptError, match=msg):
        parse_script('{"turns":[{"match":"x","outputs":[{"text":"t","usage":%s}]}]}' % usage)


def test_the_demo_takes_the_largest_usage_exactly():
    s = parse_script('{"default":[{"text":"t","usage":{"input_tokens":18446744073709551615}}]}')
    assert s.default[0].usage_proto().input_tokens == 2**64 - 1


def test_the_demos_help_says_what_usage_it_reports(capsys):
    assert parse_flags(["--help"]) is None
    out = " ".join(capsys.readouterr().out.split())
    assert ('Each scripted model call reports a fixed usage (100 input and 20 output tokens, cost 150 micro-units, '
            'model "dex-demo") unless its script output gives "usage"') in out


@pytest.mark.e2e
def test_a_real_dexd_totals_the_python_demos_usage(dexd, tmp_path):
    """The Python demo Worker, run as make build's bin/dexworker-python runs
    it, against a real dexd: a session answered by the demo model totals its
    fixed usage per model call, one whose script output gives "usage" that."""
    script = tmp_path / "script.json"
    script.write_text(SCRIPT)
    log = open(tmp_path / "worker.log", "wb")
    p = subprocess.Popen([sys.executable, "-m", "dex.demo", "--addr", dexd.addr, "--ledger", str(tmp_path / "ledger"),
                          "--script", str(script), "--id", "py-usage", "--poll-wait", "1s", "--shutdown-grace", "1s"],
                         env={**os.environ, "PYTHONPATH": str(PYDIR)}, stdout=log, stderr=subprocess.STDOUT)

    async def main():
        async with dex.Client(dexd.addr) as c:
            pricey = await c.create_session("pricey")
            plain = await c.create_session("hello")

            async def idle(sid: str):
                got = await c.get_session(sid)
                return got if got.session.status == types_pb2.SESSION_STATUS_IDLE and len(got.session.history) > 1 else None

            return (await _until(lambda: idle(pricey.id), "the pricey session ends", 60),
                    await _until(lambda: idle(plain.id), "the demo session ends", 60))

    try:
        pricey, plain = asyncio.run(main())
    finally:
        p.terminate()
        p.wait(30)
        log.close()
    u = pricey.session.usage
    assert (u.model_calls, u.input_tokens, u.output_tokens, u.cost_micros) == (1, 400, 100, 900)
    # The built-in demo: a model call with three tool calls, then its answer.
    u = plain.session.usage
    assert (u.model_calls, u.tool_calls, u.input_tokens, u.output_tokens, u.cost_micros) == (2, 3, 200, 40, 300)
    steps = [st for st in plain.steps if st.kind == types_pb2.STEP_KIND_RUN_MODEL]
    assert [_usage(st.usage) for st in steps] == [(100, 20, 150, "dex-demo")] * 2
