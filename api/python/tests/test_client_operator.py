"""Against a real dexd: the operator's calls of the Go client, reconcile_outcome
and edit_history, with the statuses the cluster answers on bad use."""

from __future__ import annotations

import grpc
import pytest

import dex
from dex.v1 import types_pb2
from test_cluster import _run, _until

pytestmark = pytest.mark.e2e  # every test here starts processes


async def _idle(client: dex.Client, session_id: str):
    async def idle():
        got = await client.get_session(session_id)
        return got if got.session.status == types_pb2.SESSION_STATUS_IDLE and got.session.history else None

    return await _until(idle, f"session {session_id} went idle")


async def _code(call) -> grpc.StatusCode:
    with pytest.raises(grpc.RpcError) as e:
        await call
    return e.value.code()


def test_reconcile_outcome_settles_an_unknown_call(dexd):
    def setup(w: dex.Worker):
        @w.tool(access="single_attempt")
        def send_email(call: dex.ToolCall) -> str:
            raise RuntimeError("the mail server hung up")  # it may have sent: outcome_unknown

        @w.model
        def model(inp: dex.ModelInput):
            if any(e.kind == types_pb2.HISTORY_KIND_TOOL_RESULT for e in inp.history):
                return "Reported."
            return dex.model_output("", [{"call_id": "c1", "tool": "send_email", "arguments": {"to": "ops"}}])

    async def body(client: dex.Client):
        s = await client.create_session("mail ops")
        got = await _idle(client, s.id)
        [step] = [st for st in got.steps if st.tool == "send_email"]
        assert step.outcome == types_pb2.OUTCOME_UNKNOWN
        codes = [
            await _code(client.reconcile_outcome(step.id, types_pb2.OUTCOME_UNSPECIFIED)),
            await _code(client.reconcile_outcome("no-such-step", types_pb2.OUTCOME_SUCCEEDED)),
        ]
        await client.reconcile_outcome(step.id, types_pb2.OUTCOME_SUCCEEDED, "The mail log shows it went out.")
        codes.append(await _code(client.reconcile_outcome(step.id, types_pb2.OUTCOME_FAILED)))
        return step.id, codes, await client.get_session(s.id)

    step_id, codes, got = _run(dexd, setup, body)
    assert codes == [grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND, grpc.StatusCode.FAILED_PRECONDITION]
    [step] = [st for st in got.steps if st.id == step_id]
    assert step.outcome == types_pb2.OUTCOME_SUCCEEDED
    note = got.session.history[-1]
    assert note.kind == types_pb2.HISTORY_KIND_NOTE
    assert note.text == "An operator reconciled call c1 of send_email: it succeeded. The mail log shows it went out."


def test_edit_history_truncates_and_adds_a_note(dexd):
    def setup(w: dex.Worker):
        @w.model
        def model(inp: dex.ModelInput):
            return "Paris is in Germany."

    async def body(client: dex.Client):
        s = await client.create_session("where is Paris?")
        got = await _idle(client, s.id)
        [answer] = [e for e in got.session.history if e.kind == types_pb2.HISTORY_KIND_ASSISTANT]
        resp = await client.edit_history(s.id, truncate_from_seq=answer.seq, note="The last answer was wrong.")
        # A session whose turn runs (its agent's model has no Worker) is refused.
        busy = await client.create_session("hello", agent="nobody-serves-this")
        codes = [
            await _code(client.edit_history(busy.id, note="x")),
            await _code(client.edit_history(s.id)),
            await _code(client.edit_history("no-such-session", note="x")),
        ]
        return resp, codes, await client.get_session(s.id)

    resp, codes, got = _run(dexd, setup, body)
    assert codes == [grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND]
    assert [(e.kind, e.text) for e in got.session.history] == [
        (types_pb2.HISTORY_KIND_USER, "where is Paris?"),
        (types_pb2.HISTORY_KIND_NOTE, "The last answer was wrong."),
    ]
    assert resp.history_count == 2
    assert resp.history_size > 0
