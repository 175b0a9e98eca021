from dex.v1 import types_pb2 as _types_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class AnswerQuestion(_message.Message):
    __slots__ = ["answer", "step_id"]
    ANSWER_FIELD_NUMBER: _ClassVar[int]
    STEP_ID_FIELD_NUMBER: _ClassVar[int]
    answer: str
    step_id: str
    def __init__(self, step_id: _Optional[str] = ..., answer: _Optional[str] = ...) -> None: ...

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

class BumpEpoch(_message.Message):
    __slots__ = ["node_id"]
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    def __init__(self, node_id: _Optional[str] = ...) -> None: ...

class CancelTurn(_message.Message):
    __slots__ = ["by", "reason", "session_id"]
    BY_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    by: str
    reason: str
    session_id: str
    def __init__(self, session_id: _Optional[str] = ..., by: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class ClaimAttempt(_message.Message):
    __slots__ = ["ref"]
    REF_FIELD_NUMBER: _ClassVar[int]
    ref: AttemptRef
    def __init__(self, ref: _Optional[_Union[AttemptRef, _Mapping]] = ...) -> None: ...

class Command(_message.Message):
    __slots__ = ["answer_question", "bump_epoch", "cancel_turn", "claim_attempt", "complete_attempt", "create_session", "create_token", "delete_session", "deregister_worker", "edit_history", "expire_attempt", "expire_sessions", "fail_attempt", "fail_unserved_step", "fire_timer", "ignorable", "now_ms", "prune_events", "purge_session", "reconcile_outcome", "register_worker", "remove_node", "report_attempt", "resolve_approval", "restart_sessions", "resume_errored", "resume_session", "revoke_token", "send_message", "set_cluster_id", "set_event_retention", "set_node", "start_attempt", "timeout_attempt"]
    ANSWER_QUESTION_FIELD_NUMBER: _ClassVar[int]
    BUMP_EPOCH_FIELD_NUMBER: _ClassVar[int]
    CANCEL_TURN_FIELD_NUMBER: _ClassVar[int]
    CLAIM_ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    COMPLETE_ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    CREATE_SESSION_FIELD_NUMBER: _ClassVar[int]
    CREATE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    DELETE_SESSION_FIELD_NUMBER: _ClassVar[int]
    DEREGISTER_WORKER_FIELD_NUMBER: _ClassVar[int]
    EDIT_HISTORY_FIELD_NUMBER: _ClassVar[int]
    EXPIRE_ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    EXPIRE_SESSIONS_FIELD_NUMBER: _ClassVar[int]
    FAIL_ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    FAIL_UNSERVED_STEP_FIELD_NUMBER: _ClassVar[int]
    FIRE_TIMER_FIELD_NUMBER: _ClassVar[int]
    IGNORABLE_FIELD_NUMBER: _ClassVar[int]
    NOW_MS_FIELD_NUMBER: _ClassVar[int]
    PRUNE_EVENTS_FIELD_NUMBER: _ClassVar[int]
    PURGE_SESSION_FIELD_NUMBER: _ClassVar[int]
    RECONCILE_OUTCOME_FIELD_NUMBER: _ClassVar[int]
    REGISTER_WORKER_FIELD_NUMBER: _ClassVar[int]
    REMOVE_NODE_FIELD_NUMBER: _ClassVar[int]
    REPORT_ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    RESOLVE_APPROVAL_FIELD_NUMBER: _ClassVar[int]
    RESTART_SESSIONS_FIELD_NUMBER: _ClassVar[int]
    RESUME_ERRORED_FIELD_NUMBER: _ClassVar[int]
    RESUME_SESSION_FIELD_NUMBER: _ClassVar[int]
    REVOKE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    SEND_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    SET_CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    SET_EVENT_RETENTION_FIELD_NUMBER: _ClassVar[int]
    SET_NODE_FIELD_NUMBER: _ClassVar[int]
    START_ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    answer_question: AnswerQuestion
    bump_epoch: BumpEpoch
    cancel_turn: CancelTurn
    claim_attempt: ClaimAttempt
    complete_attempt: CompleteAttempt
    create_session: CreateSession
    create_token: CreateToken
    delete_session: DeleteSession
    deregister_worker: DeregisterWorker
    edit_history: EditHistory
    expire_attempt: ExpireAttempt
    expire_sessions: ExpireSessions
    fail_attempt: FailAttempt
    fail_unserved_step: FailUnservedStep
    fire_timer: FireTimer
    ignorable: bool
    now_ms: int
    prune_events: PruneEvents
    purge_session: PurgeSession
    reconcile_outcome: ReconcileOutcome
    register_worker: RegisterWorker
    remove_node: RemoveNode
    report_attempt: ReportAttempt
    resolve_approval: ResolveApproval
    restart_sessions: RestartSessions
    resume_errored: ResumeErrored
    resume_session: ResumeSession
    revoke_token: RevokeToken
    send_message: SendMessage
    set_cluster_id: SetClusterId
    set_event_retention: SetEventRetention
    set_node: SetNode
    start_attempt: StartAttempt
    timeout_attempt: TimeoutAttempt
    def __init__(self, ignorable: bool = ..., now_ms: _Optional[int] = ..., create_session: _Optional[_Union[CreateSession, _Mapping]] = ..., send_message: _Optional[_Union[SendMessage, _Mapping]] = ..., register_worker: _Optional[_Union[RegisterWorker, _Mapping]] = ..., bump_epoch: _Optional[_Union[BumpEpoch, _Mapping]] = ..., start_attempt: _Optional[_Union[StartAttempt, _Mapping]] = ..., claim_attempt: _Optional[_Union[ClaimAttempt, _Mapping]] = ..., complete_attempt: _Optional[_Union[CompleteAttempt, _Mapping]] = ..., fail_attempt: _Optional[_Union[FailAttempt, _Mapping]] = ..., expire_attempt: _Optional[_Union[ExpireAttempt, _Mapping]] = ..., resolve_approval: _Optional[_Union[ResolveApproval, _Mapping]] = ..., answer_question: _Optional[_Union[AnswerQuestion, _Mapping]] = ..., fire_timer: _Optional[_Union[FireTimer, _Mapping]] = ..., resume_session: _Optional[_Union[ResumeSession, _Mapping]] = ..., restart_sessions: _Optional[_Union[RestartSessions, _Mapping]] = ..., resume_errored: _Optional[_Union[ResumeErrored, _Mapping]] = ..., reconcile_outcome: _Optional[_Union[ReconcileOutcome, _Mapping]] = ..., edit_history: _Optional[_Union[EditHistory, _Mapping]] = ..., set_node: _Optional[_Union[SetNode, _Mapping]] = ..., remove_node: _Optional[_Union[RemoveNode, _Mapping]] = ..., set_event_retention: _Optional[_Union[SetEventRetention, _Mapping]] = ..., prune_events: _Optional[_Union[PruneEvents, _Mapping]] = ..., deregister_worker: _Optional[_Union[DeregisterWorker, _Mapping]] = ..., fail_unserved_step: _Optional[_Union[FailUnservedStep, _Mapping]] = ..., delete_session: _Optional[_Union[DeleteSession, _Mapping]] = ..., purge_session: _Optional[_Union[PurgeSession, _Mapping]] = ..., expire_sessions: _Optional[_Union[ExpireSessions, _Mapping]] = ..., timeout_attempt: _Optional[_Union[TimeoutAttempt, _Mapping]] = ..., report_attempt: _Optional[_Union[ReportAttempt, _Mapping]] = ..., set_cluster_id: _Optional[_Union[SetClusterId, _Mapping]] = ..., create_token: _Optional[_Union[CreateToken, _Mapping]] = ..., revoke_token: _Optional[_Union[RevokeToken, _Mapping]] = ..., cancel_turn: _Optional[_Union[CancelTurn, _Mapping]] = ...) -> None: ...

class CompleteAttempt(_message.Message):
    __slots__ = ["model_output", "poll_result", "ref", "summary", "tool_result"]
    MODEL_OUTPUT_FIELD_NUMBER: _ClassVar[int]
    POLL_RESULT_FIELD_NUMBER: _ClassVar[int]
    REF_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_FIELD_NUMBER: _ClassVar[int]
    TOOL_RESULT_FIELD_NUMBER: _ClassVar[int]
    model_output: _types_pb2.ModelOutput
    poll_result: _types_pb2.PollResult
    ref: AttemptRef
    summary: str
    tool_result: _types_pb2.ToolResult
    def __init__(self, ref: _Optional[_Union[AttemptRef, _Mapping]] = ..., model_output: _Optional[_Union[_types_pb2.ModelOutput, _Mapping]] = ..., tool_result: _Optional[_Union[_types_pb2.ToolResult, _Mapping]] = ..., poll_result: _Optional[_Union[_types_pb2.PollResult, _Mapping]] = ..., summary: _Optional[str] = ...) -> None: ...

class CreateSession(_message.Message):
    __slots__ = ["agent", "compaction_threshold", "max_model_input", "message", "message_id", "parent_id", "session_id"]
    AGENT_FIELD_NUMBER: _ClassVar[int]
    COMPACTION_THRESHOLD_FIELD_NUMBER: _ClassVar[int]
    MAX_MODEL_INPUT_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    PARENT_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    agent: str
    compaction_threshold: int
    max_model_input: int
    message: str
    message_id: str
    parent_id: str
    session_id: str
    def __init__(self, session_id: _Optional[str] = ..., parent_id: _Optional[str] = ..., compaction_threshold: _Optional[int] = ..., message_id: _Optional[str] = ..., message: _Optional[str] = ..., max_model_input: _Optional[int] = ..., agent: _Optional[str] = ...) -> None: ...

class CreateToken(_message.Message):
    __slots__ = ["bootstrap", "token"]
    BOOTSTRAP_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    bootstrap: bool
    token: _types_pb2.AclToken
    def __init__(self, token: _Optional[_Union[_types_pb2.AclToken, _Mapping]] = ..., bootstrap: bool = ...) -> None: ...

class DeleteSession(_message.Message):
    __slots__ = ["session_id"]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    def __init__(self, session_id: _Optional[str] = ...) -> None: ...

class DeregisterWorker(_message.Message):
    __slots__ = ["epoch", "worker_id"]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    worker_id: str
    def __init__(self, worker_id: _Optional[str] = ..., epoch: _Optional[int] = ...) -> None: ...

class EditHistory(_message.Message):
    __slots__ = ["note", "session_id", "truncate_from_seq"]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    TRUNCATE_FROM_SEQ_FIELD_NUMBER: _ClassVar[int]
    note: str
    session_id: str
    truncate_from_seq: int
    def __init__(self, session_id: _Optional[str] = ..., truncate_from_seq: _Optional[int] = ..., note: _Optional[str] = ...) -> None: ...

class ExpireAttempt(_message.Message):
    __slots__ = ["attempt", "epoch", "step_id"]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    STEP_ID_FIELD_NUMBER: _ClassVar[int]
    attempt: int
    epoch: int
    step_id: str
    def __init__(self, step_id: _Optional[str] = ..., attempt: _Optional[int] = ..., epoch: _Optional[int] = ...) -> None: ...

class ExpireSessions(_message.Message):
    __slots__ = ["epoch", "idle_before_ms", "session_ids"]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    IDLE_BEFORE_MS_FIELD_NUMBER: _ClassVar[int]
    SESSION_IDS_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    idle_before_ms: int
    session_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, epoch: _Optional[int] = ..., idle_before_ms: _Optional[int] = ..., session_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class FailAttempt(_message.Message):
    __slots__ = ["error", "error_type", "ref"]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ERROR_TYPE_FIELD_NUMBER: _ClassVar[int]
    REF_FIELD_NUMBER: _ClassVar[int]
    error: str
    error_type: _types_pb2.ErrorType
    ref: AttemptRef
    def __init__(self, ref: _Optional[_Union[AttemptRef, _Mapping]] = ..., error_type: _Optional[_Union[_types_pb2.ErrorType, str]] = ..., error: _Optional[str] = ...) -> None: ...

class FailUnservedStep(_message.Message):
    __slots__ = ["epoch", "step_id", "waited_ms"]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    STEP_ID_FIELD_NUMBER: _ClassVar[int]
    WAITED_MS_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    step_id: str
    waited_ms: int
    def __init__(self, step_id: _Optional[str] = ..., epoch: _Optional[int] = ..., waited_ms: _Optional[int] = ...) -> None: ...

class FireTimer(_message.Message):
    __slots__ = ["epoch", "step_id"]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    STEP_ID_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    step_id: str
    def __init__(self, step_id: _Optional[str] = ..., epoch: _Optional[int] = ...) -> None: ...

class PruneEvents(_message.Message):
    __slots__ = ["epoch", "max_events", "session_ids"]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    MAX_EVENTS_FIELD_NUMBER: _ClassVar[int]
    SESSION_IDS_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    max_events: int
    session_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, epoch: _Optional[int] = ..., max_events: _Optional[int] = ..., session_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class PurgeSession(_message.Message):
    __slots__ = ["epoch", "max_rows", "session_id"]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    MAX_ROWS_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    max_rows: int
    session_id: str
    def __init__(self, session_id: _Optional[str] = ..., max_rows: _Optional[int] = ..., epoch: _Optional[int] = ...) -> None: ...

class ReconcileOutcome(_message.Message):
    __slots__ = ["note", "outcome", "step_id"]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    STEP_ID_FIELD_NUMBER: _ClassVar[int]
    note: str
    outcome: _types_pb2.Outcome
    step_id: str
    def __init__(self, step_id: _Optional[str] = ..., outcome: _Optional[_Union[_types_pb2.Outcome, str]] = ..., note: _Optional[str] = ...) -> None: ...

class RegisterWorker(_message.Message):
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

class RemoveNode(_message.Message):
    __slots__ = ["node_id"]
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    def __init__(self, node_id: _Optional[str] = ...) -> None: ...

class ReportAttempt(_message.Message):
    __slots__ = ["ref", "result"]
    REF_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    ref: AttemptRef
    result: _types_pb2.AttemptResult
    def __init__(self, ref: _Optional[_Union[AttemptRef, _Mapping]] = ..., result: _Optional[_Union[_types_pb2.AttemptResult, _Mapping]] = ...) -> None: ...

class ResolveApproval(_message.Message):
    __slots__ = ["approved", "reason", "step_id"]
    APPROVED_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    STEP_ID_FIELD_NUMBER: _ClassVar[int]
    approved: bool
    reason: str
    step_id: str
    def __init__(self, step_id: _Optional[str] = ..., approved: bool = ..., reason: _Optional[str] = ...) -> None: ...

class RestartSessions(_message.Message):
    __slots__ = ["epoch"]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    def __init__(self, epoch: _Optional[int] = ...) -> None: ...

class ResumeErrored(_message.Message):
    __slots__ = ["epoch", "session_id"]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    session_id: str
    def __init__(self, session_id: _Optional[str] = ..., epoch: _Optional[int] = ...) -> None: ...

class ResumeSession(_message.Message):
    __slots__ = ["choice", "session_id"]
    CHOICE_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    choice: _types_pb2.ResumeChoice
    session_id: str
    def __init__(self, session_id: _Optional[str] = ..., choice: _Optional[_Union[_types_pb2.ResumeChoice, str]] = ...) -> None: ...

class RevokeToken(_message.Message):
    __slots__ = ["token_id"]
    TOKEN_ID_FIELD_NUMBER: _ClassVar[int]
    token_id: str
    def __init__(self, token_id: _Optional[str] = ...) -> None: ...

class SendMessage(_message.Message):
    __slots__ = ["from_session", "message_id", "session_id", "text"]
    FROM_SESSION_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    from_session: str
    message_id: str
    session_id: str
    text: str
    def __init__(self, session_id: _Optional[str] = ..., message_id: _Optional[str] = ..., text: _Optional[str] = ..., from_session: _Optional[str] = ...) -> None: ...

class SetClusterId(_message.Message):
    __slots__ = ["cluster_id"]
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    cluster_id: str
    def __init__(self, cluster_id: _Optional[str] = ...) -> None: ...

class SetEventRetention(_message.Message):
    __slots__ = ["epoch", "retention"]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    RETENTION_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    retention: _types_pb2.EventRetention
    def __init__(self, epoch: _Optional[int] = ..., retention: _Optional[_Union[_types_pb2.EventRetention, _Mapping]] = ...) -> None: ...

class SetNode(_message.Message):
    __slots__ = ["node"]
    NODE_FIELD_NUMBER: _ClassVar[int]
    node: _types_pb2.NodeInfo
    def __init__(self, node: _Optional[_Union[_types_pb2.NodeInfo, _Mapping]] = ...) -> None: ...

class StartAttempt(_message.Message):
    __slots__ = ["attempt", "default_run_timeout_ms", "epoch", "step_id", "worker_id"]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    DEFAULT_RUN_TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    STEP_ID_FIELD_NUMBER: _ClassVar[int]
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    attempt: int
    default_run_timeout_ms: int
    epoch: int
    step_id: str
    worker_id: str
    def __init__(self, step_id: _Optional[str] = ..., attempt: _Optional[int] = ..., worker_id: _Optional[str] = ..., epoch: _Optional[int] = ..., default_run_timeout_ms: _Optional[int] = ...) -> None: ...

class TimeoutAttempt(_message.Message):
    __slots__ = ["attempt", "epoch", "step_id"]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    STEP_ID_FIELD_NUMBER: _ClassVar[int]
    attempt: int
    epoch: int
    step_id: str
    def __init__(self, step_id: _Optional[str] = ..., attempt: _Optional[int] = ..., epoch: _Optional[int] = ...) -> None: ...
