"""Against a real dexd: sessions created with labels and agents, found
with list_sessions by label, by agent, by both and by time, in either
direction and by page; one relabelled with set_labels and then found by its
new label; a bad label key refused by the cluster."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta, timezone

import grpc
import pytest

import dex

pytestmark = pytest.mark.e2e  # starts dexd


def _labels(s) -> dict:
    return {lb.key: lb.value for lb in s.labels}


def test_labelled_sessions_are_found_by_label_and_agent_and_relabelled(dexd):
    async def main():
        async with dex.Client(dexd.addr) as c:
            # No message: each session stays idle, no Worker needed.
            made = [
                await c.create_session(session_id="ses-red1", agent="coder", labels={"team": "red", "env": "prod"}),
                await c.create_session(session_id="ses-red2", agent="writer", labels={"team": "red"}),
                await c.create_session(session_id="ses-blue1", agent="coder", labels={"team": "blue", "env": "prod"}),
                await c.create_session(session_id="ses-plain"),
            ]
            hour_ago = datetime.now(timezone.utc) - timedelta(hours=1)
            ids = lambda ss: [s.id for s in ss]  # noqa: E731
            found = {
                "red": ids(await c.list_sessions(labels={"team": "red"})),
                "red_newest": ids(await c.list_sessions(labels={"team": "red"}, descending=True)),
                "coder": ids(await c.list_sessions(agent="coder")),
                "red_coder": ids(await c.list_sessions(labels={"team": "red"}, agent="coder")),
                "prod_idle": ids(await c.list_sessions(labels={"env": "prod"}, status="idle")),
                "last_hour": ids(await c.list_sessions(labels={"team": "red"}, created_after=hour_ago)),
                "before_hour": ids(await c.list_sessions(labels={"team": "red"}, created_before=hour_ago)),
                "updated": ids(await c.list_sessions(agent="coder", order="updated", descending=True)),
                "limit": ids(await c.list_sessions(agent="coder", limit=1)),
                "all": ids(await c.list_sessions()),
            }
            first = await c.list_sessions_page(page_size=1, labels={"team": "red"})
            second = await c.list_sessions_page(page_size=1, labels={"team": "red"}, page_token=first.next_page_token)
            summaries = {s.id: s for s in await c.list_sessions(agent="coder")}
            relabelled = await c.set_labels("ses-blue1", {"team": "red", "tier": "1"}, remove=["env"])
            again = await c.set_labels("ses-blue1", {"team": "red", "tier": "1"}, remove=["env"])
            after = {
                "red": ids(await c.list_sessions(labels={"team": "red"})),
                "blue": ids(await c.list_sessions(labels={"team": "blue"})),
                "prod": ids(await c.list_sessions(labels={"env": "prod"})),
            }
            got = (await c.get_session("ses-blue1")).session
            with pytest.raises(grpc.RpcError) as bad:
                await c.set_labels("ses-plain", {"Team": "red"})
            with pytest.raises(grpc.RpcError) as bad_range:
                await c.list_sessions(created_after=hour_ago, created_before=hour_ago - timedelta(minutes=1))
            plain = (await c.get_session("ses-plain")).session
            return made, found, first, second, summaries, relabelled, again, after, got, bad.value, bad_range.value, plain

    made, found, first, second, summaries, relabelled, again, after, got, bad, bad_range, plain = asyncio.run(main())
    assert _labels(made[0]) == {"env": "prod", "team": "red"} and _labels(made[3]) == {}
    assert found["red"] == ["ses-red1", "ses-red2"]  # by creation
    assert found["red_newest"] == ["ses-red2", "ses-red1"]
    assert found["coder"] == ["ses-red1", "ses-blue1"]
    assert found["red_coder"] == ["ses-red1"]
    assert found["prod_idle"] == ["ses-red1", "ses-blue1"]
    assert found["last_hour"] == ["ses-red1", "ses-red2"] and found["before_hour"] == []
    assert sorted(found["updated"]) == ["ses-blue1", "ses-red1"]
    assert found["limit"] == ["ses-red1"]
    assert found["all"] == sorted(["ses-red1", "ses-red2", "ses-blue1", "ses-plain"])  # by id, as always
    assert [s.id for s in first.sessions] == ["ses-red1"] and first.next_page_token
    assert [s.id for s in second.sessions] == ["ses-red2"]
    assert (summaries["ses-red1"].agent, _labels(summaries["ses-red1"])) == ("coder", {"env": "prod", "team": "red"})
    assert _labels(relabelled) == {"team": "red", "tier": "1"} == _labels(again) == _labels(got)
    assert after == {"red": ["ses-red1", "ses-red2", "ses-blue1"], "blue": [], "prod": ["ses-red1"]}
    assert bad.code() == grpc.StatusCode.INVALID_ARGUMENT and _labels(plain) == {}
    assert bad_range.code() == grpc.StatusCode.INVALID_ARGUMENT
