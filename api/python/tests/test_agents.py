"""Agents: the Worker registers the agents whose model it runs and each
tool's agents, handlers learn the task's agent and epoch, bad lists are
refused before the Worker starts, and the demo Worker's flags and ledger."""

from __future__ import annotations

import asyncio
import json

import grpc.aio
import pytest

import dex
from dex.demo.flags import parse_flags
from dex.demo.ledger import Ledger
from dex.demo.tools import DemoTools
from dex.v1 import types_pb2, workers_pb2, workers_pb2_grpc
from conftest import free_port


class Cluster(workers_pb2_grpc.WorkerServiceServicer):
    """Hands out one model task and one tool task of agent bot@2, epoch 5."""

    def __init__(self) -> None:
        self.register = None
        self.reports: list = []
        self.polls = 0
        self.done = asyncio.Event()

    async def RegisterWorker(self, request, context):
        self.register = request
        return workers_pb2.RegisterWorkerResponse(heartbeat_interval_ms=100, heartbeat_timeout_ms=3000)

    async def PollTask(self, request, context):
        self.polls += 1
        if self.polls == 1:
            return workers_pb2.PollTaskResponse(tasks=[
                workers_pb2.Task(ref=types_pb2.AttemptRef(step_id="s-s1", attempt=1, token="t1"), session_id="s",
                                 kind=types_pb2.STEP_KIND_RUN_MODEL, runner=workers_pb2.TASK_RUNNER_MODEL,
                                 handler=workers_pb2.TASK_HANDLER_MODEL, epoch=5, agent="bot@2",
                                 heartbeat_interval_ms=100),
                workers_pb2.Task(ref=types_pb2.AttemptRef(step_id="s-s2", attempt=1, token="t2"), session_id="s",
                                 kind=types_pb2.STEP_KIND_CALL_TOOL, runner=workers_pb2.TASK_RUNNER_TOOL,
                                 handler=workers_pb2.TASK_HANDLER_TOOL, tool="search", call_id="c1", epoch=5,
                                 agent="bot@2", access=types_pb2.TOOL_ACCESS_READ, heartbeat_interval_ms=100)])
        await asyncio.sleep(min(request.wait_ms / 1000, 0.2))
        return workers_pb2.PollTaskResponse()

    async def ClaimTask(self, request, context):
        return workers_pb2.ClaimTaskResponse()

    async def Heartbeat(self, request, context):
        return workers_pb2.HeartbeatResponse()

    async def ReportTask(self, request, context):
        self.reports.append(request.ref.step_id)
        if len(self.reports) == 2:
            self.done.set()
        return workers_pb2.ReportTaskResponse()


def test_worker_registers_its_agents_and_handlers_get_the_tasks_agent_and_epoch():
    seen: dict = {}

    async def main():
        cluster = Cluster()
        server = grpc.aio.server()
        workers_pb2_grpc.add_WorkerServiceServicer_to_server(cluster, server)
        addr = f"127.0.0.1:{free_port()}"
        server.add_insecure_port(addr)
        await server.start()
        w = dex.Worker(addr, id="w1", poll_wait=0.2, agents=["bot@1", "bot@2"])

        @w.tool(access="read", agents=["bot@2"])
        def search(call: dex.ToolCall) -> str:
            seen["tool"] = (call.agent, call.epoch)
            return "found"

        @w.tool(access="read")
        def fetch(call: dex.ToolCall) -> str:
            return ""

        @w.model
        async def model(inp: dex.ModelInput):
            seen["model"] = (inp.agent, inp.epoch)
            return "hi"

        stop = asyncio.Event()
        run = asyncio.ensure_future(w.run(stop))
        try:
            await asyncio.wait_for(cluster.done.wait(), 20)
        finally:
            stop.set()
            await asyncio.wait_for(run, 20)
            await server.stop(None)
        return cluster

    cluster = asyncio.run(main())
    reg = cluster.register
    assert list(reg.agents) == ["bot@1", "bot@2"] and reg.runs_model
    assert {t.name: list(t.agents) for t in reg.tools} == {"search": ["bot@2"], "fetch": []}
    assert seen == {"model": ("bot@2", 5), "tool": ("bot@2", 5)}


@pytest.mark.parametrize("agents,msg", [
    (["bot/1"], "worker agents: agent 'bot/1': use only"),
    ([""], "worker agents: an empty agent name"),
    (["a", "a"], "worker agents: agent 'a' is listed twice"),
    (["a..b"], "must not be"),
    (["x" * 201], "longer than 200 bytes"),
    ("bot@1", "give a list of agent names"),
])
def test_bad_worker_agents_are_refused(agents, msg):
    with pytest.raises(dex.DexError, match=msg):
        dex.Worker("127.0.0.1:1", id="w", agents=agents)


def test_bad_tool_agents_are_refused_and_the_tool_is_not_registered():
    w = dex.Worker("127.0.0.1:1", id="w")
    with pytest.raises(dex.DexError, match="tool 'search' agents: agent 'x y'"):
        @w.tool(access="read", agents=["x y"])
        def search(call):
            return ""
    assert "search" not in w.tools


def test_agents_without_a_model_are_refused():
    w = dex.Worker("127.0.0.1:1", id="w", agents=["bot@1"])
    w.add_tool("lookup", lambda c: "", access="read")
    with pytest.raises(dex.DexError, match="agents are listed but the Worker runs no model"):
        w.check()


def test_demo_flags_agent_and_tool_agents():
    c = parse_flags(["--addr", "a:1", "--ledger", "l", "--agent", "bot@1, bot@2", "--tool-agents", "bot@2"])
    assert c.agents == ["bot@1", "bot@2"] and c.tool_agents == ["bot@2"]
    w = dex.Worker("127.0.0.1:1", id="w", agents=c.agents)
    DemoTools(None, "w", agents=c.tool_agents).register(w)
    assert {name: list(t.spec.agents) for name, t in w.tools.items()} == {name: ["bot@2"] for name in DemoTools.SPECS}
    c = parse_flags(["--addr", "a:1", "--ledger", "l"])
    assert c.agents == [] and c.tool_agents == []
    w = dex.Worker("127.0.0.1:1", id="w")
    DemoTools(None, "w").register(w)
    assert all(not t.spec.agents for t in w.tools.values())


def test_demo_refuses_a_bad_agent_flag(tmp_path):
    from dex.demo.__main__ import main
    assert main(["--addr", "127.0.0.1:1", "--ledger", str(tmp_path / "l"), "--agent", "bot/1"]) == 2


def test_ledger_lines_carry_epoch_and_agent_as_dexworker_writes_them(tmp_path):
    path = tmp_path / "ledger.jsonl"
    led = Ledger(str(path))
    led.append(session="s", tool="model", attempt=1, step="s-s1", kind="model", worker="w", epoch=7, agent="bot@2")
    led.append(session="s", tool="model", attempt=1, step="s-s1", kind="model", worker="w", epoch=7)
    led.append(session="s", call_id="c1", tool="lookup", attempt=1, idempotency_key="k", step="s-s2", kind="tool",
               worker="w", epoch=7)
    led.close()
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    # cmd/dexworker/ledger.go's field order, omitempty extras last.
    assert list(lines[0]) == ["session", "call_id", "tool", "attempt", "idempotency_key", "pid", "time",
                              "step", "kind", "worker", "epoch", "agent"]
    assert lines[0]["epoch"] == 7 and lines[0]["agent"] == "bot@2"
    assert "agent" not in lines[1] and lines[1]["epoch"] == 7  # the default agent is left out
    assert "agent" not in lines[2] and lines[2]["epoch"] == 7


def test_demo_writes_epoch_on_every_line_and_the_agent_on_model_lines(tmp_path):
    from dex.demo.script import Model
    from dex.worker import ModelInput, ToolCall

    path = tmp_path / "ledger.jsonl"
    led = Ledger(str(path))
    tools = DemoTools(led, "w")
    model = Model(None, led, "w", inline=tools.inline)
    mi = ModelInput(session_id="s", step_id="s-s1", attempt=1, history=[], tools=[], epoch=9, agent="bot@2")
    model._record("model", mi)
    inline = [types_pb2.InlineResult(call_id="i1", tool="calc", arguments='{"a":1,"b":2}')]
    asyncio.run(tools.inline(mi, inline))
    call = ToolCall(session_id="s", step_id="s-s2", call_id="c1", tool="lookup", arguments="{}",
                    idempotency_key="k", attempt=1, epoch=9, agent="bot@2")
    asyncio.run(tools.simple("found")(call))
    led.close()
    lines = {x["kind"]: x for x in map(json.loads, path.read_text().splitlines())}
    assert {k: v["epoch"] for k, v in lines.items()} == {"model": 9, "inline": 9, "tool": 9}
    assert lines["model"]["agent"] == "bot@2"
    assert "agent" not in lines["inline"] and "agent" not in lines["tool"]  # as cmd/dexworker: model lines only
