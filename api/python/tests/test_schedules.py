"""The schedule calls against a fake node: the request's fields sent, the
schedule returned, a create retried after its answer was lost returns the
schedule that try made, refusals raised with their code, a bad policy name
refused before any call."""

from __future__ import annotations

import asyncio

import grpc
import grpc.aio
import pytest

import dex
from dex.v1 import schedules_pb2, schedules_pb2_grpc
from conftest import free_port


class Schedules(schedules_pb2_grpc.ScheduleServiceServicer):
    """Keeps schedules by id. ``lose`` creates are made but answered
    UNAVAILABLE (the answer lost)."""

    def __init__(self) -> None:
        self.requests: list[schedules_pb2.CreateScheduleRequest] = []
        self.schedules: dict[str, schedules_pb2.Schedule] = {}
        self.lose = 0
        self.triggers = 0

    async def CreateSchedule(self, request, context):
        self.requests.append(request)
        if request.cron == "61 * * * *":
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, 'bad cron expression "61 * * * *"')
        if request.schedule_id in self.schedules:
            await context.abort(grpc.StatusCode.ALREADY_EXISTS, f'schedule "{request.schedule_id}" already exists')
        s = schedules_pb2.Schedule(id=request.schedule_id, cron=request.cron, time_zone=request.time_zone,
                                   interval_ms=request.interval_ms, message=request.message, labels=request.labels,
                                   overlap=request.overlap, catch_up=request.catch_up, next_slot_ms=1767258000000)
        self.schedules[s.id] = s
        if self.lose > 0:
            self.lose -= 1
            await context.abort(grpc.StatusCode.UNAVAILABLE, "leadership lost")
        return schedules_pb2.CreateScheduleResponse(schedule=s)

    async def _get(self, sid, context):
        if sid not in self.schedules:
            await context.abort(grpc.StatusCode.NOT_FOUND, f'schedule "{sid}" not found')
        return self.schedules[sid]

    async def GetSchedule(self, request, context):
        return schedules_pb2.GetScheduleResponse(schedule=await self._get(request.schedule_id, context))

    async def ListSchedules(self, request, context):
        return schedules_pb2.ListSchedulesResponse(schedules=[self.schedules[k] for k in sorted(self.schedules)])

    async def PauseSchedule(self, request, context):
        s = await self._get(request.schedule_id, context)
        s.paused, s.next_slot_ms = True, 0
        return schedules_pb2.PauseScheduleResponse(schedule=s)

    async def ResumeSchedule(self, request, context):
        s = await self._get(request.schedule_id, context)
        s.paused, s.next_slot_ms = False, 1767261600000
        return schedules_pb2.ResumeScheduleResponse(schedule=s)

    async def DeleteSchedule(self, request, context):
        await self._get(request.schedule_id, context)
        del self.schedules[request.schedule_id]
        return schedules_pb2.DeleteScheduleResponse()

    async def TriggerSchedule(self, request, context):
        await self._get(request.schedule_id, context)
        self.triggers += 1
        return schedules_pb2.TriggerScheduleResponse(session_id=f"{request.schedule_id}-1767258000000")


def _run(body):
    async def main():
        fake = Schedules()
        server = grpc.aio.server()
        schedules_pb2_grpc.add_ScheduleServiceServicer_to_server(fake, server)
        addr = f"127.0.0.1:{free_port()}"
        server.add_insecure_port(addr)
        await server.start()
        client = dex.Client(f"dex:///{addr}", timeout=10)
        try:
            return await body(client, fake)
        finally:
            await client.close()
            await server.stop(None)

    return asyncio.run(main())


def test_schedule_calls_send_their_fields_and_return_the_answers():
    async def body(client, fake):
        fake.lose = 1
        created = await client.create_schedule("nightly", cron="0 9 * * 1-5", time_zone="Europe/Paris",
                                               message="write the report", labels={"team": "ops"},
                                               overlap="queue_one", catch_up="latest")
        listed = await client.list_schedules()
        paused = await client.pause_schedule("nightly")
        resumed = await client.resume_schedule("nightly")
        session = await client.trigger_schedule("nightly")
        await client.delete_schedule("nightly")
        with pytest.raises(grpc.RpcError) as e:
            await client.get_schedule("nightly")
        return fake, created, listed, paused, resumed, session, e.value

    fake, created, listed, paused, resumed, session, gone = _run(body)
    req = fake.requests[0]
    assert (req.schedule_id, req.cron, req.time_zone, req.message) == ("nightly", "0 9 * * 1-5", "Europe/Paris",
                                                                       "write the report")
    assert [(l.key, l.value) for l in req.labels] == [("team", "ops")]
    assert req.overlap == schedules_pb2.SCHEDULE_OVERLAP_QUEUE_ONE and req.catch_up == schedules_pb2.SCHEDULE_CATCH_UP_LATEST
    # The first try's answer was lost; the retry found the schedule it made.
    assert len(fake.requests) == 2 and created.id == "nightly" and created.next_slot_ms == 1767258000000
    assert [s.id for s in listed] == ["nightly"]
    assert paused.paused and paused.next_slot_ms == 0
    assert not resumed.paused and resumed.next_slot_ms == 1767261600000
    assert session == "nightly-1767258000000" and fake.triggers == 1
    assert gone.code() == grpc.StatusCode.NOT_FOUND


def test_schedule_refusals():
    async def body(client, fake):
        with pytest.raises(grpc.RpcError) as bad:
            await client.create_schedule("s", cron="61 * * * *")
        with pytest.raises(ValueError):
            await client.create_schedule("s", interval_ms=1000, overlap="sometimes")
        with pytest.raises(ValueError):
            await client.create_schedule("s", interval_ms=1000, catch_up="never")
        with pytest.raises(grpc.RpcError) as unknown:
            await client.trigger_schedule("nope")
        return fake, bad.value, unknown.value

    fake, bad, unknown = _run(body)
    assert bad.code() == grpc.StatusCode.INVALID_ARGUMENT and "bad cron" in bad.details()
    assert unknown.code() == grpc.StatusCode.NOT_FOUND
    assert len(fake.requests) == 1 and not fake.schedules
