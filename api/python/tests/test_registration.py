"""Registration and bad input: what a user gets wrong gets a clear error."""

from __future__ import annotations

import pytest

import dex
from dex.demo.script import Model, ScriptError, parse_script
from dex.v1 import types_pb2


def worker() -> dex.Worker:
    return dex.Worker("127.0.0.1:1", id="w")


def test_tool_with_its_policy_is_registered():
    w = worker()

    @w.tool(access="idempotent_write", needs_approval=True, run_timeout=4)
    def deploy(call: dex.ToolCall) -> str:
        """Deploys."""
        return "ok"

    @w.tool("build", access="idempotent_write", long_running=True, poll_interval=0.5)
    async def start(call: dex.ToolCall) -> dex.ToolResult:
        return dex.ToolResult("started", task_id="t1")

    @w.poll("build")
    async def poll(call: dex.ToolCall):
        return True, "built"

    w.check()
    spec = w.tools["deploy"].spec
    assert spec.access == types_pb2.TOOL_ACCESS_IDEMPOTENT_WRITE
    assert spec.needs_approval and spec.run_timeout_ms == 4000 and spec.description == "Deploys."
    assert w.tools["build"].spec.long_running and w.tools["build"].spec.poll_interval_ms == 500
    assert w.tools["build"].poll is poll


def test_tool_without_a_policy_is_refused():
    w = worker()
    with pytest.raises(dex.DexError, match="tool 'lookup' has no policy"):
        @w.tool()
        def lookup(call):
            return ""
    assert "lookup" not in w.tools


@pytest.mark.parametrize("name,kwargs,msg", [
    ("lookup", {"access": "write"}, "unknown access 'write'"),
    ("ask_user", {"access": "read"}, "built-in of the cluster"),
    ("sleep", {"access": "read"}, "built-in of the cluster"),
    ("lookup", {"access": "read", "poll_interval": 1}, "needs long_running"),
    ("lookup", {"access": "read", "run_timeout": -1}, "run_timeout must be between"),
    ("", {"access": "read"}, "has no name"),
])
def test_bad_policy_is_refused(name, kwargs, msg):
    with pytest.raises(dex.DexError, match=msg):
        worker().add_tool(name, lambda c: "", **kwargs)


def test_tool_registered_twice_is_refused():
    w = worker()
    w.add_tool("lookup", lambda c: "", access="read")
    with pytest.raises(dex.DexError, match="registered twice"):
        w.add_tool("lookup", lambda c: "", access="read")


def test_long_running_tool_needs_a_poll_handler():
    w = worker()
    w.add_tool("build", lambda c: "", access="idempotent_write", long_running=True)
    with pytest.raises(dex.DexError, match="long-running tool 'build' has no poll handler"):
        w.check()
    with pytest.raises(dex.DexError, match="register the tool first"):
        w.poll("nope")(lambda c: (True, ""))
    w.add_tool("lookup", lambda c: "", access="read")
    with pytest.raises(dex.DexError, match="not long_running"):
        w.poll("lookup")(lambda c: (True, ""))


def test_worker_needs_a_tool_or_a_model():
    with pytest.raises(dex.DexError, match="needs a tool or a model"):
        worker().check()
    with pytest.raises(dex.DexError, match="concurrency must be positive"):
        dex.Worker("127.0.0.1:1", concurrency=0)


def test_model_output_without_a_call_id_is_refused():
    with pytest.raises(dex.DexError, match=r"tool call 1 of the model output \(tool 'lookup'\) has no call id"):
        dex.model_output("", [{"tool": "lookup", "arguments": {"q": 1}}])
    with pytest.raises(dex.DexError, match="names no tool"):
        dex.model_output("", [{"call_id": "c1"}])
    with pytest.raises(dex.DexError, match="appears twice"):
        dex.model_output("", [{"call_id": "c1", "tool": "a"}, {"call_id": "c1", "tool": "b"}])
    mo = dex.model_output("hi", [{"call_id": "c1", "tool": "lookup", "arguments": {"q": "x"}}])
    assert mo.tool_calls[0].arguments == '{"q":"x"}'


def test_bad_targets_are_refused():
    for t in ("dex:///", "dex:///,", "", "nohostport"):
        with pytest.raises(dex.DexError):
            dex.Connection(t)
    c = dex.Connection("dex:///127.0.0.1:1, 127.0.0.1:2")
    assert c.addrs == ["127.0.0.1:1", "127.0.0.1:2"] and c.multi
    with pytest.raises(dex.DexError, match="TLS needs all three"):
        dex.Connection("127.0.0.1:1", tls=dex.TLSFiles(cert="c.pem"))


def test_token_goes_out_as_bearer(monkeypatch):
    monkeypatch.setenv("DEX_TOKEN", " s3cret \n")
    assert dex.Connection("127.0.0.1:1").metadata == (("authorization", "Bearer s3cret"),)
    assert dex.Connection("127.0.0.1:1", token="other").metadata == (("authorization", "Bearer other"),)
    monkeypatch.delenv("DEX_TOKEN")
    assert dex.Connection("127.0.0.1:1").metadata == ()


def test_error_classification():
    assert dex.TOOL_CALL_NOT_RUN_ERROR_PREFIX == "the tool did not run, so it is safe to call again"
    assert dex.error_type_for_http_status(429) == types_pb2.ERROR_TYPE_RATE_LIMIT
    assert dex.error_type_for_http_status(400, "prompt is too long") == types_pb2.ERROR_TYPE_CONTEXT_LENGTH
    assert dex.error_type_for_http_status(503, "Overloaded") == types_pb2.ERROR_TYPE_OVERLOADED
    assert dex.error_type_for_http_status(502) == types_pb2.ERROR_TYPE_SERVER_ERROR

    class SDKError(Exception):
        status_code = 529

    assert dex.classify_error(SDKError("busy")) == types_pb2.ERROR_TYPE_OVERLOADED
    assert dex.classify_error(TimeoutError()) == types_pb2.ERROR_TYPE_TIMEOUT
    assert dex.classify_error(ConnectionResetError()) == types_pb2.ERROR_TYPE_NETWORK
    assert dex.classify_error(ValueError("?")) == types_pb2.ERROR_TYPE_UNKNOWN
    assert dex.classify_error(dex.ModelError("rate_limit", "slow")) == types_pb2.ERROR_TYPE_RATE_LIMIT
    with pytest.raises(dex.DexError, match="unknown error type"):
        dex.ModelError("nope")


def test_demo_script_is_checked_and_deterministic():
    with pytest.raises(ScriptError, match='unknown field "turn"'):
        parse_script('{"turn": []}')
    with pytest.raises(ScriptError, match="has no text, tool call or error"):
        parse_script('{"default": [{}]}')
    with pytest.raises(ScriptError, match="not an inline tool"):
        parse_script('{"default": [{"inline": [{"tool": "lookup"}]}]}')
    s = parse_script('{"turns": [{"match": "go", "outputs": [{"error": {"type": "rate_limit"}},'
                     ' {"tool_calls": [{"tool": "lookup", "arguments": {"q": "{{message}}", "n": 1.50}}]}]}]}')
    m = Model(s, None, "w")
    h = [types_pb2.HistoryEntry(seq=7, kind=types_pb2.HISTORY_KIND_USER, text='go')]
    mi = dex.ModelInput(session_id="s", step_id="st", attempt=1, history=h, tools=[])
    _, _, err = m.output(mi)
    assert isinstance(err, dex.ModelError) and err.error_type == types_pb2.ERROR_TYPE_RATE_LIMIT
    mi.attempt = 2
    _, out, err = m.output(mi)
    assert err is None
    assert [(c.call_id, c.tool, c.arguments) for c in out.tool_calls] == [("call-7-1", "lookup", '{"q":"go","n":1.50}')]
