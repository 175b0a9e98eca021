"""Against a real dexd: a bulk label job, then a bulk cancel over that
label, each waited for with wait_bulk_job; the cancel acts on the labelled
sessions' turns only."""

from __future__ import annotations

import asyncio

import pytest

import dex
from dex.v1 import sessions_pb2, types_pb2

pytestmark = pytest.mark.e2e  # starts dexd


def test_a_bulk_cancel_over_a_label_cancels_those_turns_only(dexd):
    async def main():
        async with dex.Client(dexd.addr) as c:
            # No Worker runs: each session's first turn waits for its model.
            batch = [(await c.create_session("work", session_id=f"ses-batch{i}")).id for i in range(3)]
            label = await c.start_bulk_action("label", labels={"batch": "nightly"})
            labelled = await c.wait_bulk_job(label.id, interval=0.1, timeout=30)
            # Created after the label job: not part of it, so not labelled.
            later = [(await c.create_session("work", session_id=f"ses-later{i}")).id for i in range(2)]
            reads = []
            cancel = await c.start_bulk_action("cancel", filter={"labels": {"batch": "nightly"}}, reason="batch stopped")
            cancelled = await c.wait_bulk_job(cancel.id, interval=0.1, timeout=30, progress=reads.append)
            listed = [j.id for j in await c.list_bulk_jobs()]
            sessions = {sid: (await c.get_session(sid)).session for sid in batch + later}
            return batch, later, label, labelled, cancel, cancelled, reads, listed, sessions

    batch, later, label, labelled, cancel, cancelled, reads, listed, sessions = asyncio.run(main())
    assert label.id.startswith("bulk-") and cancel.id.startswith("bulk-")
    assert (labelled.status, labelled.acted, labelled.failed) == (sessions_pb2.BULK_JOB_STATUS_DONE, 3, 0)
    assert (cancelled.status, cancelled.acted, cancelled.failed) == (sessions_pb2.BULK_JOB_STATUS_DONE, 3, 0)
    assert cancelled.reason == "batch stopped"
    assert reads and reads[-1].status == sessions_pb2.BULK_JOB_STATUS_DONE
    assert listed == [cancel.id, label.id]  # newest first
    for sid in batch:
        s = sessions[sid]
        assert s.status != types_pb2.SESSION_STATUS_RUNNING, sid
        assert f"cancelled by bulk job {cancel.id}" in str(s.history), sid
    for sid in later:
        s = sessions[sid]
        assert s.status == types_pb2.SESSION_STATUS_RUNNING, sid
        assert "bulk job" not in str(s.history), sid
