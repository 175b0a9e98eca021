from dex.v1 import types_pb2 as _types_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor
TASK_HANDLER_COMPACT: TaskHandler
TASK_HANDLER_MODEL: TaskHandler
TASK_HANDLER_POLL: TaskHandler
TASK_HANDLER_TOOL: TaskHandler
TASK_HANDLER_UNSPECIFIED: TaskHandler
TASK_RUNNER_MODEL: TaskRunner
TASK_RUNNER_TOOL: TaskRunner
TASK_RUNNER_UNSPECIFIED: TaskRunner

class AppendOutputRequest(_message.Message):
    __slots__ = ["offset", "ref", "text"]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    REF_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    offset: int
    ref: _types_pb2.AttemptRef
    text: str
    def __init__(self, ref: _Optional[_Union[_types_pb2.AttemptRef, _Mapping]] = ..., offset: _Optional[int] = ..., text: _Optional[str] = ...) -> None: ...

class AppendOutputResponse(_message.Message):
    __slots__ = ["next_offset", "stop"]
    NEXT_OFFSET_FIELD_NUMBER: _ClassVar[int]
    STOP_FIELD_NUMBER: _ClassVar[int]
    next_offset: int
    stop: bool
    def __init__(self, next_offset: _Optional[int] = ..., stop: bool = ...) -> None: ...

class AppendOutputsRequest(_message.Message):
    __slots__ = ["appends"]
    APPENDS_FIELD_NUMBER: _ClassVar[int]
    appends: _containers.RepeatedCompositeFieldContainer[AppendOutputRequest]
    def __init__(self, appends: _Optional[_Iterable[_Union[AppendOutputRequest, _Mapping]]] = ...) -> None: ...

class AppendOutputsResponse(_message.Message):
    __slots__ = ["answers"]
    ANSWERS_FIELD_NUMBER: _ClassVar[int]
    answers: _containers.RepeatedCompositeFieldContainer[AppendOutputResponse]
    def __init__(self, answers: _Optional[_Iterable[_Union[AppendOutputResponse, _Mapping]]] = ...) -> None: ...

class ClaimTaskRequest(_message.Message):
    __slots__ = ["ref"]
    REF_FIELD_NUMBER: _ClassVar[int]
    ref: _types_pb2.AttemptRef
    def __init__(self, ref: _Optional[_Union[_types_pb2.AttemptRef, _Mapping]] = ...) -> None: ...

class ClaimTaskResponse(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class CompleteTaskRequest(_message.Message):
    __slots__ = ["model_output", "poll_result", "ref", "summary", "tool_result"]
    MODEL_OUTPUT_FIELD_NUMBER: _ClassVar[int]
    POLL_RESULT_FIELD_NUMBER: _ClassVar[int]
    REF_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_FIELD_NUMBER: _ClassVar[int]
    TOOL_RESULT_FIELD_NUMBER: _ClassVar[int]
    model_output: _types_pb2.ModelOutput
    poll_result: _types_pb2.PollResult
    ref: _types_pb2.AttemptRef
    summary: str
    tool_result: _types_pb2.ToolResult
    def __init__(self, ref: _Optional[_Union[_types_pb2.AttemptRef, _Mapping]] = ..., model_output: _Optional[_Union[_types_pb2.ModelOutput, _Mapping]] = ..., tool_result: _Optional[_Union[_types_pb2.ToolResult, _Mapping]] = ..., poll_result: _Optional[_Union[_types_pb2.PollResult, _Mapping]] = ..., summary: _Optional[str] = ...) -> None: ...

class CompleteTaskResponse(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class DeregisterWorkerRequest(_message.Message):
    __slots__ = ["worker_id"]
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    worker_id: str
    def __init__(self, worker_id: _Optional[str] = ...) -> None: ...

class DeregisterWorkerResponse(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class FailTaskRequest(_message.Message):
    __slots__ = ["error", "error_type", "ref"]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ERROR_TYPE_FIELD_NUMBER: _ClassVar[int]
    REF_FIELD_NUMBER: _ClassVar[int]
    error: str
    error_type: _types_pb2.ErrorType
    ref: _types_pb2.AttemptRef
    def __init__(self, ref: _Optional[_Union[_types_pb2.AttemptRef, _Mapping]] = ..., error_type: _Optional[_Union[_types_pb2.ErrorType, str]] = ..., error: _Optional[str] = ...) -> None: ...

class FailTaskResponse(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class HeartbeatRequest(_message.Message):
    __slots__ = ["ref"]
    REF_FIELD_NUMBER: _ClassVar[int]
    ref: _types_pb2.AttemptRef
    def __init__(self, ref: _Optional[_Union[_types_pb2.AttemptRef, _Mapping]] = ...) -> None: ...

class HeartbeatResponse(_message.Message):
    __slots__ = ["cancelled", "reason"]
    CANCELLED_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    cancelled: bool
    reason: str
    def __init__(self, cancelled: bool = ..., reason: _Optional[str] = ...) -> None: ...

class ModelInput(_message.Message):
    __slots__ = ["compact", "history", "tools"]
    COMPACT_FIELD_NUMBER: _ClassVar[int]
    HISTORY_FIELD_NUMBER: _ClassVar[int]
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    compact: bool
    history: _containers.RepeatedCompositeFieldContainer[_types_pb2.HistoryEntry]
    tools: _containers.RepeatedCompositeFieldContainer[_types_pb2.ToolSpec]
    def __init__(self, history: _Optional[_Iterable[_Union[_types_pb2.HistoryEntry, _Mapping]]] = ..., tools: _Optional[_Iterable[_Union[_types_pb2.ToolSpec, _Mapping]]] = ..., compact: bool = ...) -> None: ...

class PollTaskRequest(_message.Message):
    __slots__ = ["max_tasks", "wait_ms", "worker_id"]
    MAX_TASKS_FIELD_NUMBER: _ClassVar[int]
    WAIT_MS_FIELD_NUMBER: _ClassVar[int]
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    max_tasks: int
    wait_ms: int
    worker_id: str
    def __init__(self, worker_id: _Optional[str] = ..., wait_ms: _Optional[int] = ..., max_tasks: _Optional[int] = ...) -> None: ...

class PollTaskResponse(_message.Message):
    __slots__ = ["tasks"]
    TASKS_FIELD_NUMBER: _ClassVar[int]
    tasks: _containers.RepeatedCompositeFieldContainer[Task]
    def __init__(self, tasks: _Optional[_Iterable[_Union[Task, _Mapping]]] = ...) -> None: ...

class RegisterWorkerRequest(_message.Message):
    __slots__ = ["agents", "model_run_timeout_ms", "runs_model", "tools", "worker_id"]
    AGENTS_FIELD_NUMBER: _ClassVar[int]
    MODEL_RUN_TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    RUNS_MODEL_FIELD_NUMBER: _ClassVar[int]
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    agents: _containers.RepeatedScalarFieldContainer[str]
    model_run_timeout_ms: int
    runs_model: bool
    tools: _containers.RepeatedCompositeFieldContainer[_types_pb2.ToolSpec]
    worker_id: str
    def __init__(self, worker_id: _Optional[str] = ..., tools: _Optional[_Iterable[_Union[_types_pb2.ToolSpec, _Mapping]]] = ..., runs_model: bool = ..., model_run_timeout_ms: _Optional[int] = ..., agents: _Optional[_Iterable[str]] = ...) -> None: ...

class RegisterWorkerResponse(_message.Message):
    __slots__ = ["heartbeat_interval_ms", "heartbeat_timeout_ms", "node_address", "node_id", "partitions"]
    HEARTBEAT_INTERVAL_MS_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    NODE_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    heartbeat_interval_ms: int
    heartbeat_timeout_ms: int
    node_address: str
    node_id: str
    partitions: int
    def __init__(self, heartbeat_interval_ms: _Optional[int] = ..., heartbeat_timeout_ms: _Optional[int] = ..., node_id: _Optional[str] = ..., node_address: _Optional[str] = ..., partitions: _Optional[int] = ...) -> None: ...

class ReportTaskRequest(_message.Message):
    __slots__ = ["ref", "result"]
    REF_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    ref: _types_pb2.AttemptRef
    result: _types_pb2.AttemptResult
    def __init__(self, ref: _Optional[_Union[_types_pb2.AttemptRef, _Mapping]] = ..., result: _Optional[_Union[_types_pb2.AttemptResult, _Mapping]] = ...) -> None: ...

class ReportTaskResponse(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class Task(_message.Message):
    __slots__ = ["access", "agent", "arguments", "call_id", "epoch", "handler", "heartbeat_interval_ms", "heartbeat_timeout_ms", "idempotency_key", "kind", "model_input", "ref", "runner", "session_id", "task_id", "tool", "traceparent"]
    ACCESS_FIELD_NUMBER: _ClassVar[int]
    AGENT_FIELD_NUMBER: _ClassVar[int]
    ARGUMENTS_FIELD_NUMBER: _ClassVar[int]
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    HANDLER_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_INTERVAL_MS_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    MODEL_INPUT_FIELD_NUMBER: _ClassVar[int]
    REF_FIELD_NUMBER: _ClassVar[int]
    RUNNER_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    TOOL_FIELD_NUMBER: _ClassVar[int]
    TRACEPARENT_FIELD_NUMBER: _ClassVar[int]
    access: _types_pb2.ToolAccess
    agent: str
    arguments: str
    call_id: str
    epoch: int
    handler: TaskHandler
    heartbeat_interval_ms: int
    heartbeat_timeout_ms: int
    idempotency_key: str
    kind: _types_pb2.StepKind
    model_input: ModelInput
    ref: _types_pb2.AttemptRef
    runner: TaskRunner
    session_id: str
    task_id: str
    tool: str
    traceparent: str
    def __init__(self, ref: _Optional[_Union[_types_pb2.AttemptRef, _Mapping]] = ..., session_id: _Optional[str] = ..., kind: _Optional[_Union[_types_pb2.StepKind, str]] = ..., tool: _Optional[str] = ..., call_id: _Optional[str] = ..., arguments: _Optional[str] = ..., idempotency_key: _Optional[str] = ..., task_id: _Optional[str] = ..., model_input: _Optional[_Union[ModelInput, _Mapping]] = ..., epoch: _Optional[int] = ..., heartbeat_interval_ms: _Optional[int] = ..., heartbeat_timeout_ms: _Optional[int] = ..., access: _Optional[_Union[_types_pb2.ToolAccess, str]] = ..., agent: _Optional[str] = ..., runner: _Optional[_Union[TaskRunner, str]] = ..., handler: _Optional[_Union[TaskHandler, str]] = ..., traceparent: _Optional[str] = ...) -> None: ...

class TaskRunner(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class TaskHandler(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []
