from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

ATTEMPT_PROGRESS_NOT_COMPLETED: AttemptProgress
ATTEMPT_PROGRESS_NOT_STARTED: AttemptProgress
ATTEMPT_PROGRESS_UNSPECIFIED: AttemptProgress
ATTEMPT_STATUS_CANCELLED: AttemptStatus
ATTEMPT_STATUS_EXPIRED: AttemptStatus
ATTEMPT_STATUS_FAILED: AttemptStatus
ATTEMPT_STATUS_RUNNING: AttemptStatus
ATTEMPT_STATUS_SUCCEEDED: AttemptStatus
ATTEMPT_STATUS_UNSPECIFIED: AttemptStatus
CALL_PHASE_AWAITING_APPROVAL: CallPhase
CALL_PHASE_DONE: CallPhase
CALL_PHASE_POLLING: CallPhase
CALL_PHASE_RUNNING: CallPhase
CALL_PHASE_UNSPECIFIED: CallPhase
CALL_PHASE_WAITING: CallPhase
DESCRIPTOR: _descriptor.FileDescriptor
ERROR_TYPE_CONTEXT_LENGTH: ErrorType
ERROR_TYPE_INVALID_REQUEST: ErrorType
ERROR_TYPE_NETWORK: ErrorType
ERROR_TYPE_OVERLOADED: ErrorType
ERROR_TYPE_RATE_LIMIT: ErrorType
ERROR_TYPE_SERVER_ERROR: ErrorType
ERROR_TYPE_TIMEOUT: ErrorType
ERROR_TYPE_UNKNOWN: ErrorType
ERROR_TYPE_UNSPECIFIED: ErrorType
HISTORY_KIND_ASSISTANT: HistoryKind
HISTORY_KIND_NOTE: HistoryKind
HISTORY_KIND_SUMMARY: HistoryKind
HISTORY_KIND_TOOL_RESULT: HistoryKind
HISTORY_KIND_UNSPECIFIED: HistoryKind
HISTORY_KIND_USER: HistoryKind
OUTCOME_FAILED: Outcome
OUTCOME_SUCCEEDED: Outcome
OUTCOME_UNKNOWN: Outcome
OUTCOME_UNSPECIFIED: Outcome
PAUSE_REASON_BUDGET: PauseReason
PAUSE_REASON_LIMIT: PauseReason
PAUSE_REASON_LOOP: PauseReason
PAUSE_REASON_UNSPECIFIED: PauseReason
RESUME_CHOICE_DROP: ResumeChoice
RESUME_CHOICE_RETRY: ResumeChoice
RESUME_CHOICE_UNSPECIFIED: ResumeChoice
SESSION_STATUS_CLOSED: SessionStatus
SESSION_STATUS_DELETED: SessionStatus
SESSION_STATUS_ERRORED: SessionStatus
SESSION_STATUS_IDLE: SessionStatus
SESSION_STATUS_PAUSED: SessionStatus
SESSION_STATUS_RUNNING: SessionStatus
SESSION_STATUS_UNSPECIFIED: SessionStatus
SESSION_STATUS_WAITING: SessionStatus
STEP_KIND_AWAIT_QUESTION_ANSWER: StepKind
STEP_KIND_AWAIT_TIMER: StepKind
STEP_KIND_AWAIT_TOOL_APPROVAL: StepKind
STEP_KIND_CALL_SINGLE_ATTEMPT_TOOL: StepKind
STEP_KIND_CALL_TOOL: StepKind
STEP_KIND_COMPACT_CONTEXT: StepKind
STEP_KIND_POLL_TOOL_TASK: StepKind
STEP_KIND_RUN_MODEL: StepKind
STEP_KIND_UNSPECIFIED: StepKind
STEP_STATUS_DONE: StepStatus
STEP_STATUS_QUEUED: StepStatus
STEP_STATUS_RUNNING: StepStatus
STEP_STATUS_UNSPECIFIED: StepStatus
STEP_STATUS_WAITING: StepStatus
TOKEN_ROLE_ADMIN: TokenRole
TOKEN_ROLE_CLIENT: TokenRole
TOKEN_ROLE_UNSPECIFIED: TokenRole
TOKEN_ROLE_WORKER: TokenRole
TOOL_ACCESS_IDEMPOTENT_WRITE: ToolAccess
TOOL_ACCESS_READ: ToolAccess
TOOL_ACCESS_SINGLE_ATTEMPT: ToolAccess
TOOL_ACCESS_UNSPECIFIED: ToolAccess
TURN_INPUT_MESSAGES: TurnInput
TURN_INPUT_TOOL_RESULTS: TurnInput
TURN_INPUT_UNSPECIFIED: TurnInput

class AclToken(_message.Message):
    __slots__ = ["created_at_ms", "id", "name", "revoked", "revoked_at_ms", "role", "worker_id"]
    CREATED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    REVOKED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    REVOKED_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    created_at_ms: int
    id: str
    name: str
    revoked: bool
    revoked_at_ms: int
    role: TokenRole
    worker_id: str
    def __init__(self, id: _Optional[str] = ..., name: _Optional[str] = ..., role: _Optional[_Union[TokenRole, str]] = ..., worker_id: _Optional[str] = ..., created_at_ms: _Optional[int] = ..., revoked: bool = ..., revoked_at_ms: _Optional[int] = ...) -> None: ...

class Attempt(_message.Message):
    __slots__ = ["claimed_at_ms", "deadline_ms", "ended_at_ms", "epoch", "error", "error_type", "last_call", "last_seq", "n", "progress", "started_at_ms", "status", "token", "worker_id"]
    CLAIMED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    DEADLINE_MS_FIELD_NUMBER: _ClassVar[int]
    ENDED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ERROR_TYPE_FIELD_NUMBER: _ClassVar[int]
    LAST_CALL_FIELD_NUMBER: _ClassVar[int]
    LAST_SEQ_FIELD_NUMBER: _ClassVar[int]
    N_FIELD_NUMBER: _ClassVar[int]
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    STARTED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    claimed_at_ms: int
    deadline_ms: int
    ended_at_ms: int
    epoch: int
    error: str
    error_type: ErrorType
    last_call: str
    last_seq: int
    n: int
    progress: AttemptProgress
    started_at_ms: int
    status: AttemptStatus
    token: str
    worker_id: str
    def __init__(self, n: _Optional[int] = ..., worker_id: _Optional[str] = ..., epoch: _Optional[int] = ..., token: _Optional[str] = ..., status: _Optional[_Union[AttemptStatus, str]] = ..., progress: _Optional[_Union[AttemptProgress, str]] = ..., started_at_ms: _Optional[int] = ..., claimed_at_ms: _Optional[int] = ..., ended_at_ms: _Optional[int] = ..., error_type: _Optional[_Union[ErrorType, str]] = ..., error: _Optional[str] = ..., last_seq: _Optional[int] = ..., last_call: _Optional[str] = ..., deadline_ms: _Optional[int] = ...) -> None: ...

class AttemptFailure(_message.Message):
    __slots__ = ["error", "error_type", "retry_after_ms"]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ERROR_TYPE_FIELD_NUMBER: _ClassVar[int]
    RETRY_AFTER_MS_FIELD_NUMBER: _ClassVar[int]
    error: str
    error_type: ErrorType
    retry_after_ms: int
    def __init__(self, error_type: _Optional[_Union[ErrorType, str]] = ..., error: _Optional[str] = ..., retry_after_ms: _Optional[int] = ...) -> None: ...

class AttemptRef(_message.Message):
    __slots__ = ["attempt", "seq", "step_id", "token"]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    STEP_ID_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    attempt: int
    seq: int
    step_id: str
    token: str
    def __init__(self, step_id: _Optional[str] = ..., attempt: _Optional[int] = ..., token: _Optional[str] = ..., seq: _Optional[int] = ...) -> None: ...

class AttemptResult(_message.Message):
    __slots__ = ["failure", "model_output", "poll_result", "summary", "tool_result"]
    FAILURE_FIELD_NUMBER: _ClassVar[int]
    MODEL_OUTPUT_FIELD_NUMBER: _ClassVar[int]
    POLL_RESULT_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_FIELD_NUMBER: _ClassVar[int]
    TOOL_RESULT_FIELD_NUMBER: _ClassVar[int]
    failure: AttemptFailure
    model_output: ModelOutput
    poll_result: PollResult
    summary: str
    tool_result: ToolResult
    def __init__(self, model_output: _Optional[_Union[ModelOutput, _Mapping]] = ..., tool_result: _Optional[_Union[ToolResult, _Mapping]] = ..., poll_result: _Optional[_Union[PollResult, _Mapping]] = ..., summary: _Optional[str] = ..., failure: _Optional[_Union[AttemptFailure, _Mapping]] = ...) -> None: ...

class Budget(_message.Message):
    __slots__ = ["loop_limit", "max_cost_micros", "max_model_calls_per_turn", "max_tokens", "max_tool_calls_per_turn", "max_turns"]
    LOOP_LIMIT_FIELD_NUMBER: _ClassVar[int]
    MAX_COST_MICROS_FIELD_NUMBER: _ClassVar[int]
    MAX_MODEL_CALLS_PER_TURN_FIELD_NUMBER: _ClassVar[int]
    MAX_TOKENS_FIELD_NUMBER: _ClassVar[int]
    MAX_TOOL_CALLS_PER_TURN_FIELD_NUMBER: _ClassVar[int]
    MAX_TURNS_FIELD_NUMBER: _ClassVar[int]
    loop_limit: int
    max_cost_micros: int
    max_model_calls_per_turn: int
    max_tokens: int
    max_tool_calls_per_turn: int
    max_turns: int
    def __init__(self, max_tokens: _Optional[int] = ..., max_cost_micros: _Optional[int] = ..., max_turns: _Optional[int] = ..., max_model_calls_per_turn: _Optional[int] = ..., max_tool_calls_per_turn: _Optional[int] = ..., loop_limit: _Optional[int] = ...) -> None: ...

class BudgetChange(_message.Message):
    __slots__ = ["loop_limit", "max_cost_micros", "max_model_calls_per_turn", "max_tokens", "max_tool_calls_per_turn", "max_turns"]
    LOOP_LIMIT_FIELD_NUMBER: _ClassVar[int]
    MAX_COST_MICROS_FIELD_NUMBER: _ClassVar[int]
    MAX_MODEL_CALLS_PER_TURN_FIELD_NUMBER: _ClassVar[int]
    MAX_TOKENS_FIELD_NUMBER: _ClassVar[int]
    MAX_TOOL_CALLS_PER_TURN_FIELD_NUMBER: _ClassVar[int]
    MAX_TURNS_FIELD_NUMBER: _ClassVar[int]
    loop_limit: int
    max_cost_micros: int
    max_model_calls_per_turn: int
    max_tokens: int
    max_tool_calls_per_turn: int
    max_turns: int
    def __init__(self, max_tokens: _Optional[int] = ..., max_cost_micros: _Optional[int] = ..., max_turns: _Optional[int] = ..., max_model_calls_per_turn: _Optional[int] = ..., max_tool_calls_per_turn: _Optional[int] = ..., loop_limit: _Optional[int] = ...) -> None: ...

class CallState(_message.Message):
    __slots__ = ["arguments", "builtin", "call_id", "content", "idempotency_key", "outcome", "phase", "policy", "ran", "step_id", "task_id", "tool"]
    ARGUMENTS_FIELD_NUMBER: _ClassVar[int]
    BUILTIN_FIELD_NUMBER: _ClassVar[int]
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    PHASE_FIELD_NUMBER: _ClassVar[int]
    POLICY_FIELD_NUMBER: _ClassVar[int]
    RAN_FIELD_NUMBER: _ClassVar[int]
    STEP_ID_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    TOOL_FIELD_NUMBER: _ClassVar[int]
    arguments: str
    builtin: str
    call_id: str
    content: str
    idempotency_key: str
    outcome: Outcome
    phase: CallPhase
    policy: ToolSpec
    ran: bool
    step_id: str
    task_id: str
    tool: str
    def __init__(self, call_id: _Optional[str] = ..., tool: _Optional[str] = ..., arguments: _Optional[str] = ..., policy: _Optional[_Union[ToolSpec, _Mapping]] = ..., phase: _Optional[_Union[CallPhase, str]] = ..., step_id: _Optional[str] = ..., task_id: _Optional[str] = ..., outcome: _Optional[_Union[Outcome, str]] = ..., content: _Optional[str] = ..., idempotency_key: _Optional[str] = ..., ran: bool = ..., builtin: _Optional[str] = ...) -> None: ...

class Event(_message.Message):
    __slots__ = ["at_ms", "detail", "ordinal", "output", "seq", "session_id", "step_id", "type"]
    AT_MS_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    ORDINAL_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    STEP_ID_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    at_ms: int
    detail: str
    ordinal: int
    output: OutputDelta
    seq: int
    session_id: str
    step_id: str
    type: str
    def __init__(self, seq: _Optional[int] = ..., session_id: _Optional[str] = ..., type: _Optional[str] = ..., step_id: _Optional[str] = ..., detail: _Optional[str] = ..., at_ms: _Optional[int] = ..., ordinal: _Optional[int] = ..., output: _Optional[_Union[OutputDelta, _Mapping]] = ...) -> None: ...

class FoldedKind(_message.Message):
    __slots__ = ["attempts", "kind", "steps", "tool"]
    ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    STEPS_FIELD_NUMBER: _ClassVar[int]
    TOOL_FIELD_NUMBER: _ClassVar[int]
    attempts: int
    kind: StepKind
    steps: int
    tool: str
    def __init__(self, kind: _Optional[_Union[StepKind, str]] = ..., tool: _Optional[str] = ..., steps: _Optional[int] = ..., attempts: _Optional[int] = ...) -> None: ...

class FoldedTurn(_message.Message):
    __slots__ = ["attempts", "failed_steps", "first_at_ms", "first_step", "kinds", "last_at_ms", "last_error_type", "last_outcome", "last_status", "last_step", "session_id", "steps", "turn"]
    ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    FAILED_STEPS_FIELD_NUMBER: _ClassVar[int]
    FIRST_AT_MS_FIELD_NUMBER: _ClassVar[int]
    FIRST_STEP_FIELD_NUMBER: _ClassVar[int]
    KINDS_FIELD_NUMBER: _ClassVar[int]
    LAST_AT_MS_FIELD_NUMBER: _ClassVar[int]
    LAST_ERROR_TYPE_FIELD_NUMBER: _ClassVar[int]
    LAST_OUTCOME_FIELD_NUMBER: _ClassVar[int]
    LAST_STATUS_FIELD_NUMBER: _ClassVar[int]
    LAST_STEP_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    STEPS_FIELD_NUMBER: _ClassVar[int]
    TURN_FIELD_NUMBER: _ClassVar[int]
    attempts: int
    failed_steps: int
    first_at_ms: int
    first_step: int
    kinds: _containers.RepeatedCompositeFieldContainer[FoldedKind]
    last_at_ms: int
    last_error_type: ErrorType
    last_outcome: Outcome
    last_status: StepStatus
    last_step: int
    session_id: str
    steps: int
    turn: int
    def __init__(self, session_id: _Optional[str] = ..., turn: _Optional[int] = ..., steps: _Optional[int] = ..., attempts: _Optional[int] = ..., kinds: _Optional[_Iterable[_Union[FoldedKind, _Mapping]]] = ..., first_step: _Optional[int] = ..., last_step: _Optional[int] = ..., first_at_ms: _Optional[int] = ..., last_at_ms: _Optional[int] = ..., last_status: _Optional[_Union[StepStatus, str]] = ..., last_outcome: _Optional[_Union[Outcome, str]] = ..., last_error_type: _Optional[_Union[ErrorType, str]] = ..., failed_steps: _Optional[int] = ...) -> None: ...

class HistoryEntry(_message.Message):
    __slots__ = ["arguments", "at_ms", "call_id", "cum_size", "from_session", "inline_results", "kind", "message_id", "outcome", "seq", "session_id", "step_id", "text", "tool", "tool_calls"]
    ARGUMENTS_FIELD_NUMBER: _ClassVar[int]
    AT_MS_FIELD_NUMBER: _ClassVar[int]
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    CUM_SIZE_FIELD_NUMBER: _ClassVar[int]
    FROM_SESSION_FIELD_NUMBER: _ClassVar[int]
    INLINE_RESULTS_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    STEP_ID_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALLS_FIELD_NUMBER: _ClassVar[int]
    TOOL_FIELD_NUMBER: _ClassVar[int]
    arguments: str
    at_ms: int
    call_id: str
    cum_size: int
    from_session: str
    inline_results: _containers.RepeatedCompositeFieldContainer[InlineResult]
    kind: HistoryKind
    message_id: str
    outcome: Outcome
    seq: int
    session_id: str
    step_id: str
    text: str
    tool: str
    tool_calls: _containers.RepeatedCompositeFieldContainer[ToolCall]
    def __init__(self, seq: _Optional[int] = ..., kind: _Optional[_Union[HistoryKind, str]] = ..., text: _Optional[str] = ..., call_id: _Optional[str] = ..., tool: _Optional[str] = ..., arguments: _Optional[str] = ..., outcome: _Optional[_Union[Outcome, str]] = ..., tool_calls: _Optional[_Iterable[_Union[ToolCall, _Mapping]]] = ..., inline_results: _Optional[_Iterable[_Union[InlineResult, _Mapping]]] = ..., step_id: _Optional[str] = ..., message_id: _Optional[str] = ..., from_session: _Optional[str] = ..., at_ms: _Optional[int] = ..., session_id: _Optional[str] = ..., cum_size: _Optional[int] = ...) -> None: ...

class InlineResult(_message.Message):
    __slots__ = ["arguments", "call_id", "content", "is_error", "tool"]
    ARGUMENTS_FIELD_NUMBER: _ClassVar[int]
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    IS_ERROR_FIELD_NUMBER: _ClassVar[int]
    TOOL_FIELD_NUMBER: _ClassVar[int]
    arguments: str
    call_id: str
    content: str
    is_error: bool
    tool: str
    def __init__(self, call_id: _Optional[str] = ..., tool: _Optional[str] = ..., arguments: _Optional[str] = ..., content: _Optional[str] = ..., is_error: bool = ...) -> None: ...

class Label(_message.Message):
    __slots__ = ["key", "value"]
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    key: str
    value: str
    def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...

class Message(_message.Message):
    __slots__ = ["from_session", "id", "received_at_ms", "seq", "session_id", "text"]
    FROM_SESSION_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    RECEIVED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    from_session: str
    id: str
    received_at_ms: int
    seq: int
    session_id: str
    text: str
    def __init__(self, id: _Optional[str] = ..., text: _Optional[str] = ..., from_session: _Optional[str] = ..., received_at_ms: _Optional[int] = ..., session_id: _Optional[str] = ..., seq: _Optional[int] = ...) -> None: ...

class ModelOutput(_message.Message):
    __slots__ = ["inline_results", "text", "tool_calls", "usage"]
    INLINE_RESULTS_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALLS_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    inline_results: _containers.RepeatedCompositeFieldContainer[InlineResult]
    text: str
    tool_calls: _containers.RepeatedCompositeFieldContainer[ToolCall]
    usage: Usage
    def __init__(self, text: _Optional[str] = ..., tool_calls: _Optional[_Iterable[_Union[ToolCall, _Mapping]]] = ..., inline_results: _Optional[_Iterable[_Union[InlineResult, _Mapping]]] = ..., usage: _Optional[_Union[Usage, _Mapping]] = ...) -> None: ...

class NodeInfo(_message.Message):
    __slots__ = ["grpc_address", "http_address", "id", "log_version", "raft_address"]
    GRPC_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    HTTP_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    LOG_VERSION_FIELD_NUMBER: _ClassVar[int]
    RAFT_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    grpc_address: str
    http_address: str
    id: str
    log_version: int
    raft_address: str
    def __init__(self, id: _Optional[str] = ..., raft_address: _Optional[str] = ..., grpc_address: _Optional[str] = ..., http_address: _Optional[str] = ..., log_version: _Optional[int] = ...) -> None: ...

class OutputDelta(_message.Message):
    __slots__ = ["attempt", "offset", "text"]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    attempt: int
    offset: int
    text: str
    def __init__(self, attempt: _Optional[int] = ..., offset: _Optional[int] = ..., text: _Optional[str] = ...) -> None: ...

class PollResult(_message.Message):
    __slots__ = ["done", "result"]
    DONE_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    done: bool
    result: ToolResult
    def __init__(self, done: bool = ..., result: _Optional[_Union[ToolResult, _Mapping]] = ...) -> None: ...

class ProviderHold(_message.Message):
    __slots__ = ["provider", "set_at_ms", "step_id", "until_ms"]
    PROVIDER_FIELD_NUMBER: _ClassVar[int]
    SET_AT_MS_FIELD_NUMBER: _ClassVar[int]
    STEP_ID_FIELD_NUMBER: _ClassVar[int]
    UNTIL_MS_FIELD_NUMBER: _ClassVar[int]
    provider: str
    set_at_ms: int
    step_id: str
    until_ms: int
    def __init__(self, provider: _Optional[str] = ..., until_ms: _Optional[int] = ..., step_id: _Optional[str] = ..., set_at_ms: _Optional[int] = ...) -> None: ...

class Session(_message.Message):
    __slots__ = ["agent", "budget", "close_requested_at_ms", "closed_at_ms", "compacted_before", "compaction_threshold", "created_at_ms", "delete_at_ms", "episode_resumes", "error_episode", "fairness_key", "fairness_weight", "folded_steps", "folded_through_turn", "forked_at_seq", "forked_from", "history", "history_count", "history_size", "id", "inbox", "inbox_count", "labels", "last_error", "last_error_type", "latest_summary_seq", "max_model_input", "next_history", "next_inbox", "next_step", "next_turn", "parent_id", "pause_message", "pause_reason", "priority", "provider", "rejected_turns", "resume_at_ms", "retention_ms", "seen_message_ids", "status", "summaries", "tree_usage", "turn", "turns_completed", "turns_failed", "updated_at_ms", "usage"]
    AGENT_FIELD_NUMBER: _ClassVar[int]
    BUDGET_FIELD_NUMBER: _ClassVar[int]
    CLOSED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    CLOSE_REQUESTED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    COMPACTED_BEFORE_FIELD_NUMBER: _ClassVar[int]
    COMPACTION_THRESHOLD_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    DELETE_AT_MS_FIELD_NUMBER: _ClassVar[int]
    EPISODE_RESUMES_FIELD_NUMBER: _ClassVar[int]
    ERROR_EPISODE_FIELD_NUMBER: _ClassVar[int]
    FAIRNESS_KEY_FIELD_NUMBER: _ClassVar[int]
    FAIRNESS_WEIGHT_FIELD_NUMBER: _ClassVar[int]
    FOLDED_STEPS_FIELD_NUMBER: _ClassVar[int]
    FOLDED_THROUGH_TURN_FIELD_NUMBER: _ClassVar[int]
    FORKED_AT_SEQ_FIELD_NUMBER: _ClassVar[int]
    FORKED_FROM_FIELD_NUMBER: _ClassVar[int]
    HISTORY_COUNT_FIELD_NUMBER: _ClassVar[int]
    HISTORY_FIELD_NUMBER: _ClassVar[int]
    HISTORY_SIZE_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    INBOX_COUNT_FIELD_NUMBER: _ClassVar[int]
    INBOX_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    LAST_ERROR_FIELD_NUMBER: _ClassVar[int]
    LAST_ERROR_TYPE_FIELD_NUMBER: _ClassVar[int]
    LATEST_SUMMARY_SEQ_FIELD_NUMBER: _ClassVar[int]
    MAX_MODEL_INPUT_FIELD_NUMBER: _ClassVar[int]
    NEXT_HISTORY_FIELD_NUMBER: _ClassVar[int]
    NEXT_INBOX_FIELD_NUMBER: _ClassVar[int]
    NEXT_STEP_FIELD_NUMBER: _ClassVar[int]
    NEXT_TURN_FIELD_NUMBER: _ClassVar[int]
    PARENT_ID_FIELD_NUMBER: _ClassVar[int]
    PAUSE_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    PAUSE_REASON_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    PROVIDER_FIELD_NUMBER: _ClassVar[int]
    REJECTED_TURNS_FIELD_NUMBER: _ClassVar[int]
    RESUME_AT_MS_FIELD_NUMBER: _ClassVar[int]
    RETENTION_MS_FIELD_NUMBER: _ClassVar[int]
    SEEN_MESSAGE_IDS_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    SUMMARIES_FIELD_NUMBER: _ClassVar[int]
    TREE_USAGE_FIELD_NUMBER: _ClassVar[int]
    TURNS_COMPLETED_FIELD_NUMBER: _ClassVar[int]
    TURNS_FAILED_FIELD_NUMBER: _ClassVar[int]
    TURN_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    agent: str
    budget: Budget
    close_requested_at_ms: int
    closed_at_ms: int
    compacted_before: int
    compaction_threshold: int
    created_at_ms: int
    delete_at_ms: int
    episode_resumes: int
    error_episode: bool
    fairness_key: str
    fairness_weight: int
    folded_steps: int
    folded_through_turn: int
    forked_at_seq: int
    forked_from: str
    history: _containers.RepeatedCompositeFieldContainer[HistoryEntry]
    history_count: int
    history_size: int
    id: str
    inbox: _containers.RepeatedCompositeFieldContainer[Message]
    inbox_count: int
    labels: _containers.RepeatedCompositeFieldContainer[Label]
    last_error: str
    last_error_type: ErrorType
    latest_summary_seq: int
    max_model_input: int
    next_history: int
    next_inbox: int
    next_step: int
    next_turn: int
    parent_id: str
    pause_message: str
    pause_reason: PauseReason
    priority: int
    provider: str
    rejected_turns: int
    resume_at_ms: int
    retention_ms: int
    seen_message_ids: _containers.RepeatedScalarFieldContainer[str]
    status: SessionStatus
    summaries: int
    tree_usage: UsageTotals
    turn: Turn
    turns_completed: int
    turns_failed: int
    updated_at_ms: int
    usage: UsageTotals
    def __init__(self, id: _Optional[str] = ..., parent_id: _Optional[str] = ..., status: _Optional[_Union[SessionStatus, str]] = ..., history: _Optional[_Iterable[_Union[HistoryEntry, _Mapping]]] = ..., inbox: _Optional[_Iterable[_Union[Message, _Mapping]]] = ..., turn: _Optional[_Union[Turn, _Mapping]] = ..., compaction_threshold: _Optional[int] = ..., rejected_turns: _Optional[int] = ..., pause_reason: _Optional[_Union[PauseReason, str]] = ..., pause_message: _Optional[str] = ..., last_error_type: _Optional[_Union[ErrorType, str]] = ..., last_error: _Optional[str] = ..., error_episode: bool = ..., episode_resumes: _Optional[int] = ..., resume_at_ms: _Optional[int] = ..., next_step: _Optional[int] = ..., next_turn: _Optional[int] = ..., next_history: _Optional[int] = ..., created_at_ms: _Optional[int] = ..., updated_at_ms: _Optional[int] = ..., summaries: _Optional[int] = ..., compacted_before: _Optional[int] = ..., turns_completed: _Optional[int] = ..., turns_failed: _Optional[int] = ..., seen_message_ids: _Optional[_Iterable[str]] = ..., history_size: _Optional[int] = ..., history_count: _Optional[int] = ..., inbox_count: _Optional[int] = ..., next_inbox: _Optional[int] = ..., latest_summary_seq: _Optional[int] = ..., max_model_input: _Optional[int] = ..., agent: _Optional[str] = ..., retention_ms: _Optional[int] = ..., close_requested_at_ms: _Optional[int] = ..., closed_at_ms: _Optional[int] = ..., delete_at_ms: _Optional[int] = ..., folded_through_turn: _Optional[int] = ..., folded_steps: _Optional[int] = ..., budget: _Optional[_Union[Budget, _Mapping]] = ..., usage: _Optional[_Union[UsageTotals, _Mapping]] = ..., tree_usage: _Optional[_Union[UsageTotals, _Mapping]] = ..., priority: _Optional[int] = ..., fairness_key: _Optional[str] = ..., fairness_weight: _Optional[int] = ..., provider: _Optional[str] = ..., labels: _Optional[_Iterable[_Union[Label, _Mapping]]] = ..., forked_from: _Optional[str] = ..., forked_at_seq: _Optional[int] = ...) -> None: ...

class Step(_message.Message):
    __slots__ = ["agent", "arguments", "attempts", "call_id", "compact_before", "created_at_ms", "due_at_ms", "ended_at_ms", "error_type", "id", "idempotency_key", "is_error", "kind", "max_attempts", "number", "outcome", "policy", "prompt", "queue_seq", "ready_at_ms", "result", "session_id", "status", "task_id", "tool", "turn", "usage", "waiting_reason"]
    AGENT_FIELD_NUMBER: _ClassVar[int]
    ARGUMENTS_FIELD_NUMBER: _ClassVar[int]
    ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    COMPACT_BEFORE_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    DUE_AT_MS_FIELD_NUMBER: _ClassVar[int]
    ENDED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    ERROR_TYPE_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    IS_ERROR_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    MAX_ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    NUMBER_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    POLICY_FIELD_NUMBER: _ClassVar[int]
    PROMPT_FIELD_NUMBER: _ClassVar[int]
    QUEUE_SEQ_FIELD_NUMBER: _ClassVar[int]
    READY_AT_MS_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    TOOL_FIELD_NUMBER: _ClassVar[int]
    TURN_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    WAITING_REASON_FIELD_NUMBER: _ClassVar[int]
    agent: str
    arguments: str
    attempts: _containers.RepeatedCompositeFieldContainer[Attempt]
    call_id: str
    compact_before: int
    created_at_ms: int
    due_at_ms: int
    ended_at_ms: int
    error_type: ErrorType
    id: str
    idempotency_key: str
    is_error: bool
    kind: StepKind
    max_attempts: int
    number: int
    outcome: Outcome
    policy: ToolSpec
    prompt: str
    queue_seq: int
    ready_at_ms: int
    result: str
    session_id: str
    status: StepStatus
    task_id: str
    tool: str
    turn: int
    usage: Usage
    waiting_reason: str
    def __init__(self, id: _Optional[str] = ..., session_id: _Optional[str] = ..., turn: _Optional[int] = ..., kind: _Optional[_Union[StepKind, str]] = ..., call_id: _Optional[str] = ..., tool: _Optional[str] = ..., arguments: _Optional[str] = ..., policy: _Optional[_Union[ToolSpec, _Mapping]] = ..., idempotency_key: _Optional[str] = ..., task_id: _Optional[str] = ..., status: _Optional[_Union[StepStatus, str]] = ..., ready_at_ms: _Optional[int] = ..., due_at_ms: _Optional[int] = ..., attempts: _Optional[_Iterable[_Union[Attempt, _Mapping]]] = ..., outcome: _Optional[_Union[Outcome, str]] = ..., result: _Optional[str] = ..., is_error: bool = ..., created_at_ms: _Optional[int] = ..., queue_seq: _Optional[int] = ..., prompt: _Optional[str] = ..., ended_at_ms: _Optional[int] = ..., max_attempts: _Optional[int] = ..., error_type: _Optional[_Union[ErrorType, str]] = ..., number: _Optional[int] = ..., compact_before: _Optional[int] = ..., agent: _Optional[str] = ..., waiting_reason: _Optional[str] = ..., usage: _Optional[_Union[Usage, _Mapping]] = ...) -> None: ...

class ToolCall(_message.Message):
    __slots__ = ["arguments", "call_id", "tool"]
    ARGUMENTS_FIELD_NUMBER: _ClassVar[int]
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    TOOL_FIELD_NUMBER: _ClassVar[int]
    arguments: str
    call_id: str
    tool: str
    def __init__(self, call_id: _Optional[str] = ..., tool: _Optional[str] = ..., arguments: _Optional[str] = ...) -> None: ...

class ToolResult(_message.Message):
    __slots__ = ["content", "is_error", "task_id"]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    IS_ERROR_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    content: str
    is_error: bool
    task_id: str
    def __init__(self, content: _Optional[str] = ..., is_error: bool = ..., task_id: _Optional[str] = ...) -> None: ...

class ToolSpec(_message.Message):
    __slots__ = ["access", "agents", "description", "inline", "long_running", "max_attempts", "name", "needs_approval", "poll_interval_ms", "run_timeout_ms"]
    ACCESS_FIELD_NUMBER: _ClassVar[int]
    AGENTS_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    INLINE_FIELD_NUMBER: _ClassVar[int]
    LONG_RUNNING_FIELD_NUMBER: _ClassVar[int]
    MAX_ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    NEEDS_APPROVAL_FIELD_NUMBER: _ClassVar[int]
    POLL_INTERVAL_MS_FIELD_NUMBER: _ClassVar[int]
    RUN_TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    access: ToolAccess
    agents: _containers.RepeatedScalarFieldContainer[str]
    description: str
    inline: bool
    long_running: bool
    max_attempts: int
    name: str
    needs_approval: bool
    poll_interval_ms: int
    run_timeout_ms: int
    def __init__(self, name: _Optional[str] = ..., access: _Optional[_Union[ToolAccess, str]] = ..., needs_approval: bool = ..., long_running: bool = ..., inline: bool = ..., max_attempts: _Optional[int] = ..., poll_interval_ms: _Optional[int] = ..., description: _Optional[str] = ..., run_timeout_ms: _Optional[int] = ..., agents: _Optional[_Iterable[str]] = ...) -> None: ...

class Turn(_message.Message):
    __slots__ = ["calls", "first_history_seq", "input", "message_ids", "noted_ran_calls", "number", "ran_calls", "results_from_seq", "started_at_ms", "step_id", "usage"]
    CALLS_FIELD_NUMBER: _ClassVar[int]
    FIRST_HISTORY_SEQ_FIELD_NUMBER: _ClassVar[int]
    INPUT_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_IDS_FIELD_NUMBER: _ClassVar[int]
    NOTED_RAN_CALLS_FIELD_NUMBER: _ClassVar[int]
    NUMBER_FIELD_NUMBER: _ClassVar[int]
    RAN_CALLS_FIELD_NUMBER: _ClassVar[int]
    RESULTS_FROM_SEQ_FIELD_NUMBER: _ClassVar[int]
    STARTED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    STEP_ID_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    calls: _containers.RepeatedCompositeFieldContainer[CallState]
    first_history_seq: int
    input: TurnInput
    message_ids: _containers.RepeatedScalarFieldContainer[str]
    noted_ran_calls: int
    number: int
    ran_calls: _containers.RepeatedScalarFieldContainer[str]
    results_from_seq: int
    started_at_ms: int
    step_id: str
    usage: UsageTotals
    def __init__(self, number: _Optional[int] = ..., input: _Optional[_Union[TurnInput, str]] = ..., message_ids: _Optional[_Iterable[str]] = ..., calls: _Optional[_Iterable[_Union[CallState, _Mapping]]] = ..., step_id: _Optional[str] = ..., ran_calls: _Optional[_Iterable[str]] = ..., noted_ran_calls: _Optional[int] = ..., results_from_seq: _Optional[int] = ..., usage: _Optional[_Union[UsageTotals, _Mapping]] = ..., first_history_seq: _Optional[int] = ..., started_at_ms: _Optional[int] = ...) -> None: ...

class Usage(_message.Message):
    __slots__ = ["cost_micros", "input_tokens", "model", "output_tokens"]
    COST_MICROS_FIELD_NUMBER: _ClassVar[int]
    INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    cost_micros: int
    input_tokens: int
    model: str
    output_tokens: int
    def __init__(self, input_tokens: _Optional[int] = ..., output_tokens: _Optional[int] = ..., cost_micros: _Optional[int] = ..., model: _Optional[str] = ...) -> None: ...

class UsageTotals(_message.Message):
    __slots__ = ["cost_micros", "input_tokens", "model_calls", "output_tokens", "tool_calls"]
    COST_MICROS_FIELD_NUMBER: _ClassVar[int]
    INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    MODEL_CALLS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALLS_FIELD_NUMBER: _ClassVar[int]
    cost_micros: int
    input_tokens: int
    model_calls: int
    output_tokens: int
    tool_calls: int
    def __init__(self, input_tokens: _Optional[int] = ..., output_tokens: _Optional[int] = ..., cost_micros: _Optional[int] = ..., model_calls: _Optional[int] = ..., tool_calls: _Optional[int] = ...) -> None: ...

class WorkerInfo(_message.Message):
    __slots__ = ["agents", "id", "model_run_timeout_ms", "registered_at_ms", "runs_model", "tools"]
    AGENTS_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    MODEL_RUN_TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    REGISTERED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    RUNS_MODEL_FIELD_NUMBER: _ClassVar[int]
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    agents: _containers.RepeatedScalarFieldContainer[str]
    id: str
    model_run_timeout_ms: int
    registered_at_ms: int
    runs_model: bool
    tools: _containers.RepeatedCompositeFieldContainer[ToolSpec]
    def __init__(self, id: _Optional[str] = ..., tools: _Optional[_Iterable[_Union[ToolSpec, _Mapping]]] = ..., registered_at_ms: _Optional[int] = ..., runs_model: bool = ..., model_run_timeout_ms: _Optional[int] = ..., agents: _Optional[_Iterable[str]] = ...) -> None: ...

class SessionStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class StepKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class StepStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class Outcome(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class AttemptStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class AttemptProgress(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class ErrorType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class ResumeChoice(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class ToolAccess(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class PauseReason(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class HistoryKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class TurnInput(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class CallPhase(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class TokenRole(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []
