"""A Worker's Prometheus metrics: the Go Worker's names and labels, each
task counted once by how it ended (against a fake cluster), served at
/metrics, and a clear refusal when prometheus_client is missing."""

from __future__ import annotations

import asyncio
import socket
import sys
import urllib.error
import urllib.request

import grpc
import grpc.aio
import pytest

import dex
from dex.demo.__main__ import main as demo_main
from dex.metrics import HANDLER_BUCKETS, split_host_port
from dex.v1 import types_pb2, workers_pb2, workers_pb2_grpc
from conftest import free_port

TOOL, MODEL = workers_pb2.TASK_RUNNER_TOOL, workers_pb2.TASK_RUNNER_MODEL


def _task(step: str, kind: int, runner: int, handler: int, tool: str = "") -> workers_pb2.Task:
    return workers_pb2.Task(ref=types_pb2.AttemptRef(step_id=step, attempt=1, token="t-" + step), session_id="s",
                            kind=kind, runner=runner, handler=handler, tool=tool, heartbeat_interval_ms=100,
                            access=types_pb2.TOOL_ACCESS_READ)


def _tool_task(step: str, tool: str) -> workers_pb2.Task:
    return _task(step, types_pb2.STEP_KIND_CALL_TOOL, TOOL, workers_pb2.TASK_HANDLER_TOOL, tool)


class Cluster(workers_pb2_grpc.WorkerServiceServicer):
    """Hands out its tasks at the first poll; refuses the claim of step
    "claim-refused" and the report of "report-refused", and cancels
    "cancelled" at its first heartbeat."""

    def __init__(self, tasks: list) -> None:
        self.tasks = tasks

    async def RegisterWorker(self, request, context):
        return workers_pb2.RegisterWorkerResponse(heartbeat_interval_ms=100, heartbeat_timeout_ms=3000)

    async def PollTask(self, request, context):
        if self.tasks:
            tasks, self.tasks = self.tasks, []
            return workers_pb2.PollTaskResponse(tasks=tasks)
        await asyncio.sleep(min(request.wait_ms / 1000, 0.2))
        return workers_pb2.PollTaskResponse()

    async def ClaimTask(self, request, context):
        if request.ref.step_id == "claim-refused":
            await context.abort(grpc.StatusCode.FAILED_PRECONDITION, "the attempt is not current")
        return workers_pb2.ClaimTaskResponse()

    async def Heartbeat(self, request, context):
        return workers_pb2.HeartbeatResponse(cancelled=request.ref.step_id == "cancelled", reason="session cancelled")

    async def ReportTask(self, request, context):
        if request.ref.step_id == "report-refused":
            await context.abort(grpc.StatusCode.FAILED_PRECONDITION, "the attempt is not current")
        return workers_pb2.ReportTaskResponse()

    async def AppendOutputs(self, request, context):
        return workers_pb2.AppendOutputsResponse(answers=[
            workers_pb2.AppendOutputResponse(next_offset=a.offset + len(a.text.encode())) for a in request.appends])


def _value(m: dex.WorkerMetrics, name: str, **labels) -> float:
    return m.registry.get_sample_value(name, labels) or 0.0


def test_each_task_is_counted_once_by_how_it_ended_with_the_go_workers_labels():
    tasks = [
        _tool_task("completed", "lookup"),
        _tool_task("failed", "broken"),
        _tool_task("cannot-run", "no_such_tool"),
        _tool_task("claim-refused", "lookup"),
        _tool_task("report-refused", "lookup"),
        _tool_task("cancelled", "slow"),
        _task("model", types_pb2.STEP_KIND_RUN_MODEL, MODEL, workers_pb2.TASK_HANDLER_MODEL),
    ]
    m = dex.WorkerMetrics()

    async def main():
        server = grpc.aio.server()
        workers_pb2_grpc.add_WorkerServiceServicer_to_server(Cluster(tasks), server)
        addr = f"127.0.0.1:{free_port()}"
        server.add_insecure_port(addr)
        await server.start()
        w = dex.Worker(addr, id="w-metrics", poll_wait=0.2, shutdown_grace=1.0, metrics=m)

        @w.tool(access="read")
        async def lookup(call):
            return "found"

        @w.tool(access="read")
        async def broken(call):
            raise RuntimeError("the tool broke")

        @w.tool(access="read")
        async def slow(call):
            await asyncio.sleep(30)  # until the cluster cancels the attempt

        @w.model
        async def model(inp):
            return "hello"

        stop = asyncio.Event()
        run = asyncio.ensure_future(w.run(stop))
        try:
            for _ in range(400):
                counted = sum(s.value for metric in m.registry.collect() if metric.name == "dex_worker_tasks"
                              for s in metric.samples if s.name == "dex_worker_tasks_total")
                if counted >= len(tasks):
                    break
                await asyncio.sleep(0.025)
        finally:
            stop.set()
            await asyncio.wait_for(run, 15)
            await server.stop(None)

    asyncio.run(main())
    tasks_total = "dex_worker_tasks_total"
    assert {o: _value(m, tasks_total, kind="call_tool", outcome=o) for o in (
        "completed", "failed", "cannot_run", "claim_refused", "report_refused", "cancelled")} == {
        "completed": 1, "failed": 1, "cannot_run": 1, "claim_refused": 1, "report_refused": 1, "cancelled": 1}
    assert _value(m, tasks_total, kind="run_model", outcome="completed") == 1
    # Handlers ran for completed, report-refused and the model (ok), failed and cancelled (error).
    hist = "dex_worker_handler_duration_seconds_count"
    assert _value(m, hist, kind="call_tool", outcome="ok") == 2
    assert _value(m, hist, kind="call_tool", outcome="error") == 2
    assert _value(m, hist, kind="run_model", outcome="ok") == 1


def test_the_buckets_are_the_go_workers():
    # prometheus.ExponentialBuckets(0.005, 3, 12), as Go prints the le labels.
    assert len(HANDLER_BUCKETS) == 12
    assert HANDLER_BUCKETS[0] == 0.005 and HANDLER_BUCKETS[-1] == pytest.approx(885.735)


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, ""


def test_serve_metrics_answers_at_metrics_on_the_port_it_chose():
    m = dex.WorkerMetrics()
    m.task(types_pb2.STEP_KIND_CALL_TOOL, "completed")
    server = dex.serve_metrics("127.0.0.1:0", m.registry)
    try:
        host, port = split_host_port(server.address)
        assert host == "127.0.0.1" and port > 0
        status, body = _get(f"http://{server.address}/metrics")
        assert status == 200
        assert 'dex_worker_tasks_total{kind="call_tool",outcome="completed"} 1.0' in body
        assert "# TYPE dex_worker_handler_duration_seconds histogram" in body
        assert _get(f"http://{server.address}/")[0] == 404
    finally:
        server.close()


def test_serve_metrics_refuses_a_busy_port_and_a_bad_address():
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        addr = f"127.0.0.1:{busy.getsockname()[1]}"
        with pytest.raises(dex.DexError, match=f"listen on {addr}"):
            dex.serve_metrics(addr, dex.WorkerMetrics().registry)
    with pytest.raises(dex.DexError, match="not HOST:PORT"):
        dex.serve_metrics("localhost", dex.WorkerMetrics().registry)


def test_without_prometheus_client_metrics_are_refused_with_the_reason(monkeypatch):
    monkeypatch.setitem(sys.modules, "prometheus_client", None)  # import prometheus_client fails
    with pytest.raises(dex.DexError, match="need the prometheus_client package"):
        dex.WorkerMetrics()


def test_demo_worker_refuses_metrics_addr_without_prometheus_client(monkeypatch, tmp_path, capsys):
    monkeypatch.setitem(sys.modules, "prometheus_client", None)
    code = demo_main(["--addr", "127.0.0.1:1", "--ledger", str(tmp_path / "ledger.jsonl"),
                      "--metrics-addr", "127.0.0.1:0"])
    assert code == 1
    err = capsys.readouterr().err
    assert "dexworker: --metrics-addr 127.0.0.1:0: Worker metrics need the prometheus_client package" in err
    assert "dexworker starting" not in err  # it stopped before running


def test_demo_worker_refuses_a_busy_metrics_port(tmp_path, capsys):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        addr = f"127.0.0.1:{busy.getsockname()[1]}"
        code = demo_main(["--addr", "127.0.0.1:1", "--ledger", str(tmp_path / "ledger.jsonl"), "--metrics-addr", addr])
    assert code == 1
    assert f"dexworker: --metrics-addr {addr}: listen on {addr}" in capsys.readouterr().err
