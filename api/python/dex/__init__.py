"""Dex's Python Worker library and client.

A Worker runs model and tool calls for a Dex cluster: register tools with
their policies and a model handler, then run it::

    worker = dex.Worker("dex:///127.0.0.1:7101,127.0.0.1:7102,127.0.0.1:7103")

    @worker.tool(access="read")
    async def lookup(call: dex.ToolCall) -> str:
        return "found " + call.args["query"]

    worker.run_forever()
"""

from dex.bulk import BULK_ACTIONS, new_bulk_job_id
from dex.client import Client, new_idempotency_key, new_session_id
from dex.connection import (HEALTH_SERVICE, LEADER_METADATA_KEY, PARTITION_METADATA_KEY, SCHEME, TOKEN_ENV, Connection,
                            TLSFiles, token_from)
from dex.errors import (
    ERROR_TYPES,
    TOOL_CALL_NOT_RUN_ERROR_PREFIX,
    DexError,
    ModelError,
    RegistrationError,
    classify_error,
    error_type_for_http_status,
    http_model_error,
    is_context_length_message,
    retry_after_from_headers,
    retry_after_of,
)
from dex.ledger import LEDGER_ENV, side_effect
from dex.metrics import MetricsServer, WorkerMetrics, serve_metrics
from dex.partitions import partition_of
from dex.tracing import TRACER_NAME, parse_traceparent
from dex.worker import (
    ACCESS,
    MOMENTS,
    ModelInput,
    Tool,
    ToolCall,
    ToolResult,
    Usage,
    Worker,
    check_model_output,
    model_output,
    tool_spec,
)

__all__ = [
    "ACCESS", "BULK_ACTIONS", "Client", "Connection", "DexError", "ERROR_TYPES", "HEALTH_SERVICE", "LEADER_METADATA_KEY",
    "LEDGER_ENV", "MOMENTS", "MetricsServer", "ModelError", "ModelInput", "PARTITION_METADATA_KEY",
    "RegistrationError", "SCHEME", "TLSFiles", "TOKEN_ENV", "TOOL_CALL_NOT_RUN_ERROR_PREFIX", "TRACER_NAME", "Tool",
    "ToolCall", "ToolResult", "Usage", "Worker", "WorkerMetrics", "check_model_output", "classify_error",
    "error_type_for_http_status", "http_model_error", "is_context_length_message", "model_output",
    "new_bulk_job_id", "new_idempotency_key", "new_session_id", "parse_traceparent", "partition_of", "retry_after_from_headers",
    "retry_after_of", "serve_metrics", "side_effect", "token_from", "tool_spec",
]
