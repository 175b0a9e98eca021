from dex.v1 import types_pb2 as _types_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor
SCHEDULE_CATCH_UP_ALL: ScheduleCatchUp
SCHEDULE_CATCH_UP_LATEST: ScheduleCatchUp
SCHEDULE_CATCH_UP_SKIP: ScheduleCatchUp
SCHEDULE_CATCH_UP_UNSPECIFIED: ScheduleCatchUp
SCHEDULE_OVERLAP_ALLOW: ScheduleOverlap
SCHEDULE_OVERLAP_QUEUE_ONE: ScheduleOverlap
SCHEDULE_OVERLAP_SKIP: ScheduleOverlap
SCHEDULE_OVERLAP_UNSPECIFIED: ScheduleOverlap
SCHEDULE_SLOT_OUTCOME_QUEUED: ScheduleSlotOutcome
SCHEDULE_SLOT_OUTCOME_SKIPPED_ID_TAKEN: ScheduleSlotOutcome
SCHEDULE_SLOT_OUTCOME_SKIPPED_MISSED: ScheduleSlotOutcome
SCHEDULE_SLOT_OUTCOME_SKIPPED_OVERLAP: ScheduleSlotOutcome
SCHEDULE_SLOT_OUTCOME_STARTED: ScheduleSlotOutcome
SCHEDULE_SLOT_OUTCOME_UNSPECIFIED: ScheduleSlotOutcome

class CreateScheduleRequest(_message.Message):
    __slots__ = ["agent", "catch_up", "cron", "interval_ms", "labels", "message", "overlap", "paused", "schedule_id", "time_zone"]
    AGENT_FIELD_NUMBER: _ClassVar[int]
    CATCH_UP_FIELD_NUMBER: _ClassVar[int]
    CRON_FIELD_NUMBER: _ClassVar[int]
    INTERVAL_MS_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    OVERLAP_FIELD_NUMBER: _ClassVar[int]
    PAUSED_FIELD_NUMBER: _ClassVar[int]
    SCHEDULE_ID_FIELD_NUMBER: _ClassVar[int]
    TIME_ZONE_FIELD_NUMBER: _ClassVar[int]
    agent: str
    catch_up: ScheduleCatchUp
    cron: str
    interval_ms: int
    labels: _containers.RepeatedCompositeFieldContainer[_types_pb2.Label]
    message: str
    overlap: ScheduleOverlap
    paused: bool
    schedule_id: str
    time_zone: str
    def __init__(self, schedule_id: _Optional[str] = ..., cron: _Optional[str] = ..., time_zone: _Optional[str] = ..., interval_ms: _Optional[int] = ..., agent: _Optional[str] = ..., message: _Optional[str] = ..., labels: _Optional[_Iterable[_Union[_types_pb2.Label, _Mapping]]] = ..., overlap: _Optional[_Union[ScheduleOverlap, str]] = ..., catch_up: _Optional[_Union[ScheduleCatchUp, str]] = ..., paused: bool = ...) -> None: ...

class CreateScheduleResponse(_message.Message):
    __slots__ = ["schedule"]
    SCHEDULE_FIELD_NUMBER: _ClassVar[int]
    schedule: Schedule
    def __init__(self, schedule: _Optional[_Union[Schedule, _Mapping]] = ...) -> None: ...

class DeleteScheduleRequest(_message.Message):
    __slots__ = ["schedule_id"]
    SCHEDULE_ID_FIELD_NUMBER: _ClassVar[int]
    schedule_id: str
    def __init__(self, schedule_id: _Optional[str] = ...) -> None: ...

class DeleteScheduleResponse(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class GetScheduleRequest(_message.Message):
    __slots__ = ["schedule_id"]
    SCHEDULE_ID_FIELD_NUMBER: _ClassVar[int]
    schedule_id: str
    def __init__(self, schedule_id: _Optional[str] = ...) -> None: ...

class GetScheduleResponse(_message.Message):
    __slots__ = ["schedule"]
    SCHEDULE_FIELD_NUMBER: _ClassVar[int]
    schedule: Schedule
    def __init__(self, schedule: _Optional[_Union[Schedule, _Mapping]] = ...) -> None: ...

class ListSchedulesRequest(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class ListSchedulesResponse(_message.Message):
    __slots__ = ["schedules"]
    SCHEDULES_FIELD_NUMBER: _ClassVar[int]
    schedules: _containers.RepeatedCompositeFieldContainer[Schedule]
    def __init__(self, schedules: _Optional[_Iterable[_Union[Schedule, _Mapping]]] = ...) -> None: ...

class PauseScheduleRequest(_message.Message):
    __slots__ = ["schedule_id"]
    SCHEDULE_ID_FIELD_NUMBER: _ClassVar[int]
    schedule_id: str
    def __init__(self, schedule_id: _Optional[str] = ...) -> None: ...

class PauseScheduleResponse(_message.Message):
    __slots__ = ["schedule"]
    SCHEDULE_FIELD_NUMBER: _ClassVar[int]
    schedule: Schedule
    def __init__(self, schedule: _Optional[_Union[Schedule, _Mapping]] = ...) -> None: ...

class ResumeScheduleRequest(_message.Message):
    __slots__ = ["schedule_id"]
    SCHEDULE_ID_FIELD_NUMBER: _ClassVar[int]
    schedule_id: str
    def __init__(self, schedule_id: _Optional[str] = ...) -> None: ...

class ResumeScheduleResponse(_message.Message):
    __slots__ = ["schedule"]
    SCHEDULE_FIELD_NUMBER: _ClassVar[int]
    schedule: Schedule
    def __init__(self, schedule: _Optional[_Union[Schedule, _Mapping]] = ...) -> None: ...

class Schedule(_message.Message):
    __slots__ = ["agent", "catch_up", "created_at_ms", "cron", "id", "interval_ms", "labels", "last_outcome", "last_session_id", "last_slot_ms", "message", "next_slot_ms", "overlap", "paused", "queued_slot_ms", "skipped_missed", "skipped_overlap", "started", "time_zone", "updated_at_ms"]
    AGENT_FIELD_NUMBER: _ClassVar[int]
    CATCH_UP_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    CRON_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    INTERVAL_MS_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    LAST_OUTCOME_FIELD_NUMBER: _ClassVar[int]
    LAST_SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    LAST_SLOT_MS_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    NEXT_SLOT_MS_FIELD_NUMBER: _ClassVar[int]
    OVERLAP_FIELD_NUMBER: _ClassVar[int]
    PAUSED_FIELD_NUMBER: _ClassVar[int]
    QUEUED_SLOT_MS_FIELD_NUMBER: _ClassVar[int]
    SKIPPED_MISSED_FIELD_NUMBER: _ClassVar[int]
    SKIPPED_OVERLAP_FIELD_NUMBER: _ClassVar[int]
    STARTED_FIELD_NUMBER: _ClassVar[int]
    TIME_ZONE_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    agent: str
    catch_up: ScheduleCatchUp
    created_at_ms: int
    cron: str
    id: str
    interval_ms: int
    labels: _containers.RepeatedCompositeFieldContainer[_types_pb2.Label]
    last_outcome: ScheduleSlotOutcome
    last_session_id: str
    last_slot_ms: int
    message: str
    next_slot_ms: int
    overlap: ScheduleOverlap
    paused: bool
    queued_slot_ms: int
    skipped_missed: int
    skipped_overlap: int
    started: int
    time_zone: str
    updated_at_ms: int
    def __init__(self, id: _Optional[str] = ..., cron: _Optional[str] = ..., time_zone: _Optional[str] = ..., interval_ms: _Optional[int] = ..., agent: _Optional[str] = ..., message: _Optional[str] = ..., labels: _Optional[_Iterable[_Union[_types_pb2.Label, _Mapping]]] = ..., overlap: _Optional[_Union[ScheduleOverlap, str]] = ..., catch_up: _Optional[_Union[ScheduleCatchUp, str]] = ..., paused: bool = ..., created_at_ms: _Optional[int] = ..., updated_at_ms: _Optional[int] = ..., next_slot_ms: _Optional[int] = ..., last_slot_ms: _Optional[int] = ..., last_outcome: _Optional[_Union[ScheduleSlotOutcome, str]] = ..., last_session_id: _Optional[str] = ..., queued_slot_ms: _Optional[int] = ..., started: _Optional[int] = ..., skipped_overlap: _Optional[int] = ..., skipped_missed: _Optional[int] = ...) -> None: ...

class TriggerScheduleRequest(_message.Message):
    __slots__ = ["schedule_id"]
    SCHEDULE_ID_FIELD_NUMBER: _ClassVar[int]
    schedule_id: str
    def __init__(self, schedule_id: _Optional[str] = ...) -> None: ...

class TriggerScheduleResponse(_message.Message):
    __slots__ = ["session_id"]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    def __init__(self, session_id: _Optional[str] = ...) -> None: ...

class ScheduleOverlap(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class ScheduleCatchUp(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class ScheduleSlotOutcome(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []
