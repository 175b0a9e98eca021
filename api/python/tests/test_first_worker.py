"""The first Worker with its fake model (python3 -m dex.examples.first_worker):
its rules, its bad flags, and, run as the README says against a real dexd
with no provider key, a session that finishes, one that waits for approval
and one that waits for an answer; beside the Go demo Worker of make run
(cmd/dexworker), it registers the same policies and a deploy waits for
approval."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

import grpc
import pytest

import dex
from conftest import BIN
from dex.examples.first_worker import fake_model
from dex.v1 import admin_pb2, admin_pb2_grpc, types_pb2
from test_cluster import _until

PYTHON_DIR = Path(__file__).resolve().parents[1]


def _input(*entries: types_pb2.HistoryEntry) -> dex.ModelInput:
    return dex.ModelInput(session_id="s", step_id="st", attempt=1, history=list(entries), tools=[])


def _user(seq: int, text: str) -> types_pb2.HistoryEntry:
    return types_pb2.HistoryEntry(seq=seq, kind=types_pb2.HISTORY_KIND_USER, text=text)


def _first_worker(*args: str) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}  # it needs none
    env["PYTHONPATH"] = str(PYTHON_DIR)
    return subprocess.Popen([sys.executable, "-m", "dex.examples.first_worker", *args], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_fake_model_answers_by_its_rules():
    out = fake_model(_input(_user(3, "What is Dex?")))
    assert [(c.call_id, c.tool, c.arguments) for c in out.tool_calls] == [
        ("call-3-1", "lookup", '{"query":"What is Dex?"}'), ("call-3-2", "save_note", '{"note":"What is Dex?"}')]
    [deploy] = fake_model(_input(_user(1, "Deploy the app"))).tool_calls
    assert (deploy.call_id, deploy.tool, deploy.arguments) == (
        "call-1-1", "deploy", '{"service":"demo","request":"Deploy the app"}')
    [ask] = fake_model(_input(_user(1, "please ask me"))).tool_calls
    assert ask.tool == "ask_user"
    # The words of the Go demo Worker: runs of letters, "deploy" before "ask".
    assert [c.tool for c in fake_model(_input(_user(1, "ask, then deploy_2"))).tool_calls] == ["deploy"]
    for other in ("a task", "redeploy it", "Email the team"):
        assert [c.tool for c in fake_model(_input(_user(1, other))).tool_calls] == ["lookup", "save_note"], other
    done = fake_model(_input(_user(1, "hi"), types_pb2.HistoryEntry(seq=2, kind=types_pb2.HISTORY_KIND_ASSISTANT),
                             types_pb2.HistoryEntry(seq=3, kind=types_pb2.HISTORY_KIND_TOOL_RESULT, tool="lookup",
                                                    text="found 'hi'")))
    assert done == "Done. lookup: found 'hi'."
    # The tools finish in any order; the answer follows the calls'.
    both = fake_model(_input(_user(1, "hi"), types_pb2.HistoryEntry(seq=2, kind=types_pb2.HISTORY_KIND_ASSISTANT),
                             types_pb2.HistoryEntry(seq=3, kind=types_pb2.HISTORY_KIND_TOOL_RESULT, call_id="call-1-2",
                                                    tool="save_note", text="saved note 1"),
                             types_pb2.HistoryEntry(seq=4, kind=types_pb2.HISTORY_KIND_TOOL_RESULT, call_id="call-1-1",
                                                    tool="lookup", text="found 'hi'")))
    assert both == "Done. lookup: found 'hi'. save_note: saved note 1."
    assert fake_model(_input(types_pb2.HistoryEntry(seq=1, kind=types_pb2.HISTORY_KIND_SUMMARY, text="s"))) == "Done."


@pytest.mark.e2e
def test_bad_flags_say_why_and_exit():
    p = _first_worker("--addr", "dex:///")
    out, err = p.communicate(timeout=60)
    assert (p.returncode, err) == (1, "first_worker: dex target 'dex:///' names no address\n")
    p = _first_worker("--bogus")
    out, err = p.communicate(timeout=60)
    assert p.returncode == 2 and "unrecognized arguments: --bogus" in err


@pytest.mark.e2e
def test_first_worker_runs_with_no_key(dexd):
    p = _first_worker("--addr", dexd.addr)

    async def main():
        async with dex.Client(dexd.addr) as c:
            async def status(sid: str, want: int):
                got = await c.get_session(sid)
                return got if got.session.status == want else None

            async def waiting_step(sid: str, kind: int):
                got = await _until(lambda: status(sid, types_pb2.SESSION_STATUS_WAITING), f"{sid} waits")
                [st] = [st for st in got.steps if st.kind == kind and st.status == types_pb2.STEP_STATUS_WAITING]
                return st

            plain = await c.create_session("What is Dex?")
            deploy = await c.create_session("Deploy the app")
            ask = await c.create_session("Ask me which city")
            done = await _until(lambda: status(plain.id, types_pb2.SESSION_STATUS_IDLE), "the plain session ends")

            approval = await waiting_step(deploy.id, types_pb2.STEP_KIND_AWAIT_TOOL_APPROVAL)
            question = await waiting_step(ask.id, types_pb2.STEP_KIND_AWAIT_QUESTION_ANSWER)
            await c.resolve_approval(approval.id, approved=True)
            await c.answer_question(question.id, "Paris")
            deployed = await _until(lambda: status(deploy.id, types_pb2.SESSION_STATUS_IDLE), "the deploy session ends")
            answered = await _until(lambda: status(ask.id, types_pb2.SESSION_STATUS_IDLE), "the ask session ends")
            return approval, question, [x.session.history[-1].text for x in (done, deployed, answered)]

    try:
        approval, question, answers = asyncio.run(main())
    finally:
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=60)
    assert p.returncode == 0, err
    assert approval.tool == "deploy"
    assert question.prompt == "Which city should I look up?"
    assert answers == [
        "Done. lookup: found 'What is Dex?'. save_note: saved note 1.",
        "Done. deploy: deployed demo.",
        "Done. ask_user: Paris.",
    ]
    assert "first_worker: deploying demo: Deploy the app" in err


@pytest.mark.e2e
def test_first_worker_refused_by_a_cluster_with_another_send_email_says_why(dexd):
    """A live Worker serving send_email with approval (the Go demo's needs
    none): the cluster refuses the first Worker's registration, and it says
    so and exits 1."""

    async def main():
        other = dex.Worker(dexd.addr, id="other", poll_wait=1.0, shutdown_grace=0.0)
        other.add_tool("send_email", lambda call: "sent", access="single_attempt", needs_approval=True)
        other.model(lambda inp: "hello")
        stop = asyncio.Event()
        run = asyncio.ensure_future(other.run(stop))
        try:
            async with dex.Client(dexd.addr) as c:  # once it ran a session, it is registered
                s = await c.create_session("hi")

                async def answered():
                    got = await c.get_session(s.id)
                    return got.session.status == types_pb2.SESSION_STATUS_IDLE and len(got.session.history) == 2

                await _until(answered, "the other Worker answered")
            p = _first_worker("--addr", dexd.addr)
            _, err = await asyncio.to_thread(p.communicate, timeout=60)
            return p.returncode, err
        finally:
            stop.set()
            await asyncio.wait_for(run, 15)

    code, err = asyncio.run(main())
    assert code == 1, err
    assert 'tool "send_email" is served by live worker "other" as single_attempt, needs approval;' in err.splitlines()[-1]


def _workers(addr: str) -> dict:
    """The registered Workers' tools, by Worker id then tool name."""
    with grpc.insecure_channel(addr) as ch:
        resp = admin_pb2_grpc.AdminServiceStub(ch).ListWorkers(admin_pb2.ListWorkersRequest(), timeout=10)
    return {ws.worker.id: {t.name: t for t in ws.worker.tools} for ws in resp.workers}


def _policy(spec: types_pb2.ToolSpec) -> types_pb2.ToolSpec:
    """A tool's policy: its registration without its name, description and agents."""
    p = types_pb2.ToolSpec()
    p.CopyFrom(spec)
    p.ClearField("name")
    p.ClearField("description")
    p.ClearField("agents")
    return p


@pytest.mark.e2e
def test_first_worker_serves_the_go_demo_workers_policies(dexd, tmp_path):
    """Run beside the Go demo Worker of make run, the first Worker registers
    (every tool it serves, the demo serves with the very same policy), and
    "deploy the app" waits for approval of deploy whichever model answers."""
    if not (BIN / "dexworker").exists():
        pytest.skip(f"{BIN / 'dexworker'} is missing: run make build")
    demo_log = open(tmp_path / "dexworker.log", "wb")
    demo = subprocess.Popen([str(BIN / "dexworker"), "--addr", dexd.addr, "--ledger", str(tmp_path / "ledger.jsonl"),
                             "--id", "demo-go", "--poll-wait", "1s", "--shutdown-grace", "1s"],
                            stdout=demo_log, stderr=subprocess.STDOUT)
    first = None

    async def registered(p: subprocess.Popen, worker_id: str, what: str) -> dict:
        async def listed():
            if p.poll() is not None:
                raise AssertionError(f"{what} exited {p.returncode}: {p.stderr.read() if p.stderr else ''}")
            return _workers(dexd.addr).get(worker_id)

        return await _until(listed, f"{what} registered")

    async def main():
        nonlocal first
        go_tools = await registered(demo, "demo-go", "the Go demo Worker")
        first = _first_worker("--addr", dexd.addr, "--id", "first")
        first_tools = await registered(first, "first", "the first Worker")
        async with dex.Client(dexd.addr) as c:
            s = await c.create_session("deploy the app")

            async def waiting():
                got = await c.get_session(s.id)
                return got if got.session.status == types_pb2.SESSION_STATUS_WAITING else None

            got = await _until(waiting, "the deploy session waits")
            [approval] = [st for st in got.steps if st.status == types_pb2.STEP_STATUS_WAITING]
            await c.resolve_approval(approval.id, approved=True)

            async def idle():
                got = await c.get_session(s.id)
                return got if got.session.status == types_pb2.SESSION_STATUS_IDLE else None

            await _until(idle, "the approved deploy session ends")
        return go_tools, first_tools, approval, _workers(dexd.addr)

    try:
        go_tools, first_tools, approval, listed = asyncio.run(main())
    finally:
        if first is not None:
            first.send_signal(signal.SIGTERM)
            _, err = first.communicate(timeout=60)
        demo.send_signal(signal.SIGTERM)
        demo.wait(60)
        demo_log.close()
    assert first.returncode == 0, err
    assert demo.returncode == 0, (tmp_path / "dexworker.log").read_text()
    assert sorted(first_tools) == ["deploy", "lookup", "save_note", "send_email"]
    assert set(first_tools) <= set(go_tools)
    for name in first_tools:
        assert _policy(first_tools[name]) == _policy(go_tools[name]), name
    assert (go_tools["send_email"].access, go_tools["send_email"].needs_approval) == (
        types_pb2.TOOL_ACCESS_SINGLE_ATTEMPT, False)
    assert (go_tools["deploy"].access, go_tools["deploy"].needs_approval) == (
        types_pb2.TOOL_ACCESS_IDEMPOTENT_WRITE, True)
    assert {"demo-go", "first"} <= set(listed), "a Worker left the cluster during the session"
    assert (approval.kind, approval.tool) == (types_pb2.STEP_KIND_AWAIT_TOOL_APPROVAL, "deploy")
