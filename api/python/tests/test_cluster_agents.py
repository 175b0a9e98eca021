"""Against a real dexd: two Workers of two agents each run only their own
sessions' model calls, and learn the session's agent."""

from __future__ import annotations

import asyncio

import pytest

import dex
from dex.v1 import types_pb2
from test_cluster import _until

pytestmark = pytest.mark.e2e  # every test here starts processes


def test_each_agents_worker_gets_only_its_sessions_model_calls(dexd):
    seen: dict[str, list] = {"w-bot1": [], "w-bot2": []}

    def new_worker(wid: str, agent: str) -> dex.Worker:
        w = dex.Worker(dexd.addr, id=wid, poll_wait=1.0, shutdown_grace=1.0, agents=[agent])

        @w.model
        async def model(inp: dex.ModelInput):
            seen[wid].append((inp.session_id, inp.agent, inp.epoch))
            return f"{agent} answers"

        return w

    async def main():
        workers = [new_worker("w-bot1", "bot@1"), new_worker("w-bot2", "bot@2")]
        stop = asyncio.Event()
        runs = [asyncio.ensure_future(w.run(stop)) for w in workers]
        client = dex.Client(dexd.addr)
        try:
            ids = {}
            for i in range(3):
                for agent in ("bot@1", "bot@2"):
                    s = await client.create_session(f"hello {i}", session_id=f"{agent.replace('@', '-')}-{i}", agent=agent)
                    assert s.agent == agent
                    ids[s.id] = agent

            async def all_idle():
                for sid in ids:
                    got = await client.get_session(sid)
                    if got.session.status != types_pb2.SESSION_STATUS_IDLE or not got.session.history:
                        return False
                return True

            await _until(all_idle, "every session went idle")
            answers = {sid: (await client.get_session(sid)).session.history[-1].text for sid in ids}
            return ids, answers
        finally:
            stop.set()
            await asyncio.wait_for(asyncio.gather(*runs), 15)
            await client.close()

    ids, answers = asyncio.run(main())
    for sid, agent in ids.items():
        assert answers[sid] == f"{agent} answers"
    assert sorted(s for s, _, _ in seen["w-bot1"]) == sorted(s for s, a in ids.items() if a == "bot@1")
    assert sorted(s for s, _, _ in seen["w-bot2"]) == sorted(s for s, a in ids.items() if a == "bot@2")
    assert all(agent == "bot@1" and epoch > 0 for _, agent, epoch in seen["w-bot1"])
    assert all(agent == "bot@2" and epoch > 0 for _, agent, epoch in seen["w-bot2"])
