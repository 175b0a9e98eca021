from dex.v1 import types_pb2 as _types_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class BootstrapACLRequest(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class BootstrapACLResponse(_message.Message):
    __slots__ = ["secret", "token"]
    SECRET_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    secret: str
    token: _types_pb2.AclToken
    def __init__(self, token: _Optional[_Union[_types_pb2.AclToken, _Mapping]] = ..., secret: _Optional[str] = ...) -> None: ...

class CreateTokenRequest(_message.Message):
    __slots__ = ["name", "role", "worker_id"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    name: str
    role: _types_pb2.TokenRole
    worker_id: str
    def __init__(self, name: _Optional[str] = ..., role: _Optional[_Union[_types_pb2.TokenRole, str]] = ..., worker_id: _Optional[str] = ...) -> None: ...

class CreateTokenResponse(_message.Message):
    __slots__ = ["secret", "token"]
    SECRET_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    secret: str
    token: _types_pb2.AclToken
    def __init__(self, token: _Optional[_Union[_types_pb2.AclToken, _Mapping]] = ..., secret: _Optional[str] = ...) -> None: ...

class JoinRequest(_message.Message):
    __slots__ = ["cluster_id", "node"]
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    NODE_FIELD_NUMBER: _ClassVar[int]
    cluster_id: str
    node: _types_pb2.NodeInfo
    def __init__(self, node: _Optional[_Union[_types_pb2.NodeInfo, _Mapping]] = ..., cluster_id: _Optional[str] = ...) -> None: ...

class JoinResponse(_message.Message):
    __slots__ = ["cluster_id"]
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    cluster_id: str
    def __init__(self, cluster_id: _Optional[str] = ...) -> None: ...

class ListTokensRequest(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class ListTokensResponse(_message.Message):
    __slots__ = ["tokens"]
    TOKENS_FIELD_NUMBER: _ClassVar[int]
    tokens: _containers.RepeatedCompositeFieldContainer[_types_pb2.AclToken]
    def __init__(self, tokens: _Optional[_Iterable[_Union[_types_pb2.AclToken, _Mapping]]] = ...) -> None: ...

class ListWorkersRequest(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class ListWorkersResponse(_message.Message):
    __slots__ = ["answered_by", "leader", "tools", "workers"]
    ANSWERED_BY_FIELD_NUMBER: _ClassVar[int]
    LEADER_FIELD_NUMBER: _ClassVar[int]
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    WORKERS_FIELD_NUMBER: _ClassVar[int]
    answered_by: str
    leader: bool
    tools: _containers.RepeatedCompositeFieldContainer[ToolQueue]
    workers: _containers.RepeatedCompositeFieldContainer[WorkerStatus]
    def __init__(self, workers: _Optional[_Iterable[_Union[WorkerStatus, _Mapping]]] = ..., tools: _Optional[_Iterable[_Union[ToolQueue, _Mapping]]] = ..., answered_by: _Optional[str] = ..., leader: bool = ...) -> None: ...

class NodeStateRequest(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class NodeStateResponse(_message.Message):
    __slots__ = ["applied_index", "cluster_id", "commit_index", "id", "leader_id", "providers", "ready", "ready_reason", "state", "term", "workers"]
    APPLIED_INDEX_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    COMMIT_INDEX_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    PROVIDERS_FIELD_NUMBER: _ClassVar[int]
    READY_FIELD_NUMBER: _ClassVar[int]
    READY_REASON_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    TERM_FIELD_NUMBER: _ClassVar[int]
    WORKERS_FIELD_NUMBER: _ClassVar[int]
    applied_index: int
    cluster_id: str
    commit_index: int
    id: str
    leader_id: str
    providers: _containers.RepeatedCompositeFieldContainer[ProviderStatus]
    ready: bool
    ready_reason: str
    state: str
    term: int
    workers: _containers.RepeatedCompositeFieldContainer[WorkerHealth]
    def __init__(self, id: _Optional[str] = ..., state: _Optional[str] = ..., term: _Optional[int] = ..., commit_index: _Optional[int] = ..., applied_index: _Optional[int] = ..., leader_id: _Optional[str] = ..., workers: _Optional[_Iterable[_Union[WorkerHealth, _Mapping]]] = ..., cluster_id: _Optional[str] = ..., ready: bool = ..., ready_reason: _Optional[str] = ..., providers: _Optional[_Iterable[_Union[ProviderStatus, _Mapping]]] = ...) -> None: ...

class NodeStatus(_message.Message):
    __slots__ = ["applied_index", "commit_index", "grpc_address", "id", "raft_address", "ready", "ready_reason", "state", "suffrage", "term"]
    APPLIED_INDEX_FIELD_NUMBER: _ClassVar[int]
    COMMIT_INDEX_FIELD_NUMBER: _ClassVar[int]
    GRPC_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    RAFT_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    READY_FIELD_NUMBER: _ClassVar[int]
    READY_REASON_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    SUFFRAGE_FIELD_NUMBER: _ClassVar[int]
    TERM_FIELD_NUMBER: _ClassVar[int]
    applied_index: int
    commit_index: int
    grpc_address: str
    id: str
    raft_address: str
    ready: bool
    ready_reason: str
    state: str
    suffrage: str
    term: int
    def __init__(self, id: _Optional[str] = ..., raft_address: _Optional[str] = ..., grpc_address: _Optional[str] = ..., suffrage: _Optional[str] = ..., state: _Optional[str] = ..., term: _Optional[int] = ..., commit_index: _Optional[int] = ..., applied_index: _Optional[int] = ..., ready: bool = ..., ready_reason: _Optional[str] = ...) -> None: ...

class PartitionStatus(_message.Message):
    __slots__ = ["applied_index", "commit_index", "epoch", "id", "leader", "leader_grpc_address", "nonvoters", "state", "term", "voters"]
    APPLIED_INDEX_FIELD_NUMBER: _ClassVar[int]
    COMMIT_INDEX_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    LEADER_FIELD_NUMBER: _ClassVar[int]
    LEADER_GRPC_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    NONVOTERS_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    TERM_FIELD_NUMBER: _ClassVar[int]
    VOTERS_FIELD_NUMBER: _ClassVar[int]
    applied_index: int
    commit_index: int
    epoch: int
    id: int
    leader: str
    leader_grpc_address: str
    nonvoters: _containers.RepeatedScalarFieldContainer[str]
    state: str
    term: int
    voters: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, id: _Optional[int] = ..., leader: _Optional[str] = ..., leader_grpc_address: _Optional[str] = ..., term: _Optional[int] = ..., commit_index: _Optional[int] = ..., applied_index: _Optional[int] = ..., epoch: _Optional[int] = ..., state: _Optional[str] = ..., voters: _Optional[_Iterable[str]] = ..., nonvoters: _Optional[_Iterable[str]] = ...) -> None: ...

class ProviderStatus(_message.Message):
    __slots__ = ["calls_per_minute", "hold", "max_concurrent", "provider", "running", "throttled", "tokens_per_minute"]
    CALLS_PER_MINUTE_FIELD_NUMBER: _ClassVar[int]
    HOLD_FIELD_NUMBER: _ClassVar[int]
    MAX_CONCURRENT_FIELD_NUMBER: _ClassVar[int]
    PROVIDER_FIELD_NUMBER: _ClassVar[int]
    RUNNING_FIELD_NUMBER: _ClassVar[int]
    THROTTLED_FIELD_NUMBER: _ClassVar[int]
    TOKENS_PER_MINUTE_FIELD_NUMBER: _ClassVar[int]
    calls_per_minute: int
    hold: _types_pb2.ProviderHold
    max_concurrent: int
    provider: str
    running: int
    throttled: int
    tokens_per_minute: int
    def __init__(self, provider: _Optional[str] = ..., max_concurrent: _Optional[int] = ..., calls_per_minute: _Optional[int] = ..., tokens_per_minute: _Optional[int] = ..., running: _Optional[int] = ..., hold: _Optional[_Union[_types_pb2.ProviderHold, _Mapping]] = ..., throttled: _Optional[int] = ...) -> None: ...

class RegisterNodeRequest(_message.Message):
    __slots__ = ["node"]
    NODE_FIELD_NUMBER: _ClassVar[int]
    node: _types_pb2.NodeInfo
    def __init__(self, node: _Optional[_Union[_types_pb2.NodeInfo, _Mapping]] = ...) -> None: ...

class RegisterNodeResponse(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class RemoveNodeRequest(_message.Message):
    __slots__ = ["force", "node_id"]
    FORCE_FIELD_NUMBER: _ClassVar[int]
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    force: bool
    node_id: str
    def __init__(self, node_id: _Optional[str] = ..., force: bool = ...) -> None: ...

class RemoveNodeResponse(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class RestoreSnapshotRequest(_message.Message):
    __slots__ = ["allow_other_cluster", "data", "replace_sessions"]
    ALLOW_OTHER_CLUSTER_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    REPLACE_SESSIONS_FIELD_NUMBER: _ClassVar[int]
    allow_other_cluster: bool
    data: bytes
    replace_sessions: bool
    def __init__(self, data: _Optional[bytes] = ..., replace_sessions: bool = ..., allow_other_cluster: bool = ...) -> None: ...

class RestoreSnapshotResponse(_message.Message):
    __slots__ = ["backup_cluster_id", "backup_index", "backup_term", "epoch", "sessions"]
    BACKUP_CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    BACKUP_INDEX_FIELD_NUMBER: _ClassVar[int]
    BACKUP_TERM_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    SESSIONS_FIELD_NUMBER: _ClassVar[int]
    backup_cluster_id: str
    backup_index: int
    backup_term: int
    epoch: int
    sessions: int
    def __init__(self, backup_index: _Optional[int] = ..., backup_term: _Optional[int] = ..., backup_cluster_id: _Optional[str] = ..., sessions: _Optional[int] = ..., epoch: _Optional[int] = ...) -> None: ...

class RevokeTokenRequest(_message.Message):
    __slots__ = ["token_id"]
    TOKEN_ID_FIELD_NUMBER: _ClassVar[int]
    token_id: str
    def __init__(self, token_id: _Optional[str] = ...) -> None: ...

class RevokeTokenResponse(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class SaveSnapshotRequest(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class SnapshotChunk(_message.Message):
    __slots__ = ["data"]
    DATA_FIELD_NUMBER: _ClassVar[int]
    data: bytes
    def __init__(self, data: _Optional[bytes] = ...) -> None: ...

class StateSize(_message.Message):
    __slots__ = ["applied_index", "last_snapshot_bytes", "last_snapshot_index", "tables", "total_bytes", "total_rows"]
    APPLIED_INDEX_FIELD_NUMBER: _ClassVar[int]
    LAST_SNAPSHOT_BYTES_FIELD_NUMBER: _ClassVar[int]
    LAST_SNAPSHOT_INDEX_FIELD_NUMBER: _ClassVar[int]
    TABLES_FIELD_NUMBER: _ClassVar[int]
    TOTAL_BYTES_FIELD_NUMBER: _ClassVar[int]
    TOTAL_ROWS_FIELD_NUMBER: _ClassVar[int]
    applied_index: int
    last_snapshot_bytes: int
    last_snapshot_index: int
    tables: _containers.RepeatedCompositeFieldContainer[TableSize]
    total_bytes: int
    total_rows: int
    def __init__(self, tables: _Optional[_Iterable[_Union[TableSize, _Mapping]]] = ..., total_rows: _Optional[int] = ..., total_bytes: _Optional[int] = ..., applied_index: _Optional[int] = ..., last_snapshot_bytes: _Optional[int] = ..., last_snapshot_index: _Optional[int] = ...) -> None: ...

class StatusRequest(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class StatusResponse(_message.Message):
    __slots__ = ["answered_by", "applied_index", "commit_index", "epoch", "leader", "nodes", "partitions", "providers", "state_size", "term", "workers"]
    ANSWERED_BY_FIELD_NUMBER: _ClassVar[int]
    APPLIED_INDEX_FIELD_NUMBER: _ClassVar[int]
    COMMIT_INDEX_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    LEADER_FIELD_NUMBER: _ClassVar[int]
    NODES_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    PROVIDERS_FIELD_NUMBER: _ClassVar[int]
    STATE_SIZE_FIELD_NUMBER: _ClassVar[int]
    TERM_FIELD_NUMBER: _ClassVar[int]
    WORKERS_FIELD_NUMBER: _ClassVar[int]
    answered_by: str
    applied_index: int
    commit_index: int
    epoch: int
    leader: str
    nodes: _containers.RepeatedCompositeFieldContainer[NodeStatus]
    partitions: _containers.RepeatedCompositeFieldContainer[PartitionStatus]
    providers: _containers.RepeatedCompositeFieldContainer[ProviderStatus]
    state_size: StateSize
    term: int
    workers: _containers.RepeatedCompositeFieldContainer[WorkerHealth]
    def __init__(self, leader: _Optional[str] = ..., term: _Optional[int] = ..., commit_index: _Optional[int] = ..., applied_index: _Optional[int] = ..., nodes: _Optional[_Iterable[_Union[NodeStatus, _Mapping]]] = ..., answered_by: _Optional[str] = ..., epoch: _Optional[int] = ..., workers: _Optional[_Iterable[_Union[WorkerHealth, _Mapping]]] = ..., state_size: _Optional[_Union[StateSize, _Mapping]] = ..., partitions: _Optional[_Iterable[_Union[PartitionStatus, _Mapping]]] = ..., providers: _Optional[_Iterable[_Union[ProviderStatus, _Mapping]]] = ...) -> None: ...

class TableSize(_message.Message):
    __slots__ = ["bytes", "rows", "table"]
    BYTES_FIELD_NUMBER: _ClassVar[int]
    ROWS_FIELD_NUMBER: _ClassVar[int]
    TABLE_FIELD_NUMBER: _ClassVar[int]
    bytes: int
    rows: int
    table: str
    def __init__(self, table: _Optional[str] = ..., rows: _Optional[int] = ..., bytes: _Optional[int] = ...) -> None: ...

class ToolQueue(_message.Message):
    __slots__ = ["queued", "running", "tool", "waiting", "workers"]
    QUEUED_FIELD_NUMBER: _ClassVar[int]
    RUNNING_FIELD_NUMBER: _ClassVar[int]
    TOOL_FIELD_NUMBER: _ClassVar[int]
    WAITING_FIELD_NUMBER: _ClassVar[int]
    WORKERS_FIELD_NUMBER: _ClassVar[int]
    queued: int
    running: int
    tool: str
    waiting: int
    workers: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, tool: _Optional[str] = ..., queued: _Optional[int] = ..., running: _Optional[int] = ..., waiting: _Optional[int] = ..., workers: _Optional[_Iterable[str]] = ...) -> None: ...

class TransferLeadershipRequest(_message.Message):
    __slots__ = ["node_id"]
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    def __init__(self, node_id: _Optional[str] = ...) -> None: ...

class TransferLeadershipResponse(_message.Message):
    __slots__ = ["new_leader"]
    NEW_LEADER_FIELD_NUMBER: _ClassVar[int]
    new_leader: str
    def __init__(self, new_leader: _Optional[str] = ...) -> None: ...

class WorkerHealth(_message.Message):
    __slots__ = ["unclaimed_expiries", "unclaimed_in_a_row", "unhealthy", "worker_id"]
    UNCLAIMED_EXPIRIES_FIELD_NUMBER: _ClassVar[int]
    UNCLAIMED_IN_A_ROW_FIELD_NUMBER: _ClassVar[int]
    UNHEALTHY_FIELD_NUMBER: _ClassVar[int]
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    unclaimed_expiries: int
    unclaimed_in_a_row: int
    unhealthy: bool
    worker_id: str
    def __init__(self, worker_id: _Optional[str] = ..., unhealthy: bool = ..., unclaimed_in_a_row: _Optional[int] = ..., unclaimed_expiries: _Optional[int] = ...) -> None: ...

class WorkerStatus(_message.Message):
    __slots__ = ["health", "last_contact_ms", "open_polls", "worker"]
    HEALTH_FIELD_NUMBER: _ClassVar[int]
    LAST_CONTACT_MS_FIELD_NUMBER: _ClassVar[int]
    OPEN_POLLS_FIELD_NUMBER: _ClassVar[int]
    WORKER_FIELD_NUMBER: _ClassVar[int]
    health: WorkerHealth
    last_contact_ms: int
    open_polls: int
    worker: _types_pb2.WorkerInfo
    def __init__(self, worker: _Optional[_Union[_types_pb2.WorkerInfo, _Mapping]] = ..., last_contact_ms: _Optional[int] = ..., open_polls: _Optional[int] = ..., health: _Optional[_Union[WorkerHealth, _Mapping]] = ...) -> None: ...
