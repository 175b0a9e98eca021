from dex.v1 import types_pb2 as _types_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

BULK_ACTION_CANCEL: BulkAction
BULK_ACTION_CLOSE: BulkAction
BULK_ACTION_DELETE: BulkAction
BULK_ACTION_LABEL: BulkAction
BULK_ACTION_RESUME: BulkAction
BULK_ACTION_UNSPECIFIED: BulkAction
BULK_JOB_STATUS_CANCELLED: BulkJobStatus
BULK_JOB_STATUS_DONE: BulkJobStatus
BULK_JOB_STATUS_RUNNING: BulkJobStatus
BULK_JOB_STATUS_UNSPECIFIED: BulkJobStatus
DESCRIPTOR: _descriptor.FileDescriptor
SESSION_ORDER_CREATED: SessionOrder
SESSION_ORDER_UNSPECIFIED: SessionOrder
SESSION_ORDER_UPDATED: SessionOrder

class AnswerQuestionRequest(_message.Message):
    __slots__ = ["answer", "step_id"]
    ANSWER_FIELD_NUMBER: _ClassVar[int]
    STEP_ID_FIELD_NUMBER: _ClassVar[int]
    answer: str
    step_id: str
    def __init__(self, step_id: _Optional[str] = ..., answer: _Optional[str] = ...) -> None: ...

class AnswerQuestionResponse(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class BulkCursor(_message.Message):
    __slots__ = ["at_ms", "id"]
    AT_MS_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    at_ms: int
    id: str
    def __init__(self, at_ms: _Optional[int] = ..., id: _Optional[str] = ...) -> None: ...

class BulkFilter(_message.Message):
    __slots__ = ["agent", "created_from_ms", "created_to_ms", "forked_from", "labels", "parent_id", "status", "updated_from_ms", "updated_to_ms"]
    AGENT_FIELD_NUMBER: _ClassVar[int]
    CREATED_FROM_MS_FIELD_NUMBER: _ClassVar[int]
    CREATED_TO_MS_FIELD_NUMBER: _ClassVar[int]
    FORKED_FROM_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    PARENT_ID_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    UPDATED_FROM_MS_FIELD_NUMBER: _ClassVar[int]
    UPDATED_TO_MS_FIELD_NUMBER: _ClassVar[int]
    agent: str
    created_from_ms: int
    created_to_ms: int
    forked_from: str
    labels: _containers.RepeatedCompositeFieldContainer[_types_pb2.Label]
    parent_id: str
    status: _types_pb2.SessionStatus
    updated_from_ms: int
    updated_to_ms: int
    def __init__(self, status: _Optional[_Union[_types_pb2.SessionStatus, str]] = ..., agent: _Optional[str] = ..., parent_id: _Optional[str] = ..., forked_from: _Optional[str] = ..., labels: _Optional[_Iterable[_Union[_types_pb2.Label, _Mapping]]] = ..., created_from_ms: _Optional[int] = ..., created_to_ms: _Optional[int] = ..., updated_from_ms: _Optional[int] = ..., updated_to_ms: _Optional[int] = ...) -> None: ...

class BulkJob(_message.Message):
    __slots__ = ["acted", "action", "by", "cancelled_by", "created_at_ms", "cursor", "ended_at_ms", "failed", "filter", "id", "labels", "reason", "skipped", "status", "steps", "updated_at_ms"]
    ACTED_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    BY_FIELD_NUMBER: _ClassVar[int]
    CANCELLED_BY_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    CURSOR_FIELD_NUMBER: _ClassVar[int]
    ENDED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    FAILED_FIELD_NUMBER: _ClassVar[int]
    FILTER_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    SKIPPED_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    STEPS_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    acted: int
    action: BulkAction
    by: str
    cancelled_by: str
    created_at_ms: int
    cursor: BulkCursor
    ended_at_ms: int
    failed: int
    filter: BulkFilter
    id: str
    labels: _containers.RepeatedCompositeFieldContainer[_types_pb2.Label]
    reason: str
    skipped: _containers.RepeatedCompositeFieldContainer[BulkSkip]
    status: BulkJobStatus
    steps: int
    updated_at_ms: int
    def __init__(self, id: _Optional[str] = ..., action: _Optional[_Union[BulkAction, str]] = ..., filter: _Optional[_Union[BulkFilter, _Mapping]] = ..., labels: _Optional[_Iterable[_Union[_types_pb2.Label, _Mapping]]] = ..., reason: _Optional[str] = ..., by: _Optional[str] = ..., status: _Optional[_Union[BulkJobStatus, str]] = ..., created_at_ms: _Optional[int] = ..., updated_at_ms: _Optional[int] = ..., ended_at_ms: _Optional[int] = ..., cursor: _Optional[_Union[BulkCursor, _Mapping]] = ..., acted: _Optional[int] = ..., skipped: _Optional[_Iterable[_Union[BulkSkip, _Mapping]]] = ..., failed: _Optional[int] = ..., steps: _Optional[int] = ..., cancelled_by: _Optional[str] = ...) -> None: ...

class BulkSkip(_message.Message):
    __slots__ = ["count", "reason"]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    count: int
    reason: str
    def __init__(self, reason: _Optional[str] = ..., count: _Optional[int] = ...) -> None: ...

class CancelBulkJobRequest(_message.Message):
    __slots__ = ["job_id"]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    def __init__(self, job_id: _Optional[str] = ...) -> None: ...

class CancelBulkJobResponse(_message.Message):
    __slots__ = ["job"]
    JOB_FIELD_NUMBER: _ClassVar[int]
    job: BulkJob
    def __init__(self, job: _Optional[_Union[BulkJob, _Mapping]] = ...) -> None: ...

class CancelSessionRequest(_message.Message):
    __slots__ = ["by", "reason", "session_id"]
    BY_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    by: str
    reason: str
    session_id: str
    def __init__(self, session_id: _Optional[str] = ..., by: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class CancelSessionResponse(_message.Message):
    __slots__ = ["attempts_cancelled", "steps_cancelled"]
    ATTEMPTS_CANCELLED_FIELD_NUMBER: _ClassVar[int]
    STEPS_CANCELLED_FIELD_NUMBER: _ClassVar[int]
    attempts_cancelled: int
    steps_cancelled: int
    def __init__(self, steps_cancelled: _Optional[int] = ..., attempts_cancelled: _Optional[int] = ...) -> None: ...

class CloseSessionRequest(_message.Message):
    __slots__ = ["session_id"]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    def __init__(self, session_id: _Optional[str] = ...) -> None: ...

class CloseSessionResponse(_message.Message):
    __slots__ = ["session"]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    session: _types_pb2.Session
    def __init__(self, session: _Optional[_Union[_types_pb2.Session, _Mapping]] = ...) -> None: ...

class CreateSessionRequest(_message.Message):
    __slots__ = ["agent", "budget", "compaction_threshold", "fairness_key", "fairness_weight", "idempotency_key", "labels", "message", "parent_id", "priority", "retention_ms", "session_id"]
    AGENT_FIELD_NUMBER: _ClassVar[int]
    BUDGET_FIELD_NUMBER: _ClassVar[int]
    COMPACTION_THRESHOLD_FIELD_NUMBER: _ClassVar[int]
    FAIRNESS_KEY_FIELD_NUMBER: _ClassVar[int]
    FAIRNESS_WEIGHT_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    PARENT_ID_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    RETENTION_MS_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    agent: str
    budget: _types_pb2.Budget
    compaction_threshold: int
    fairness_key: str
    fairness_weight: int
    idempotency_key: str
    labels: _containers.RepeatedCompositeFieldContainer[_types_pb2.Label]
    message: str
    parent_id: str
    priority: int
    retention_ms: int
    session_id: str
    def __init__(self, session_id: _Optional[str] = ..., parent_id: _Optional[str] = ..., compaction_threshold: _Optional[int] = ..., message: _Optional[str] = ..., idempotency_key: _Optional[str] = ..., agent: _Optional[str] = ..., retention_ms: _Optional[int] = ..., budget: _Optional[_Union[_types_pb2.Budget, _Mapping]] = ..., priority: _Optional[int] = ..., fairness_key: _Optional[str] = ..., fairness_weight: _Optional[int] = ..., labels: _Optional[_Iterable[_Union[_types_pb2.Label, _Mapping]]] = ...) -> None: ...

class CreateSessionResponse(_message.Message):
    __slots__ = ["session"]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    session: _types_pb2.Session
    def __init__(self, session: _Optional[_Union[_types_pb2.Session, _Mapping]] = ...) -> None: ...

class DeleteSessionRequest(_message.Message):
    __slots__ = ["session_id"]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    def __init__(self, session_id: _Optional[str] = ...) -> None: ...

class DeleteSessionResponse(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class EditHistoryRequest(_message.Message):
    __slots__ = ["note", "session_id", "truncate_from_seq"]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    TRUNCATE_FROM_SEQ_FIELD_NUMBER: _ClassVar[int]
    note: str
    session_id: str
    truncate_from_seq: int
    def __init__(self, session_id: _Optional[str] = ..., truncate_from_seq: _Optional[int] = ..., note: _Optional[str] = ...) -> None: ...

class EditHistoryResponse(_message.Message):
    __slots__ = ["history_count", "history_size"]
    HISTORY_COUNT_FIELD_NUMBER: _ClassVar[int]
    HISTORY_SIZE_FIELD_NUMBER: _ClassVar[int]
    history_count: int
    history_size: int
    def __init__(self, history_count: _Optional[int] = ..., history_size: _Optional[int] = ...) -> None: ...

class EventsNotKept(_message.Message):
    __slots__ = ["after_seq", "first_kept_seq", "resume_after_seq", "session_id"]
    AFTER_SEQ_FIELD_NUMBER: _ClassVar[int]
    FIRST_KEPT_SEQ_FIELD_NUMBER: _ClassVar[int]
    RESUME_AFTER_SEQ_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    after_seq: int
    first_kept_seq: int
    resume_after_seq: int
    session_id: str
    def __init__(self, session_id: _Optional[str] = ..., after_seq: _Optional[int] = ..., resume_after_seq: _Optional[int] = ..., first_kept_seq: _Optional[int] = ...) -> None: ...

class ForkSessionRequest(_message.Message):
    __slots__ = ["agent", "at_seq", "labels", "message", "session_id", "source_session_id"]
    AGENT_FIELD_NUMBER: _ClassVar[int]
    AT_SEQ_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    SOURCE_SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    agent: str
    at_seq: int
    labels: _containers.RepeatedCompositeFieldContainer[_types_pb2.Label]
    message: str
    session_id: str
    source_session_id: str
    def __init__(self, source_session_id: _Optional[str] = ..., at_seq: _Optional[int] = ..., message: _Optional[str] = ..., labels: _Optional[_Iterable[_Union[_types_pb2.Label, _Mapping]]] = ..., agent: _Optional[str] = ..., session_id: _Optional[str] = ...) -> None: ...

class ForkSessionResponse(_message.Message):
    __slots__ = ["session"]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    session: _types_pb2.Session
    def __init__(self, session: _Optional[_Union[_types_pb2.Session, _Mapping]] = ...) -> None: ...

class GetBulkJobRequest(_message.Message):
    __slots__ = ["job_id"]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    def __init__(self, job_id: _Optional[str] = ...) -> None: ...

class GetBulkJobResponse(_message.Message):
    __slots__ = ["job"]
    JOB_FIELD_NUMBER: _ClassVar[int]
    job: BulkJob
    def __init__(self, job: _Optional[_Union[BulkJob, _Mapping]] = ...) -> None: ...

class GetSessionRequest(_message.Message):
    __slots__ = ["folded_after_turn", "history_after_seq", "history_limit", "session_id", "steps_after", "steps_limit"]
    FOLDED_AFTER_TURN_FIELD_NUMBER: _ClassVar[int]
    HISTORY_AFTER_SEQ_FIELD_NUMBER: _ClassVar[int]
    HISTORY_LIMIT_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    STEPS_AFTER_FIELD_NUMBER: _ClassVar[int]
    STEPS_LIMIT_FIELD_NUMBER: _ClassVar[int]
    folded_after_turn: int
    history_after_seq: int
    history_limit: int
    session_id: str
    steps_after: int
    steps_limit: int
    def __init__(self, session_id: _Optional[str] = ..., history_after_seq: _Optional[int] = ..., history_limit: _Optional[int] = ..., steps_after: _Optional[int] = ..., steps_limit: _Optional[int] = ..., folded_after_turn: _Optional[int] = ...) -> None: ...

class GetSessionResponse(_message.Message):
    __slots__ = ["folded_turns", "last_event_seq", "next_folded_after_turn", "next_history_after_seq", "next_steps_after", "session", "steps"]
    FOLDED_TURNS_FIELD_NUMBER: _ClassVar[int]
    LAST_EVENT_SEQ_FIELD_NUMBER: _ClassVar[int]
    NEXT_FOLDED_AFTER_TURN_FIELD_NUMBER: _ClassVar[int]
    NEXT_HISTORY_AFTER_SEQ_FIELD_NUMBER: _ClassVar[int]
    NEXT_STEPS_AFTER_FIELD_NUMBER: _ClassVar[int]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    STEPS_FIELD_NUMBER: _ClassVar[int]
    folded_turns: _containers.RepeatedCompositeFieldContainer[_types_pb2.FoldedTurn]
    last_event_seq: int
    next_folded_after_turn: int
    next_history_after_seq: int
    next_steps_after: int
    session: _types_pb2.Session
    steps: _containers.RepeatedCompositeFieldContainer[_types_pb2.Step]
    def __init__(self, session: _Optional[_Union[_types_pb2.Session, _Mapping]] = ..., steps: _Optional[_Iterable[_Union[_types_pb2.Step, _Mapping]]] = ..., next_history_after_seq: _Optional[int] = ..., next_steps_after: _Optional[int] = ..., last_event_seq: _Optional[int] = ..., folded_turns: _Optional[_Iterable[_Union[_types_pb2.FoldedTurn, _Mapping]]] = ..., next_folded_after_turn: _Optional[int] = ...) -> None: ...

class ImportSessionRequest(_message.Message):
    __slots__ = ["chunk"]
    CHUNK_FIELD_NUMBER: _ClassVar[int]
    chunk: bytes
    def __init__(self, chunk: _Optional[bytes] = ...) -> None: ...

class ImportSessionResponse(_message.Message):
    __slots__ = ["events", "folded_turns", "history", "session_id", "steps"]
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    FOLDED_TURNS_FIELD_NUMBER: _ClassVar[int]
    HISTORY_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    STEPS_FIELD_NUMBER: _ClassVar[int]
    events: int
    folded_turns: int
    history: int
    session_id: str
    steps: int
    def __init__(self, session_id: _Optional[str] = ..., history: _Optional[int] = ..., steps: _Optional[int] = ..., events: _Optional[int] = ..., folded_turns: _Optional[int] = ...) -> None: ...

class ListBulkJobsRequest(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class ListBulkJobsResponse(_message.Message):
    __slots__ = ["jobs"]
    JOBS_FIELD_NUMBER: _ClassVar[int]
    jobs: _containers.RepeatedCompositeFieldContainer[BulkJob]
    def __init__(self, jobs: _Optional[_Iterable[_Union[BulkJob, _Mapping]]] = ...) -> None: ...

class ListSessionsRequest(_message.Message):
    __slots__ = ["agent", "created_after_ms", "created_before_ms", "descending", "forked_from", "labels", "order_by", "page_size", "page_token", "parent_id", "status", "updated_after_ms", "updated_before_ms"]
    AGENT_FIELD_NUMBER: _ClassVar[int]
    CREATED_AFTER_MS_FIELD_NUMBER: _ClassVar[int]
    CREATED_BEFORE_MS_FIELD_NUMBER: _ClassVar[int]
    DESCENDING_FIELD_NUMBER: _ClassVar[int]
    FORKED_FROM_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    ORDER_BY_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    PARENT_ID_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AFTER_MS_FIELD_NUMBER: _ClassVar[int]
    UPDATED_BEFORE_MS_FIELD_NUMBER: _ClassVar[int]
    agent: str
    created_after_ms: int
    created_before_ms: int
    descending: bool
    forked_from: str
    labels: _containers.RepeatedCompositeFieldContainer[_types_pb2.Label]
    order_by: SessionOrder
    page_size: int
    page_token: str
    parent_id: str
    status: _types_pb2.SessionStatus
    updated_after_ms: int
    updated_before_ms: int
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., status: _Optional[_Union[_types_pb2.SessionStatus, str]] = ..., agent: _Optional[str] = ..., labels: _Optional[_Iterable[_Union[_types_pb2.Label, _Mapping]]] = ..., parent_id: _Optional[str] = ..., created_after_ms: _Optional[int] = ..., created_before_ms: _Optional[int] = ..., updated_after_ms: _Optional[int] = ..., updated_before_ms: _Optional[int] = ..., order_by: _Optional[_Union[SessionOrder, str]] = ..., descending: bool = ..., forked_from: _Optional[str] = ...) -> None: ...

class ListSessionsResponse(_message.Message):
    __slots__ = ["next_page_token", "sessions"]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    SESSIONS_FIELD_NUMBER: _ClassVar[int]
    next_page_token: str
    sessions: _containers.RepeatedCompositeFieldContainer[SessionSummary]
    def __init__(self, sessions: _Optional[_Iterable[_Union[SessionSummary, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class OutputOffset(_message.Message):
    __slots__ = ["attempt", "offset", "step_id"]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    STEP_ID_FIELD_NUMBER: _ClassVar[int]
    attempt: int
    offset: int
    step_id: str
    def __init__(self, step_id: _Optional[str] = ..., attempt: _Optional[int] = ..., offset: _Optional[int] = ...) -> None: ...

class ReconcileOutcomeRequest(_message.Message):
    __slots__ = ["note", "outcome", "step_id"]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    STEP_ID_FIELD_NUMBER: _ClassVar[int]
    note: str
    outcome: _types_pb2.Outcome
    step_id: str
    def __init__(self, step_id: _Optional[str] = ..., outcome: _Optional[_Union[_types_pb2.Outcome, str]] = ..., note: _Optional[str] = ...) -> None: ...

class ReconcileOutcomeResponse(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class ResolveApprovalRequest(_message.Message):
    __slots__ = ["approved", "reason", "step_id"]
    APPROVED_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    STEP_ID_FIELD_NUMBER: _ClassVar[int]
    approved: bool
    reason: str
    step_id: str
    def __init__(self, step_id: _Optional[str] = ..., approved: bool = ..., reason: _Optional[str] = ...) -> None: ...

class ResolveApprovalResponse(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class ResumeSessionRequest(_message.Message):
    __slots__ = ["choice", "session_id"]
    CHOICE_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    choice: _types_pb2.ResumeChoice
    session_id: str
    def __init__(self, session_id: _Optional[str] = ..., choice: _Optional[_Union[_types_pb2.ResumeChoice, str]] = ...) -> None: ...

class ResumeSessionResponse(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class SendMessageRequest(_message.Message):
    __slots__ = ["idempotency_key", "session_id", "text"]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    idempotency_key: str
    session_id: str
    text: str
    def __init__(self, session_id: _Optional[str] = ..., text: _Optional[str] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class SendMessageResponse(_message.Message):
    __slots__ = ["duplicate"]
    DUPLICATE_FIELD_NUMBER: _ClassVar[int]
    duplicate: bool
    def __init__(self, duplicate: bool = ...) -> None: ...

class SessionSummary(_message.Message):
    __slots__ = ["agent", "created_at_ms", "first_message", "forked_at_seq", "forked_from", "id", "labels", "parent_id", "pause_reason", "resume_at_ms", "status", "turns_completed", "updated_at_ms"]
    AGENT_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    FIRST_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    FORKED_AT_SEQ_FIELD_NUMBER: _ClassVar[int]
    FORKED_FROM_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    PARENT_ID_FIELD_NUMBER: _ClassVar[int]
    PAUSE_REASON_FIELD_NUMBER: _ClassVar[int]
    RESUME_AT_MS_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    TURNS_COMPLETED_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    agent: str
    created_at_ms: int
    first_message: str
    forked_at_seq: int
    forked_from: str
    id: str
    labels: _containers.RepeatedCompositeFieldContainer[_types_pb2.Label]
    parent_id: str
    pause_reason: _types_pb2.PauseReason
    resume_at_ms: int
    status: _types_pb2.SessionStatus
    turns_completed: int
    updated_at_ms: int
    def __init__(self, id: _Optional[str] = ..., parent_id: _Optional[str] = ..., status: _Optional[_Union[_types_pb2.SessionStatus, str]] = ..., turns_completed: _Optional[int] = ..., updated_at_ms: _Optional[int] = ..., created_at_ms: _Optional[int] = ..., agent: _Optional[str] = ..., labels: _Optional[_Iterable[_Union[_types_pb2.Label, _Mapping]]] = ..., forked_from: _Optional[str] = ..., forked_at_seq: _Optional[int] = ..., first_message: _Optional[str] = ..., pause_reason: _Optional[_Union[_types_pb2.PauseReason, str]] = ..., resume_at_ms: _Optional[int] = ...) -> None: ...

class SetBudgetRequest(_message.Message):
    __slots__ = ["change", "session_id"]
    CHANGE_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    change: _types_pb2.BudgetChange
    session_id: str
    def __init__(self, session_id: _Optional[str] = ..., change: _Optional[_Union[_types_pb2.BudgetChange, _Mapping]] = ...) -> None: ...

class SetBudgetResponse(_message.Message):
    __slots__ = ["session"]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    session: _types_pb2.Session
    def __init__(self, session: _Optional[_Union[_types_pb2.Session, _Mapping]] = ...) -> None: ...

class SetLabelsRequest(_message.Message):
    __slots__ = ["remove", "session_id", "set"]
    REMOVE_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    SET_FIELD_NUMBER: _ClassVar[int]
    remove: _containers.RepeatedScalarFieldContainer[str]
    session_id: str
    set: _containers.RepeatedCompositeFieldContainer[_types_pb2.Label]
    def __init__(self, session_id: _Optional[str] = ..., set: _Optional[_Iterable[_Union[_types_pb2.Label, _Mapping]]] = ..., remove: _Optional[_Iterable[str]] = ...) -> None: ...

class SetLabelsResponse(_message.Message):
    __slots__ = ["session"]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    session: _types_pb2.Session
    def __init__(self, session: _Optional[_Union[_types_pb2.Session, _Mapping]] = ...) -> None: ...

class StartBulkActionRequest(_message.Message):
    __slots__ = ["action", "all", "filter", "job_id", "labels", "reason"]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    ALL_FIELD_NUMBER: _ClassVar[int]
    FILTER_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    action: BulkAction
    all: bool
    filter: BulkFilter
    job_id: str
    labels: _containers.RepeatedCompositeFieldContainer[_types_pb2.Label]
    reason: str
    def __init__(self, action: _Optional[_Union[BulkAction, str]] = ..., filter: _Optional[_Union[BulkFilter, _Mapping]] = ..., labels: _Optional[_Iterable[_Union[_types_pb2.Label, _Mapping]]] = ..., reason: _Optional[str] = ..., all: bool = ..., job_id: _Optional[str] = ...) -> None: ...

class StartBulkActionResponse(_message.Message):
    __slots__ = ["job"]
    JOB_FIELD_NUMBER: _ClassVar[int]
    job: BulkJob
    def __init__(self, job: _Optional[_Union[BulkJob, _Mapping]] = ...) -> None: ...

class WatchSessionRequest(_message.Message):
    __slots__ = ["after_seq", "live_output", "output_offsets", "session_id"]
    AFTER_SEQ_FIELD_NUMBER: _ClassVar[int]
    LIVE_OUTPUT_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_OFFSETS_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    after_seq: int
    live_output: bool
    output_offsets: _containers.RepeatedCompositeFieldContainer[OutputOffset]
    session_id: str
    def __init__(self, session_id: _Optional[str] = ..., after_seq: _Optional[int] = ..., live_output: bool = ..., output_offsets: _Optional[_Iterable[_Union[OutputOffset, _Mapping]]] = ...) -> None: ...

class SessionOrder(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class BulkAction(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class BulkJobStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []
