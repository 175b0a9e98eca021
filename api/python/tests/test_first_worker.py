"""The first Worker with its fake model (python3 -m dex.examples.first_worker):
its rules, its bad flags, and, run as the README says against a real dexd
with no provider key, a session that finishes, one that waits for approval
and one that waits for an answer."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

import dex
from dex.examples.first_worker import fake_model
from dex.v1 import types_pb2
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
    [email] = fake_model(_input(_user(1, "Email the team"))).tool_calls
    assert (email.tool, email.call_id) == ("send_email", "call-1-1")
    [ask] = fake_model(_input(_user(1, "please ask me"))).tool_calls
    assert ask.tool == "ask_user"
    # "task" is not "ask": only the word counts.
    assert [c.tool for c in fake_model(_input(_user(1, "a task"))).tool_calls] == ["lookup", "save_note"]
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


def test_bad_flags_say_why_and_exit():
    p = _first_worker("--addr", "dex:///")
    out, err = p.communicate(timeout=60)
    assert (p.returncode, err) == (1, "first_worker: dex target 'dex:///' names no address\n")
    p = _first_worker("--bogus")
    out, err = p.communicate(timeout=60)
    assert p.returncode == 2 and "unrecognized arguments: --bogus" in err


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
            email = await c.create_session("Email the team that the build is green")
            ask = await c.create_session("Ask me which city")
            done = await _until(lambda: status(plain.id, types_pb2.SESSION_STATUS_IDLE), "the plain session ends")

            approval = await waiting_step(email.id, types_pb2.STEP_KIND_AWAIT_TOOL_APPROVAL)
            question = await waiting_step(ask.id, types_pb2.STEP_KIND_AWAIT_QUESTION_ANSWER)
            await c.resolve_approval(approval.id, approved=True)
            await c.answer_question(question.id, "Paris")
            sent = await _until(lambda: status(email.id, types_pb2.SESSION_STATUS_IDLE), "the email session ends")
            answered = await _until(lambda: status(ask.id, types_pb2.SESSION_STATUS_IDLE), "the ask session ends")
            return approval, question, [x.session.history[-1].text for x in (done, sent, answered)]

    try:
        approval, question, answers = asyncio.run(main())
    finally:
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=60)
    assert p.returncode == 0, err
    assert approval.tool == "send_email"
    assert question.prompt == "Which city should I look up?"
    assert answers == [
        "Done. lookup: found 'What is Dex?'. save_note: saved note 1.",
        "Done. send_email: sent to team@example.com.",
        "Done. ask_user: Paris.",
    ]
    assert "first_worker: email to team@example.com: Email the team that the build is green" in err


def test_first_worker_refused_by_a_cluster_with_another_send_email_says_why(dexd):
    """A live Worker serving send_email without approval: the cluster refuses
    the first Worker's registration, and it says so and exits 1."""

    async def main():
        other = dex.Worker(dexd.addr, id="other", poll_wait=1.0, shutdown_grace=0.0)
        other.add_tool("send_email", lambda call: "sent", access="single_attempt")
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
    assert 'tool "send_email" is served by live worker "other" as single_attempt' in err.splitlines()[-1]
