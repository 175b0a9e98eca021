from dex.v1 import types_pb2 as _types_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ArchiveEnd(_message.Message):
    __slots__ = ["events", "folded", "history", "steps"]
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    FOLDED_FIELD_NUMBER: _ClassVar[int]
    HISTORY_FIELD_NUMBER: _ClassVar[int]
    STEPS_FIELD_NUMBER: _ClassVar[int]
    events: int
    folded: int
    history: int
    steps: int
    def __init__(self, history: _Optional[int] = ..., steps: _Optional[int] = ..., events: _Optional[int] = ..., folded: _Optional[int] = ...) -> None: ...

class ArchiveHeader(_message.Message):
    __slots__ = ["last_event_seq", "session"]
    LAST_EVENT_SEQ_FIELD_NUMBER: _ClassVar[int]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    last_event_seq: int
    session: _types_pb2.Session
    def __init__(self, session: _Optional[_Union[_types_pb2.Session, _Mapping]] = ..., last_event_seq: _Optional[int] = ...) -> None: ...

class ArchiveRecord(_message.Message):
    __slots__ = ["end", "event", "folded", "header", "history", "step"]
    END_FIELD_NUMBER: _ClassVar[int]
    EVENT_FIELD_NUMBER: _ClassVar[int]
    FOLDED_FIELD_NUMBER: _ClassVar[int]
    HEADER_FIELD_NUMBER: _ClassVar[int]
    HISTORY_FIELD_NUMBER: _ClassVar[int]
    STEP_FIELD_NUMBER: _ClassVar[int]
    end: ArchiveEnd
    event: _types_pb2.Event
    folded: _types_pb2.FoldedTurn
    header: ArchiveHeader
    history: _types_pb2.HistoryEntry
    step: _types_pb2.Step
    def __init__(self, header: _Optional[_Union[ArchiveHeader, _Mapping]] = ..., history: _Optional[_Union[_types_pb2.HistoryEntry, _Mapping]] = ..., step: _Optional[_Union[_types_pb2.Step, _Mapping]] = ..., event: _Optional[_Union[_types_pb2.Event, _Mapping]] = ..., end: _Optional[_Union[ArchiveEnd, _Mapping]] = ..., folded: _Optional[_Union[_types_pb2.FoldedTurn, _Mapping]] = ...) -> None: ...

class ArchivedSession(_message.Message):
    __slots__ = ["events", "folded_turns", "last_event_seq", "session", "steps"]
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    FOLDED_TURNS_FIELD_NUMBER: _ClassVar[int]
    LAST_EVENT_SEQ_FIELD_NUMBER: _ClassVar[int]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    STEPS_FIELD_NUMBER: _ClassVar[int]
    events: _containers.RepeatedCompositeFieldContainer[_types_pb2.Event]
    folded_turns: _containers.RepeatedCompositeFieldContainer[_types_pb2.FoldedTurn]
    last_event_seq: int
    session: _types_pb2.Session
    steps: _containers.RepeatedCompositeFieldContainer[_types_pb2.Step]
    def __init__(self, session: _Optional[_Union[_types_pb2.Session, _Mapping]] = ..., last_event_seq: _Optional[int] = ..., steps: _Optional[_Iterable[_Union[_types_pb2.Step, _Mapping]]] = ..., events: _Optional[_Iterable[_Union[_types_pb2.Event, _Mapping]]] = ..., folded_turns: _Optional[_Iterable[_Union[_types_pb2.FoldedTurn, _Mapping]]] = ...) -> None: ...
