"""create_session's dispatch order (priority, fairness key and weight) and
budget, and set_budget, against a fake node: what is given is sent, what is
not is left unset, and a bad value raises ValueError before any call."""

from __future__ import annotations

import asyncio

import grpc.aio
import pytest

import dex
from dex.v1 import sessions_pb2, sessions_pb2_grpc, types_pb2
from conftest import free_port


class Sessions(sessions_pb2_grpc.SessionServiceServicer):
    def __init__(self) -> None:
        self.requests: list = []

    async def CreateSession(self, request, context):
        self.requests.append(request)
        return sessions_pb2.CreateSessionResponse(session=types_pb2.Session(
            id=request.session_id, priority=request.priority or 3, fairness_key=request.fairness_key,
            fairness_weight=request.fairness_weight or 1, budget=request.budget))

    async def SetBudget(self, request, context):
        self.requests.append(request)
        b = types_pb2.Budget(max_tokens=5000, max_turns=4)
        for field, _ in request.change.ListFields():
            setattr(b, field.name, getattr(request.change, field.name))
        return sessions_pb2.SetBudgetResponse(session=types_pb2.Session(id=request.session_id, budget=b))


def _against_a_fake_node(body) -> tuple:
    """Runs body(client); returns what it returned and the requests the
    fake node got."""

    async def main():
        fake = Sessions()
        server = grpc.aio.server()
        sessions_pb2_grpc.add_SessionServiceServicer_to_server(fake, server)
        addr = f"127.0.0.1:{free_port()}"
        server.add_insecure_port(addr)
        await server.start()
        client = dex.Client(f"dex:///{addr}", timeout=10)
        try:
            return await body(client), fake.requests
        finally:
            await client.close()
            await server.stop(None)

    return asyncio.run(main())


def _budget(b: types_pb2.Budget) -> dict:
    return {f.name: v for f, v in b.ListFields()}


def test_create_session_sends_the_dispatch_order_and_budget_given():
    async def body(c: dex.Client):
        return [
            await c.create_session(session_id="a", priority=5, fairness_key="tenant-a", fairness_weight=1000,
                                   budget={"max_tokens": 100_000, "loop_limit": 5}),
            await c.create_session(session_id="b", priority=1, fairness_weight=1,
                                   budget=types_pb2.Budget(max_cost_micros=2**64 - 1)),
            await c.create_session(session_id="c"),
        ]

    (a, b, c), (ra, rb, rc) = _against_a_fake_node(body)
    assert (ra.priority, ra.fairness_key, ra.fairness_weight) == (5, "tenant-a", 1000)
    assert _budget(ra.budget) == {"max_tokens": 100_000, "loop_limit": 5}
    assert (a.priority, a.fairness_key, a.fairness_weight) == (5, "tenant-a", 1000)
    assert (rb.priority, rb.fairness_key, rb.fairness_weight) == (1, "", 1)
    assert _budget(rb.budget) == {"max_cost_micros": 2**64 - 1}
    # None given: the parent's, else the cluster's defaults; no budget sent.
    assert (rc.priority, rc.fairness_key, rc.fairness_weight) == (0, "", 0) and not rc.HasField("budget")
    assert (c.priority, c.fairness_weight) == (3, 1)


@pytest.mark.parametrize("kwargs,msg", [
    ({"priority": 6}, "priority must be a whole number from 1 to 5, not 6"),
    ({"priority": -1}, "priority must be a whole number from 1 to 5, not -1"),
    ({"priority": 2.5}, "priority must be a whole number from 1 to 5, not 2.5"),
    ({"priority": True}, "priority must be a whole number from 1 to 5, not True"),
    ({"priority": None}, "priority must be a whole number from 1 to 5, not None"),
    ({"fairness_weight": 1001}, "fairness_weight must be a whole number from 1 to 1000, not 1001"),
    ({"fairness_weight": -3}, "fairness_weight must be a whole number from 1 to 1000, not -3"),
    ({"fairness_key": "k" * 257}, "fairness_key is longer than 256 bytes"),
    ({"fairness_key": 7}, "fairness_key must be a str"),
    ({"budget": {"max_tokens": -1}}, "budget max_tokens must be a whole number from 0 to 18446744073709551615"),
    ({"budget": {"loop_limit": 2**32}}, "budget loop_limit must be a whole number from 0 to 4294967295"),
    ({"budget": {"max_tokens": "5"}}, "budget max_tokens must be a whole number"),
    ({"budget": {"tokens": 5}}, "budget: unknown field 'tokens': want one of max_tokens, max_cost_micros"),
    ({"budget": "max_tokens=5"}, "budget must be a types_pb2.Budget or a dict, not str"),
])
def test_create_session_refuses_a_bad_value_before_any_call(kwargs, msg):
    async def body(c: dex.Client):
        with pytest.raises(ValueError, match=msg):
            await c.create_session(session_id="x", **kwargs)

    _, requests = _against_a_fake_node(body)
    assert requests == []


def test_set_budget_sends_the_fields_given_only():
    async def body(c: dex.Client):
        return await c.set_budget("s1", max_tokens=9000, max_tool_calls_per_turn=0)

    s, [req] = _against_a_fake_node(body)
    assert req.session_id == "s1"
    assert req.change.HasField("max_tokens") and req.change.max_tokens == 9000
    assert req.change.HasField("max_tool_calls_per_turn") and req.change.max_tool_calls_per_turn == 0  # no limit
    assert not req.change.HasField("max_turns") and not req.change.HasField("loop_limit")
    assert s.id == "s1" and _budget(s.budget) == {"max_tokens": 9000, "max_turns": 4}


@pytest.mark.parametrize("kwargs,msg", [
    ({}, "set_budget: give at least one of max_tokens, max_cost_micros, max_turns"),
    ({"max_turns": -1}, "set_budget max_turns must be a whole number from 0"),
    ({"max_model_calls_per_turn": 2**32},
     "set_budget max_model_calls_per_turn must be a whole number from 0 to 4294967295"),
    ({"max_cost_micros": 1.5}, "set_budget max_cost_micros must be a whole number"),
])
def test_set_budget_refuses_a_bad_change_before_any_call(kwargs, msg):
    async def body(c: dex.Client):
        with pytest.raises(ValueError, match=msg):
            await c.set_budget("s1", **kwargs)

    _, requests = _against_a_fake_node(body)
    assert requests == []
