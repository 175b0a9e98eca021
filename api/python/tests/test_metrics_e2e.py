"""The demo Worker's --metrics-addr, as a process: it serves /metrics on the
port it chose (and logged) before the cluster answers, and its task
counters move as it runs a session against a real dexd."""

from __future__ import annotations

import pytest

from conftest import free_port
from demo_worker import DemoWorker, run_session, sample, scrape

pytestmark = pytest.mark.e2e  # every test here starts processes


def test_metrics_are_served_before_the_cluster_answers(tmp_path):
    nothing = f"127.0.0.1:{free_port()}"  # bound and closed: nothing listens
    w = DemoWorker("--addr", nothing, "--ledger", str(tmp_path / "ledger.jsonl"), "--metrics-addr", "127.0.0.1:0")
    try:
        served = w.wait_for("serving metrics", 10)
        w.wait_for(f"cannot register with {nothing}", 10)
        body = scrape(served["addr"])
    finally:
        assert w.stop() == 0, w.text()
    assert served["addr"].startswith("127.0.0.1:") and not served["addr"].endswith(":0")
    # The Go Worker's families, and the process's own.
    assert "# TYPE dex_worker_tasks_total counter" in body
    assert "# TYPE dex_worker_handler_duration_seconds histogram" in body
    assert "process_cpu_seconds_total" in body


def test_the_task_counters_move_as_the_worker_runs_a_session(dexd, tmp_path):
    w = DemoWorker("--addr", dexd.addr, "--ledger", str(tmp_path / "ledger.jsonl"), "--id", "w-metrics",
                   "--poll-wait", "1s", "--metrics-addr", "127.0.0.1:0")
    try:
        addr = w.wait_for("serving metrics", 10)["addr"]
        w.wait_for("registered with leader n1", 20)
        before = scrape(addr)
        text = run_session(dexd.addr, "hi")
        after = scrape(addr)
    finally:
        assert w.stop() == 0, w.text()
    assert text.startswith("Done:"), text
    completed = {"kind": "run_model", "outcome": "completed"}
    assert sample(before, "dex_worker_tasks_total", **completed) == 0
    # The demo model's two calls: one asking for the tools, one answering.
    assert sample(after, "dex_worker_tasks_total", **completed) == 2
    assert sample(after, "dex_worker_tasks_total", kind="call_tool", outcome="completed") >= 1
    assert sample(after, "dex_worker_handler_duration_seconds_count", kind="run_model", outcome="ok") == 2
