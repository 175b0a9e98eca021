"""The Dex Worker: long-polls the cluster for tasks and runs them.

A port of api/client/worker.go. Every call after PollTask names its attempt
and a per-attempt sequence number (1: the claim, which heartbeats repeat; 2:
the report), and is repeated with the same number across a takeover until
the cluster answers: a repeat of a call it already committed gets the first
answer.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import inspect
import json
import logging
import os
import random
import socket
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Iterable, Optional, Union

import grpc

from dex.agents import agent_list
from dex.connection import PARTITION_METADATA_KEY, Connection, TLSFiles
from dex.errors import DexError, ModelError, RegistrationError, classify_error, retry_after_ms, retry_after_of
from dex.hold import (HOLD_AFTER_CLAIM, HOLD_AFTER_RESULT_SENT, HOLD_BEFORE_CLAIM, HOLD_BEFORE_MODEL,  # noqa: F401
                      HOLD_BEFORE_RESULT, HOLD_DURING_COMPACTION, HOLD_DURING_POLL, HOLD_TOOL_RUNNING, MOMENTS,
                      holder_from_env)
from dex.ledger import LEDGER_ENV, ledger_from_env, start_line
from dex.metrics import (TASK_CANCELLED, TASK_CANNOT_RUN, TASK_CLAIM_REFUSED, TASK_COMPLETED, TASK_FAILED,
                         TASK_REPORT_REFUSED, WorkerMetrics)
from dex.stream import STREAM_CALL_TIMEOUT, STREAM_FLUSH, OutputSender, OutputStream
from dex.tracing import task_span
from dex.v1 import types_pb2, workers_pb2, workers_pb2_grpc

log = logging.getLogger("dex.worker")

#: Tool access policies by name.
ACCESS = {
    "read": types_pb2.TOOL_ACCESS_READ,
    "idempotent_write": types_pb2.TOOL_ACCESS_IDEMPOTENT_WRITE,
    "single_attempt": types_pb2.TOOL_ACCESS_SINGLE_ATTEMPT,
}
BUILTIN_TOOLS = ("ask_user", "sleep")
MAX_RUN_TIMEOUT = (2**32 - 1) / 1000.0  # seconds: ms in 32 bits

# A try of a claim, heartbeat or report waits about a heartbeat interval,
# within these bounds (api/client/calltry.go): a node silent that long is
# probably gone, and the same call goes out again to the new lease holder.
MIN_CALL_TRY = 1.0
MAX_CALL_TRY = 2.0

# A task says how it runs (Task.runner and Task.handler, from the cluster's
# table of Step kinds): the model runs the model and compact handlers, a
# tool its run and poll handlers.
_RUNNER_HANDLERS = {
    workers_pb2.TASK_RUNNER_MODEL: (workers_pb2.TASK_HANDLER_MODEL, workers_pb2.TASK_HANDLER_COMPACT),
    workers_pb2.TASK_RUNNER_TOOL: (workers_pb2.TASK_HANDLER_TOOL, workers_pb2.TASK_HANDLER_POLL),
}


def _enum_name(enum: Any, value: int) -> str:
    """The name of an enum value, or its number when this build does not know it."""
    try:
        return enum.Name(value)
    except ValueError:
        return str(value)


def _route_problem(t: workers_pb2.Task) -> str:
    """What is wrong with how a task says it runs ("" when nothing). A
    cluster older than the runner and handler fields sends neither."""
    if t.runner == workers_pb2.TASK_RUNNER_UNSPECIFIED and t.handler == workers_pb2.TASK_HANDLER_UNSPECIFIED:
        return "the task names no runner and no handler (a Dex server older than this Worker library sent it)"
    if t.handler not in _RUNNER_HANDLERS.get(t.runner, ()):
        return (f"runner {_enum_name(workers_pb2.TaskRunner, t.runner)} has no handler "
                f"{_enum_name(workers_pb2.TaskHandler, t.handler)}")
    return ""
_TRANSIENT = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.ABORTED, grpc.StatusCode.DEADLINE_EXCEEDED,
              grpc.StatusCode.CANCELLED)


# How long a poll waits when a Worker has fewer task slots than partitions.
_SHARED_SLOT_WAIT = 0.25


@dataclass
class ToolCall:
    """What a tool (or poll) handler is asked to do."""

    session_id: str
    step_id: str
    call_id: str
    tool: str
    arguments: str  # JSON text
    idempotency_key: str  # the same in every attempt of a write
    attempt: int
    task_id: str = ""  # the long-running task to poll (poll handlers)
    access: int = types_pb2.TOOL_ACCESS_UNSPECIFIED
    #: The dispatch epoch the attempt was started under (the lease's fencing token).
    epoch: int = 0
    #: The agent of the call's session ("": the default agent).
    agent: str = ""
    #: Set when the cluster cancelled the attempt (or the Worker stops):
    #: a sync handler should check it; an async one is cancelled.
    cancelled: threading.Event = field(default_factory=threading.Event, repr=False)
    #: The attempt's place in its turn's trace, a W3C traceparent header
    #: ("00-TRACE-SPAN-01"; "" when the turn is not traced): the Worker's
    #: span around the handler (when OpenTelemetry is installed) is its
    #: child. For a handler that passes the trace on by hand.
    traceparent: str = ""
    #: The execution ledger and this call's line, for dex.side_effect.
    _ledger: Optional[tuple] = field(default=None, repr=False, compare=False)
    #: The attempt's live output (None: no Worker behind it).
    _out: Optional[OutputStream] = field(default=None, repr=False, compare=False)

    @property
    def args(self) -> Any:
        """The arguments parsed (an empty object when there are none)."""
        return json.loads(self.arguments) if self.arguments else {}

    def stream(self, text: str) -> None:
        """Sends text, the next piece of the tool's progress, to the
        session's watchers as the handler runs, as ModelInput.stream does
        for a model's output; the progress is not the tool's result, which
        the handler returns as usual. Without a Worker behind it, it does
        nothing."""
        if self._out is not None:
            self._out.write(text)


@dataclass
class ToolResult:
    """A tool handler's answer. ``is_error``: the tool ran and answered with
    an error (the call fails, the attempt does not). ``task_id``: a
    long-running tool's start names the task to poll."""

    content: str = ""
    is_error: bool = False
    task_id: str = ""

    def proto(self) -> types_pb2.ToolResult:
        return types_pb2.ToolResult(content=self.content, is_error=self.is_error, task_id=self.task_id)


@dataclass
class ModelInput:
    """What a model handler sees: the history since the last summary and the
    tools; ``compact``: summarise the history (CompactContext)."""

    session_id: str
    step_id: str
    attempt: int
    history: list
    tools: list
    compact: bool = False
    #: The dispatch epoch the attempt was started under.
    epoch: int = 0
    #: The session's agent, one of the Worker's ``agents`` ("": the default
    #: agent): a Worker of several agents runs that agent's model.
    agent: str = ""
    cancelled: threading.Event = field(default_factory=threading.Event, repr=False)
    #: The attempt's W3C traceparent ("" when the turn is not traced), as
    #: ToolCall.traceparent.
    traceparent: str = ""
    #: The attempt's live output (None: no Worker behind it).
    _out: Optional[OutputStream] = field(default=None, repr=False, compare=False)

    def stream(self, text: str) -> None:
        """Sends text, the next piece of the model's output, to the
        session's watchers as the handler produces it
        (docs/design/streaming.md). It does not wait for the cluster and may
        be called from a sync handler's thread. The output the handler
        returns must be the concatenation of what it streamed (watchers are
        told when the committed result replaces the stream). Without a
        Worker behind it (a test's ModelInput), it does nothing."""
        if self._out is not None:
            self._out.write(text)


#: The largest count a Usage field holds (uint64 on the wire).
_MAX_USAGE = 2**64 - 1
_USAGE_COUNTS = ("input_tokens", "output_tokens", "cost_micros")


@dataclass
class Usage:
    """What one model call used, as its provider reported it: input and
    output tokens, the cost in millionths of a currency unit (the Worker's
    own: Dex adds costs up and never converts them; a price in dollars is
    ``round(usd * 1_000_000)``) and the model's name. A model handler returns
    it with its output (``model_output(..., usage=...)`` or a dict's
    ``"usage"``); one that cannot tell leaves it out."""

    input_tokens: int = 0
    output_tokens: int = 0
    cost_micros: int = 0
    model: str = ""

    def proto(self) -> types_pb2.Usage:
        """The wire form; raises DexError for a count that is not a whole
        number from 0 to 2**64-1 or a model name that is not a str."""
        for name in _USAGE_COUNTS:
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= _MAX_USAGE:
                raise DexError(f"usage {name} must be a whole number from 0 to 2**64-1, not {v!r}")
        if not isinstance(self.model, str):
            raise DexError(f"usage model must be a str, not {type(self.model).__name__}")
        return types_pb2.Usage(input_tokens=self.input_tokens, output_tokens=self.output_tokens,
                               cost_micros=self.cost_micros, model=self.model)


def _as_usage(v: Any) -> Optional[types_pb2.Usage]:
    """A model output's usage: a Usage, a types_pb2.Usage or a dict of
    Usage's fields (None: left out)."""
    if v is None:
        return None
    if isinstance(v, types_pb2.Usage):
        return v
    if isinstance(v, dict):
        unknown = sorted(k for k in v if k not in (*_USAGE_COUNTS, "model"))
        if unknown:
            raise DexError(f"usage has unknown fields {', '.join(map(repr, unknown))} "
                           f"(known: {', '.join(_USAGE_COUNTS)}, model)")
        v = Usage(**v)
    if isinstance(v, Usage):
        return v.proto()
    raise DexError(f"usage is a {type(v).__name__}; want a dex.Usage, a dict or a types_pb2.Usage")


ToolHandler = Callable[[ToolCall], Union[ToolResult, str, None, Awaitable[Any]]]
PollHandler = Callable[[ToolCall], Any]  # -> (done, ToolResult | str | None)
ModelHandler = Callable[[ModelInput], Any]  # -> ModelOutput | dict | str (a dict's "usage": a Usage or dict)
CompactHandler = Callable[[ModelInput], Any]  # -> str
HoldHook = Callable[[str, workers_pb2.Task], Any]


@dataclass
class Tool:
    """A tool the Worker serves: its policy and its handlers."""

    spec: types_pb2.ToolSpec
    run: ToolHandler
    poll: Optional[PollHandler] = None


def tool_spec(name: str, access: Optional[str | int] = None, *, needs_approval: bool = False,
              long_running: bool = False, inline: bool = False, max_attempts: int = 0,
              poll_interval: float = 0.0, run_timeout: float = 0.0, description: str = "",
              agents: Iterable[str] = ()) -> types_pb2.ToolSpec:
    """A tool's policy. ``access`` is required: ``read``, ``idempotent_write``
    or ``single_attempt``. Times are in seconds. ``agents``: serve the tool
    only for these agents' sessions (none: for every agent)."""
    if not name:
        raise DexError("a tool has no name")
    if access is None or access == types_pb2.TOOL_ACCESS_UNSPECIFIED:
        raise DexError(f"tool {name!r} has no policy: give access= one of {', '.join(ACCESS)}")
    if isinstance(access, str):
        if access not in ACCESS:
            raise DexError(f"tool {name!r}: unknown access {access!r} (known: {', '.join(ACCESS)})")
        access = ACCESS[access]
    elif access not in ACCESS.values():
        raise DexError(f"tool {name!r}: unknown access {access!r}")
    if name in BUILTIN_TOOLS:
        raise DexError(f"tool {name!r} is a built-in of the cluster")
    if max_attempts < 0:
        raise DexError(f"tool {name!r}: max_attempts must not be negative")
    for what, v in (("poll_interval", poll_interval), ("run_timeout", run_timeout)):
        if v < 0 or v > MAX_RUN_TIMEOUT:
            raise DexError(f"tool {name!r}: {what} must be between 0 and {MAX_RUN_TIMEOUT:.0f} s")
    if poll_interval and not long_running:
        raise DexError(f"tool {name!r}: a poll interval needs long_running=True")
    served_for = agent_list(f"tool {name!r} agents", agents)
    return types_pb2.ToolSpec(name=name, access=access, needs_approval=needs_approval, long_running=long_running,
                              inline=inline, max_attempts=max_attempts, poll_interval_ms=round(poll_interval * 1000),
                              run_timeout_ms=round(run_timeout * 1000), description=description, agents=served_for)


def check_model_output(mo: types_pb2.ModelOutput) -> Optional[str]:
    """Why the cluster would refuse a model output (None: it is fine): every
    tool call needs a tool and a call id unique within the output."""
    seen: dict[str, str] = {}
    for i, tc in enumerate(mo.tool_calls, 1):
        if not tc.tool:
            return f"tool call {i} of the model output (call id {tc.call_id!r}) names no tool"
        if not tc.call_id:
            return (f"tool call {i} of the model output (tool {tc.tool!r}) has no call id: "
                    "every tool call needs one, unique within the output")
        if tc.call_id in seen:
            return (f"call id {tc.call_id!r} appears twice in one model output (tools {seen[tc.call_id]!r} "
                    f"and {tc.tool!r}): call ids must be unique within the output")
        seen[tc.call_id] = tc.tool
    return None


def _arguments(v: Any) -> str:
    return v if isinstance(v, str) else json.dumps(v, separators=(",", ":"))


def model_output(text: str = "", tool_calls: Iterable[Any] = (),
                 inline_results: Iterable[types_pb2.InlineResult] = (), *,
                 usage: Any = None) -> types_pb2.ModelOutput:
    """A model output. Each tool call is a ``types_pb2.ToolCall`` or a dict
    with ``call_id``, ``tool`` and ``arguments`` (JSON text or a value). A
    call without a call id (or a tool, or with a repeated id) raises
    DexError. ``usage``: what the call used (a ``Usage``, a dict of its
    fields or a ``types_pb2.Usage``); a bad one raises DexError."""
    mo = types_pb2.ModelOutput(text=text, inline_results=list(inline_results))
    u = _as_usage(usage)
    if u is not None:
        mo.usage.CopyFrom(u)
    for tc in tool_calls:
        if isinstance(tc, dict):
            tc = types_pb2.ToolCall(call_id=tc.get("call_id", "") or "", tool=tc.get("tool", "") or "",
                                    arguments=_arguments(tc.get("arguments", {})))
        mo.tool_calls.append(tc)
    why = check_model_output(mo)
    if why:
        raise DexError(why)
    return mo


def _as_model_output(v: Any) -> types_pb2.ModelOutput:
    if v is None:
        return types_pb2.ModelOutput()
    if isinstance(v, types_pb2.ModelOutput):
        return v
    if isinstance(v, str):
        return types_pb2.ModelOutput(text=v)
    if isinstance(v, dict):
        mo = types_pb2.ModelOutput(text=v.get("text", ""))
        for tc in v.get("tool_calls", ()):
            if isinstance(tc, dict):
                tc = types_pb2.ToolCall(call_id=tc.get("call_id", "") or "", tool=tc.get("tool", "") or "",
                                        arguments=_arguments(tc.get("arguments", {})))
            mo.tool_calls.append(tc)
        mo.inline_results.extend(v.get("inline_results", ()))
        u = _as_usage(v.get("usage"))
        if u is not None:
            mo.usage.CopyFrom(u)
        return mo
    raise DexError(f"a model handler returned {type(v).__name__}; want a ModelOutput, a dict or a str")


def _as_tool_result(v: Any) -> ToolResult:
    if v is None:
        return ToolResult()
    if isinstance(v, ToolResult):
        return v
    if isinstance(v, str):
        return ToolResult(content=v)
    raise DexError(f"a tool handler returned {type(v).__name__}; want a ToolResult or a str")


class _Backoff:
    """50 ms growing to 250 ms, with ±20% jitter so Workers do not hit a new
    leader in lockstep."""

    def __init__(self, lo: float = 0.05, hi: float = 0.25) -> None:
        self.lo, self.hi, self.n = lo, hi, 0

    def next(self) -> float:
        d = min(self.lo * (2 ** min(self.n, 16)), self.hi)
        self.n += 1
        return d * random.uniform(0.8, 1.2)


# A Worker that cannot reach the cluster says why at once, then again after
# FIRST_SAY_GAP, each later gap doubling up to MAX_SAY_GAP (seconds).
FIRST_SAY_GAP = 2.0
MAX_SAY_GAP = 30.0
# The one try a stopping Worker gives its deregistration (the TTL deregisters
# it anyway).
DEREGISTER_TRY = 2.0


class _Slots:
    """The Worker's task slots (its concurrency), shared by its poll loops.
    A loop takes free slots before it polls and asks for that many tasks; it
    gives back those it got no task for, and each task gives its slot back
    when it ends."""

    def __init__(self, n: int) -> None:
        self.free = n
        self._freed = asyncio.Event()

    async def take(self, most: int) -> int:
        """Waits for a free slot, then takes up to most of the free ones."""
        while self.free <= 0:
            self._freed.clear()
            await self._freed.wait()
        n = min(self.free, most)
        self.free -= n
        return n

    def give(self, n: int) -> None:
        self.free += n
        if self.free > 0:
            self._freed.set()


class _SayEvery:
    """Spaces repeated lines out: due at once, then after growing gaps."""

    def __init__(self) -> None:
        self.next, self.gap = 0.0, 0.0

    def due(self, now: float) -> bool:
        if now < self.next:
            return False
        self.gap = FIRST_SAY_GAP if self.gap == 0 else min(2 * self.gap, MAX_SAY_GAP)
        self.next = now + self.gap
        return True


def _why_not(err: grpc.RpcError) -> str:
    """Why a call did not reach the cluster, in a few words: the last words
    of a connect error ("Connection refused"), or the cluster's answer."""
    details = err.details() or err.code().name
    if details.startswith("failed to connect to all addresses"):
        return details.rsplit(": ", 1)[-1]
    return details


def _transient(err: BaseException) -> bool:
    return isinstance(err, grpc.RpcError) and err.code() in _TRANSIENT


def _failure(error_type: int, msg: str, retry_after_ms: int = 0) -> types_pb2.AttemptResult:
    return types_pb2.AttemptResult(failure=types_pb2.AttemptFailure(error_type=error_type, error=msg,
                                                                    retry_after_ms=retry_after_ms))


@dataclass
class _Outcome:
    complete: Optional[types_pb2.AttemptResult] = None
    error_type: int = types_pb2.ERROR_TYPE_UNSPECIFIED
    err: Optional[BaseException] = None
    ran: bool = False  # the handler was called
    retry_after_ms: int = 0  # a model handler's rate_limit: the provider's Retry-After


class _ShutdownCancel(Exception):
    """The Worker cancelled a handler when its shutdown grace ran out."""


class _LedgerStartError(DexError):
    """The handler did not run: its ledger start line was not written."""


class Worker:
    """Runs tools and a model for a Dex cluster.

    ``target`` is ``dex:///h1:p1,h2:p2,...`` or one ``host:port`` of a load
    balancer (or a :class:`Connection`). Register tools with :meth:`tool`
    (and :meth:`poll` for a long-running one) and the model with
    :meth:`model` (and :meth:`compactor`), then ``await worker.run()`` or
    ``worker.run_forever()``. Times are in seconds. ``agents``: the agents
    (NAME or NAME@VERSION, matched exactly) whose model the Worker runs; it
    gets their sessions' model Steps only (none: the default agent's).
    ``metrics``: a :class:`dex.WorkerMetrics` that counts the tasks by
    outcome and times the handlers (serve its registry with
    :func:`dex.serve_metrics`).
    """

    def __init__(self, target: Union[str, Connection], *, id: str = "", concurrency: int = 4,
                 poll_wait: float = 20.0, call_timeout: float = 10.0, shutdown_grace: float = 5.0,
                 model_run_timeout: float = 0.0, hold: Optional[HoldHook] = None,
                 token: Optional[str] = None, tls: Optional[TLSFiles] = None,
                 logger: Optional[logging.Logger] = None, agents: Iterable[str] = (),
                 metrics: Optional[WorkerMetrics] = None) -> None:
        if concurrency <= 0:
            raise DexError("concurrency must be positive")
        if poll_wait <= 0 or call_timeout <= 0 or shutdown_grace < 0:
            raise DexError("poll_wait and call_timeout must be positive, shutdown_grace not negative")
        if model_run_timeout < 0 or model_run_timeout > MAX_RUN_TIMEOUT:
            raise DexError(f"model run timeout {model_run_timeout}: must be between 0 (the cluster's default) "
                           f"and {MAX_RUN_TIMEOUT:.0f} s")
        self.agents = agent_list("worker agents", agents)
        self.metrics = metrics
        self._target = target
        self._token, self._tls = token, tls
        self.conn: Optional[Connection] = target if isinstance(target, Connection) else None
        self.id = id or f"{socket.gethostname()}-{os.getpid()}"
        self.concurrency = concurrency
        self.poll_wait = poll_wait
        self.call_timeout = call_timeout
        self.shutdown_grace = shutdown_grace
        self.model_run_timeout = model_run_timeout
        self.hold_hook = hold
        self.log = logger or log
        self._own_logger = logger is not None
        self._registered = False
        self.tools: dict[str, Tool] = {}
        self._model: Optional[ModelHandler] = None
        self._compact: Optional[CompactHandler] = None
        self.heartbeat_interval = 1.0
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=concurrency + 4, thread_name_prefix="dex-handler")
        self._handlers: dict[asyncio.Task, threading.Event] = {}  # running handlers, their cancel events
        self._report_deadline: Optional[float] = None  # set when the grace is over
        self._conn_lost: set[int] = set()  # the partitions whose polls fail
        #: How many partitions the cluster has (its registration says): one poll loop each.
        self._partitions = 1
        self._partitions_changed: Optional[asyncio.Event] = None  # set when a registration changes it
        #: The live output senders, by the partition its tasks were polled from (None: the only one).
        self._output_senders: dict[Optional[int], OutputSender] = {}
        if hold is None:  # holds asked for by $DEX_HOLD (dex.hold)
            holder = holder_from_env(os.environ.get(LEDGER_ENV, ""))
            self.hold_hook = holder.hold if holder is not None else None
        #: The execution ledger, when $DEX_LEDGER names a file (dex.ledger).
        self.ledger = ledger_from_env()

    # Registration ------------------------------------------------------

    def add_tool(self, name: str, run: ToolHandler, *, access: Optional[str | int] = None,
                 poll: Optional[PollHandler] = None, **policy: Any) -> Tool:
        """Registers a tool with its policy (see :func:`tool_spec`)."""
        spec = tool_spec(name, access, **policy)
        if name in self.tools:
            raise DexError(f"tool {name!r} registered twice")
        if not callable(run):
            raise DexError(f"tool {name!r} has no handler")
        t = Tool(spec=spec, run=run, poll=poll)
        self.tools[name] = t
        return t

    def tool(self, name: str = "", *, access: Optional[str | int] = None, **policy: Any) -> Callable[[ToolHandler], ToolHandler]:
        """Decorator: registers the function as a tool (named after it unless
        ``name``) with its policy: ``access`` (required: read,
        idempotent_write, single_attempt), ``needs_approval``,
        ``long_running`` (then register a :meth:`poll` handler),
        ``poll_interval``, ``inline``, ``max_attempts``, ``run_timeout``,
        ``description`` (default: the docstring)."""

        def register(fn: ToolHandler) -> ToolHandler:
            policy.setdefault("description", inspect.cleandoc(fn.__doc__ or ""))
            self.add_tool(name or fn.__name__, fn, access=access, **policy)
            return fn

        return register

    def poll(self, name: str) -> Callable[[PollHandler], PollHandler]:
        """Decorator: the poll handler of the long-running tool ``name``. It
        returns ``(done, result)``; result (a ToolResult or str) only when
        done."""

        def register(fn: PollHandler) -> PollHandler:
            t = self.tools.get(name)
            if t is None:
                raise DexError(f"poll handler for {name!r}: register the tool first")
            if not t.spec.long_running:
                raise DexError(f"poll handler for {name!r}: the tool is not long_running")
            t.poll = fn
            return fn

        return register

    def model(self, fn: ModelHandler) -> ModelHandler:
        """Decorator: the model handler (RunModel Steps). It returns a
        ModelOutput (see :func:`model_output`), a dict or a str; raise
        :class:`ModelError` to choose the failure's error type."""
        self._model = fn
        return fn

    def compactor(self, fn: CompactHandler) -> CompactHandler:
        """Decorator: the compaction handler (CompactContext Steps): returns
        the summary of ``input.history``."""
        self._compact = fn
        return fn

    def check(self) -> None:
        """Raises DexError unless the Worker can run."""
        for name, t in self.tools.items():
            if t.spec.long_running and t.poll is None:
                raise DexError(f"long-running tool {name!r} has no poll handler")
        if not self.tools and self._model is None:
            raise DexError("a Worker needs a tool or a model")
        if self.agents and self._model is None:
            raise DexError("agents are listed but the Worker runs no model: list a tool's agents in its agents=")

    # Running -----------------------------------------------------------

    def run_forever(self) -> None:
        """Runs until SIGTERM or SIGINT, then shuts down gracefully. With
        TLS, SIGHUP reloads the TLS files (:meth:`reload_tls`)."""
        import signal

        async def main() -> None:
            stop = asyncio.Event()
            loop = asyncio.get_running_loop()
            for s in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(s, stop.set)
            if self._uses_tls():
                loop.add_signal_handler(signal.SIGHUP, self.reload_tls_logged)
            await self.run(stop)

        asyncio.run(main())

    def _uses_tls(self) -> bool:
        if self.conn is not None:
            return self.conn.tls is not None
        return self._tls is not None and bool(self._tls.cert)

    def reload_tls(self) -> None:
        """Reads the TLS files again, for the Worker's next connections
        (:meth:`Connection.reload_tls`); raises DexError, keeping the
        current files in use, when the new ones are not usable. Before
        :meth:`run` it only checks them: run reads them as it connects."""
        if self.conn is not None:
            self.conn.reload_tls()
        elif self._uses_tls():
            assert self._tls is not None
            self._tls.credentials()
        else:
            raise DexError("this Worker does not use TLS: there are no files to reload")

    def reload_tls_logged(self) -> None:
        """reload_tls, saying how it went in the Worker's log (a SIGHUP's
        handler: an error keeps the Worker running on its current files)."""
        try:
            self.reload_tls()
        except DexError as e:
            self._say(logging.ERROR, "SIGHUP: reloading the TLS files failed; the current ones stay in use",
                      {"error": str(e)})
            return
        self._say(logging.INFO, "SIGHUP: TLS files reloaded")

    async def run(self, stop: Optional[asyncio.Event] = None) -> None:
        """Registers (retrying until the cluster answers), then long-polls
        and runs up to ``concurrency`` tasks at once until ``stop`` is set:
        one poll loop per partition of the cluster, sharing the concurrency.
        Then it stops polling, lets running tasks finish for the shutdown
        grace, cancels what is left, deregisters and returns. Raises
        RegistrationError if the cluster refuses the registration."""
        self.check()
        stop = stop or asyncio.Event()
        if self.conn is None:
            self.conn = Connection(str(self._target), token=self._token, tls=self._tls)
        running: set[asyncio.Task] = set()
        self._partitions_changed = asyncio.Event()
        stopped = asyncio.ensure_future(stop.wait())
        try:
            reg = asyncio.ensure_future(self._register())
            await asyncio.wait({reg, stopped}, return_when=asyncio.FIRST_COMPLETED)
            if not reg.done():
                reg.cancel()
                return
            reg.result()
            await self._poll_partitions(stopped, running)
            await self._drain(running)
            await self._deregister()
        finally:
            stopped.cancel()
            if not isinstance(self._target, Connection) and self.conn is not None:
                await self.conn.close()
                self.conn = None

    async def _poll_partitions(self, stopped: asyncio.Future, running: set[asyncio.Task]) -> None:
        """Runs a poll loop per partition until stopped, following the
        partition count each registration gives. The loops share the
        Worker's concurrency; a loop's unexpected error is raised."""
        assert self._partitions_changed is not None
        slots = _Slots(self.concurrency)
        loops: dict[int, asyncio.Task] = {}
        try:
            while not stopped.done():
                self._partitions_changed.clear()
                for k in range(self._partitions):
                    if k not in loops:
                        loops[k] = asyncio.ensure_future(self._poll_loop(k, slots, running))
                changed = asyncio.ensure_future(self._partitions_changed.wait())
                await asyncio.wait({stopped, changed, *loops.values()}, return_when=asyncio.FIRST_COMPLETED)
                changed.cancel()
                for k, loop in list(loops.items()):
                    if loop.done():
                        del loops[k]
                        loop.result()
        finally:
            for loop in loops.values():
                loop.cancel()
            await asyncio.gather(*loops.values(), return_exceptions=True)

    async def _poll_loop(self, k: int, slots: _Slots, running: set[asyncio.Task]) -> None:
        """Partition k's poll loop, while the cluster has more than k
        partitions: takes its share of the free slots, polls for that many
        tasks and runs them."""
        while k < self._partitions:
            # With several partitions a loop asks for its share at most, so
            # that a long poll of an idle partition does not hold every slot
            # while another partition has work.
            n = await slots.take(max(1, self.concurrency // self._partitions))
            try:
                tasks = await self._poll(n, k)
            except BaseException:
                slots.give(n)
                raise
            slots.give(n - len(tasks))
            # A task's attempt calls belong to the partition it was polled
            # from: the connection sends them to that partition's leader.
            part = k if self._partitions > 1 else None
            for t in tasks:
                task = asyncio.ensure_future(self._run_task(t, part))
                running.add(task)
                task.add_done_callback(running.discard)
                task.add_done_callback(lambda _: slots.give(1))

    async def _drain(self, running: set[asyncio.Task]) -> None:
        if not running:
            return
        _, pending = await asyncio.wait(running, timeout=self.shutdown_grace)
        if not pending:
            return
        self.log.warning("shutdown grace over; cancelling running tasks")
        self._report_deadline = time.monotonic() + 2.0
        for h, ev in list(self._handlers.items()):
            ev.set()
            h.cancel(msg="shutdown")
        _, pending = await asyncio.wait(pending, timeout=2.5)
        if pending:
            self.log.warning("tasks still running at exit")
            for p in pending:
                p.cancel()

    def _say(self, level: int, msg: str, fields: Optional[dict] = None) -> None:
        """One line about the Worker's registration: to its logger, or to
        stderr when it was given none and logging is not configured."""
        if not self._own_logger and not self.log.hasHandlers():
            err = f" ({fields['error']})" if fields and "error" in fields and level >= logging.ERROR else ""
            print(f"dex worker {self.id}: {msg}{err}", file=sys.stderr, flush=True)
            return
        self.log.log(level, msg, extra={"fields": {"worker": self.id, **(fields or {})}})

    def _where(self) -> str:
        """The addresses the Worker dials, for its lines."""
        return ",".join(self.conn.addrs) if self.conn is not None else str(self._target)

    async def _register(self) -> None:
        assert self.conn is not None
        req = workers_pb2.RegisterWorkerRequest(worker_id=self.id, runs_model=self._model is not None,
                                                model_run_timeout_ms=round(self.model_run_timeout * 1000),
                                                tools=[t.spec for t in self.tools.values()], agents=self.agents)
        b = _Backoff(0.05, 1.0)
        says = _SayEvery()
        start, failed = time.monotonic(), False
        while True:
            try:
                # Fail fast: a Worker that cannot reach the cluster says why.
                resp = await self.conn.unary(workers_pb2_grpc.WorkerServiceStub, "RegisterWorker", req,
                                             self.call_timeout, wait_for_ready=False)
            except grpc.RpcError as e:
                if not _transient(e):
                    err = RegistrationError(f"register worker {self.id} with {self._where()}: "
                                            f"{e.code().name}: {e.details()}")
                    self._say(logging.ERROR, str(err))
                    raise err from None
                if says.due(time.monotonic()):
                    line = f"cannot register with {self._where()}: {_why_not(e)}; retrying"
                    if failed:
                        line += f" (for {round(time.monotonic() - start)}s now)"
                    self._say(logging.WARNING, line, {"error": f"{e.code().name}: {e.details()}"})
                failed = True
                await asyncio.sleep(b.next())
                continue
            if resp.heartbeat_interval_ms > 0:
                self.heartbeat_interval = resp.heartbeat_interval_ms / 1000.0
            first = not self._registered
            self._registered = True
            line = f"registered with the cluster at {self._where()}"
            if resp.node_id:
                line = f"registered with leader {resp.node_id} at {resp.node_address}"
            if failed:
                line += f" after {round(time.monotonic() - start)}s"
            self._say(logging.INFO, line, {"leader": resp.node_id, "leader_address": resp.node_address,
                                           "tools": len(req.tools), "runs_model": req.runs_model,
                                           "agents": list(req.agents),
                                           "heartbeat_interval_ms": resp.heartbeat_interval_ms,
                                           "heartbeat_timeout_ms": resp.heartbeat_timeout_ms})
            self._set_partitions(first, resp.partitions)
            return

    def _set_partitions(self, first: bool, n: int) -> None:
        """Follows the partition count a registration gave (0: one): the
        poll loops change from their next poll."""
        was, n = self._partitions, max(n, 1)
        if n == was:
            return
        self._partitions = n
        fields = {"worker": self.id, "partitions": n}
        if first:
            self.log.info("polling every partition", extra={"fields": fields})
        else:
            self.log.info("the cluster's partition count changed; polling the new count from the next poll",
                          extra={"fields": {**fields, "was": was}})
        if n > self.concurrency:
            self.log.warning("fewer task slots than partitions: a partition is polled only while a slot is free",
                             extra={"fields": {**fields, "concurrency": self.concurrency}})
        if self._partitions_changed is not None:
            self._partitions_changed.set()

    async def _deregister(self) -> None:
        """Tells the cluster, as the Worker stops, that it is gone, so that it
        does not look alive until its TTL runs out."""
        if not self._registered or self.conn is None:
            return
        req = workers_pb2.DeregisterWorkerRequest(worker_id=self.id)
        try:
            await self.conn.unary(workers_pb2_grpc.WorkerServiceStub, "DeregisterWorker", req,
                                  min(DEREGISTER_TRY, self.call_timeout))
        except grpc.RpcError as e:
            if e.code() == grpc.StatusCode.UNIMPLEMENTED:
                self.log.debug("the cluster cannot deregister a Worker; it drops it after its TTL")
                return
            self._say(logging.WARNING, f"could not deregister from {self._where()}: {_why_not(e)}; "
                                       "the cluster drops the Worker after its TTL")
            return
        self._registered = False
        self._say(logging.INFO, "deregistered")

    async def _poll(self, n: int, k: int = 0) -> list:
        """Long-polls partition k once for up to n tasks; [] on an error
        (after a backoff), or once the cluster has no partition k."""
        assert self.conn is not None
        b = _Backoff(0.05, 1.0)
        # A poll holds its slot while it waits: with fewer slots than
        # partitions the loops poll briefly in turn, so no partition waits
        # a whole poll_wait behind an idle one.
        wait = min(self.poll_wait, _SHARED_SLOT_WAIT) if self._partitions > self.concurrency else self.poll_wait
        req = workers_pb2.PollTaskRequest(worker_id=self.id, wait_ms=round(wait * 1000), max_tasks=n)
        while k < self._partitions:
            # A cluster of one partition gets no partition metadata.
            md = ((PARTITION_METADATA_KEY, str(k)),) if self._partitions > 1 else ()
            where = {"partition": k} if md else {}
            try:
                resp = await self.conn.unary(workers_pb2_grpc.WorkerServiceStub, "PollTask", req,
                                             wait + self.call_timeout, metadata=md, partition=k if md else None)
                if k in self._conn_lost:
                    self.log.info("cluster reached again", extra={"fields": {"worker": self.id, **where}})
                    self._conn_lost.discard(k)
                return list(resp.tasks)
            except grpc.RpcError as e:
                if e.code() in (grpc.StatusCode.NOT_FOUND, grpc.StatusCode.FAILED_PRECONDITION):
                    # The cluster does not know this Worker (any more): register again.
                    self.log.warning("poll refused; registering again",
                                     extra={"fields": {"error": e.details(), **where}})
                    try:
                        await self._register()
                    except RegistrationError as re:
                        self.log.error("register again", extra={"fields": {"error": str(re)}})
                elif _transient(e):
                    if k not in self._conn_lost:
                        self.log.warning("cluster lost; retrying",
                                         extra={"fields": {"error": f"{e.code().name}: {e.details()}", **where}})
                        self._conn_lost.add(k)
                else:
                    self.log.error("poll", extra={"fields": {"error": f"{e.code().name}: {e.details()}", **where}})
            await asyncio.sleep(b.next())
        return []

    def call_try(self, task: workers_pb2.Task) -> float:
        """How long one try of an attempt's call waits (calltry.go)."""
        interval = task.heartbeat_interval_ms / 1000.0 or self.heartbeat_interval
        return min(max(interval, MIN_CALL_TRY), MAX_CALL_TRY, self.call_timeout)

    async def _send(self, fields: dict, what: str, try_: float, method: str, request: Any,
                    partition: Optional[int] = None) -> Any:
        """One attempt call, repeated with the same request (the same seq)
        across transient errors until the cluster answers. The first
        repeat goes out at once, later ones back off. Raises the cluster's
        definite refusal."""
        assert self.conn is not None
        b = _Backoff()
        tries = 0
        while True:
            tries += 1
            timeout = try_
            if self._report_deadline is not None:
                timeout = min(timeout, max(self._report_deadline - time.monotonic(), 0.01))
            try:
                resp = await self.conn.unary(workers_pb2_grpc.WorkerServiceStub, method, request, timeout,
                                             partition=partition)
                if tries > 1:
                    self.log.info(what + " went through after retries", extra={"fields": {**fields, "tries": tries}})
                return resp
            except grpc.RpcError as e:
                if not _transient(e) or (self._report_deadline is not None and time.monotonic() >= self._report_deadline):
                    raise
                if e.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
                    # The node took the whole try: it may be alive but slow;
                    # each timed-out try doubles the next, up to call_timeout.
                    try_ = min(2 * try_, max(self.call_timeout, try_))
                if tries == 1:
                    self.log.warning(what + ": cluster not reachable; retrying the same call",
                                     extra={"fields": {**fields, "error": f"{e.code().name}: {e.details()}"}})
                    continue
                await asyncio.sleep(b.next())

    async def _report(self, fields: dict, what: str, try_: float, ref: types_pb2.AttemptRef,
                      result: types_pb2.AttemptResult, partition: Optional[int] = None) -> None:
        await self._send(fields, what, try_, "ReportTask", workers_pb2.ReportTaskRequest(ref=ref, result=result),
                         partition)

    async def _hold(self, moment: str, task: workers_pb2.Task) -> None:
        if self.hold_hook is None:
            return
        if inspect.iscoroutinefunction(self.hold_hook):
            await self.hold_hook(moment, task)
        else:
            await asyncio.get_running_loop().run_in_executor(self._pool, self.hold_hook, moment, task)

    def _cannot_run(self, t: workers_pb2.Task) -> str:
        why = _route_problem(t)
        if why:
            return f"worker {self.id} cannot run a {_enum_name(types_pb2.StepKind, t.kind)} Step: {why}"
        if t.runner == workers_pb2.TASK_RUNNER_MODEL:
            if self._model is None:
                return f"worker {self.id} runs no model"
        elif t.tool not in self.tools:
            return f"worker {self.id} has no tool {t.tool!r}"
        return ""

    async def _run_task(self, t: workers_pb2.Task, partition: Optional[int] = None) -> None:
        ended = [TASK_REPORT_REFUSED]  # unless the task says otherwise
        try:
            await self._run_task_once(t, partition, ended)
        finally:
            if self.metrics is not None:
                self.metrics.task(t.kind, ended[0])

    async def _run_task_once(self, t: workers_pb2.Task, partition: Optional[int], ended: list) -> None:
        """Runs t; ended[0] is set to how it ended here (the tasks counter's outcome)."""
        ref = types_pb2.AttemptRef()
        ref.CopyFrom(t.ref)
        fields = {"worker": self.id, "session": t.session_id, "step": ref.step_id, "attempt": ref.attempt,
                  "kind": types_pb2.StepKind.Name(t.kind), "tool": t.tool}
        self.log.info("task received", extra={"fields": fields})
        try_ = self.call_try(t)

        # A task this Worker cannot run fails unclaimed: the call did not run.
        why = self._cannot_run(t)
        if why:
            ref.seq = 1
            try:
                await self._report(fields, "fail", try_, ref, _failure(types_pb2.ERROR_TYPE_UNSPECIFIED, why),
                                   partition)
            except grpc.RpcError as e:
                self.log.warning("fail refused", extra={"fields": {**fields, "error": e.details()}})
            self.log.error("cannot run task", extra={"fields": {**fields, "reason": why}})
            ended[0] = TASK_CANNOT_RUN
            return

        await self._hold(HOLD_BEFORE_CLAIM, t)
        ref.seq = 1
        try:
            await self._send(fields, "claim", try_, "ClaimTask", workers_pb2.ClaimTaskRequest(ref=ref), partition)
        except grpc.RpcError as e:
            self.log.warning("claim refused; dropping the task",
                             extra={"fields": {**fields, "error": f"{e.code().name}: {e.details()}"}})
            ended[0] = TASK_CLAIM_REFUSED
            return

        state: dict[str, Any] = {"done": False, "cancelled": "", "handler": None}
        cancel_event = threading.Event()

        def on_cancel(reason: str) -> None:
            if not state["done"] and not state["cancelled"]:
                state["cancelled"] = reason or "cancelled"
                cancel_event.set()
                if state["handler"] is not None:
                    state["handler"].cancel(msg="attempt cancelled")

        hb = asyncio.ensure_future(self._heartbeat(fields, t, on_cancel, partition))
        try:
            await self._hold(HOLD_AFTER_CLAIM, t)
            if state["cancelled"]:
                out = _Outcome(err=DexError("cancelled"))
            else:
                handler = asyncio.ensure_future(self._invoke(t, cancel_event, partition))
                state["handler"] = handler
                self._handlers[handler] = cancel_event
                started = time.monotonic()
                try:
                    await asyncio.wait({handler})
                finally:
                    self._handlers.pop(handler, None)
                out = handler.result() if not handler.cancelled() else _Outcome(err=_ShutdownCancel("cancelled"))
                if self.metrics is not None:
                    self.metrics.handled(t.kind, out.complete is not None, time.monotonic() - started)
            state["done"] = True
            if state["cancelled"]:
                self.log.warning("attempt cancelled by the cluster; dropped",
                                 extra={"fields": {**fields, "reason": state["cancelled"]}})
                ended[0] = TASK_CANCELLED
                return
            if out.ran:
                await self._hold(HOLD_BEFORE_RESULT, t)

            ref.seq = 2
            if out.complete is not None:
                try:
                    await self._report(fields, "complete", try_, ref, out.complete, partition)
                except grpc.RpcError as e:
                    if e.code() in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.RESOURCE_EXHAUSTED):
                        # The result itself was refused and nothing was logged:
                        # fail the attempt with the reason, under the same seq.
                        self.log.error("result refused; failing the attempt", extra={"fields": {**fields, "error": e.details()}})
                        out = _Outcome(err=DexError(f"result refused by the cluster: {e.details()}"))
                    else:
                        self.log.warning("complete refused; dropping the task",
                                         extra={"fields": {**fields, "error": f"{e.code().name}: {e.details()}"}})
                        return
                else:
                    hb.cancel()
                    self.log.info("task completed", extra={"fields": fields})
                    ended[0] = TASK_COMPLETED
                    await self._hold(HOLD_AFTER_RESULT_SENT, t)
                    return
            msg = str(out.err) or type(out.err).__name__
            try:
                await self._report(fields, "fail", try_, ref, _failure(out.error_type, msg, out.retry_after_ms),
                                   partition)
            except grpc.RpcError as e:
                self.log.warning("fail refused; dropping the task",
                                 extra={"fields": {**fields, "error": f"{e.code().name}: {e.details()}"}})
                return
            ended[0] = TASK_FAILED
            failed = {**fields, "error": msg, "error_type": types_pb2.ErrorType.Name(out.error_type)}
            if out.retry_after_ms:
                failed["retry_after_ms"] = out.retry_after_ms
            self.log.info("task failed", extra={"fields": failed})
        finally:
            hb.cancel()

    async def _call(self, fn: Callable[..., Any], arg: Any) -> Any:
        """Runs a handler: a coroutine function on the loop, a plain one in
        a thread (it learns of a cancellation from arg.cancelled) with the
        caller's context variables, as asyncio.to_thread does (the task's
        span among them)."""
        if inspect.iscoroutinefunction(fn):
            return await fn(arg)
        res = await asyncio.get_running_loop().run_in_executor(self._pool, contextvars.copy_context().run, fn, arg)
        if inspect.isawaitable(res):
            res = await res
        return res

    async def _invoke(self, t: workers_pb2.Task, cancel_event: threading.Event,
                      partition: Optional[int] = None) -> _Outcome:
        """Runs the handler for t, between its start and end lines in the
        execution ledger if there is one."""
        ran: list = []  # [True] once the handler is called
        line = start_line(t, self.id) if self.ledger is not None else None
        out = await self._invoke_ledgered(t, cancel_event, line, ran, partition)
        out.ran = bool(ran)
        if self.ledger is None or isinstance(out.err, _LedgerStartError):
            return out
        if out.complete is not None:
            outcome = "ok"
        elif cancel_event.is_set() or isinstance(out.err, _ShutdownCancel):
            outcome = "cancelled"
        else:
            outcome = "error"
        try:
            self.ledger.append({**line, "phase": "end", "outcome": outcome})
        except OSError as e:
            self.log.error("ledger end line not written", extra={"fields": {"step": t.ref.step_id, "error": str(e)}})
        return out

    async def _invoke_ledgered(self, t: workers_pb2.Task, cancel_event: threading.Event,
                               line: Optional[dict], ran: list, partition: Optional[int] = None) -> _Outcome:
        is_model = t.runner == workers_pb2.TASK_RUNNER_MODEL
        try:
            return await self._invoke_handler(t, cancel_event, line, ran, partition)
        except asyncio.CancelledError:
            # Cancelled by the cluster (dropped anyway) or by the Worker's
            # shutdown: reported untyped, as a crash would be.
            return _Outcome(err=_ShutdownCancel("the Worker cancelled the handler"))
        except Exception as e:  # a handler's error fails the attempt
            wait = 0
            if is_model:
                et = classify_error(e)
                # A rate_limit's Retry-After holds the session's provider (docs/flow-control.md).
                if et == types_pb2.ERROR_TYPE_RATE_LIMIT:
                    wait = retry_after_ms(retry_after_of(e))
            else:
                et = e.error_type if isinstance(e, ModelError) else types_pb2.ERROR_TYPE_UNSPECIFIED
            return _Outcome(err=e, error_type=et, retry_after_ms=wait)

    def _ledger_start(self, line: Optional[dict], ran: list) -> None:
        """Writes the start line right before a handler, then marks it run;
        a line that cannot be written fails the attempt unrun: the run would
        go uncounted."""
        if line is not None and self.ledger is not None:
            try:
                self.ledger.append(line)
            except OSError as e:
                raise _LedgerStartError(f"the handler did not run: its ledger start line was not written: {e}") from e
        ran.append(True)

    def _output_stream(self, t: workers_pb2.Task, partition: Optional[int]) -> Optional[OutputStream]:
        """The live output of t's attempt, sent by the sender of the
        partition it was polled from; None without a connection."""
        sender = self._output_sender(partition)
        return sender.open(t.ref) if sender is not None else None

    def _output_sender(self, partition: Optional[int]) -> Optional[OutputSender]:
        """The sender of the live output of the partition's attempts (None:
        a cluster of one partition), made on first use. Its calls carry the
        partition's metadata, as the partition's polls do, and go to its
        leader."""
        conn = self.conn
        if conn is None:
            return None
        loop = asyncio.get_running_loop()
        sender = self._output_senders.get(partition)
        if sender is not None and sender.loop is loop:
            return sender
        md = ((PARTITION_METADATA_KEY, str(partition)),) if partition is not None else ()
        timeout = min(self.call_timeout, STREAM_CALL_TIMEOUT)

        async def send(req: workers_pb2.AppendOutputsRequest) -> workers_pb2.AppendOutputsResponse:
            return await conn.unary(workers_pb2_grpc.WorkerServiceStub, "AppendOutputs", req, timeout,
                                    metadata=md, partition=partition)

        sender = self._output_senders[partition] = OutputSender(send, loop)
        return sender

    async def _invoke_handler(self, t: workers_pb2.Task, cancel_event: threading.Event,
                              line: Optional[dict], ran: list, partition: Optional[int] = None) -> _Outcome:
        a = t.ref.attempt
        if t.handler in _RUNNER_HANDLERS[workers_pb2.TASK_RUNNER_MODEL]:
            mi = ModelInput(session_id=t.session_id, step_id=t.ref.step_id, attempt=a,
                            history=list(t.model_input.history), tools=list(t.model_input.tools),
                            compact=t.model_input.compact, epoch=t.epoch, agent=t.agent, cancelled=cancel_event,
                            traceparent=t.traceparent)
            if t.handler == workers_pb2.TASK_HANDLER_MODEL:
                await self._hold(HOLD_BEFORE_MODEL, t)
                assert self._model is not None
                self._ledger_start(line, ran)
                mi._out = live = self._output_stream(t, partition)
                try:
                    with task_span(t, self.log):
                        mo = _as_model_output(await self._call(self._model, mi))
                    # The result waits (a while) for the streamed output to
                    # reach the leader, so watchers see it whole before it.
                    if live is not None:
                        await live.finish(STREAM_FLUSH)
                finally:
                    if live is not None:
                        live.stop()
                # The cluster refuses such an output; fail the attempt with the
                # reason instead of sending it (another try may do better).
                why = check_model_output(mo)
                if why:
                    raise ModelError(types_pb2.ERROR_TYPE_UNKNOWN, "the model handler's output was not sent: " + why)
                return _Outcome(complete=types_pb2.AttemptResult(model_output=mo))
            await self._hold(HOLD_DURING_COMPACTION, t)
            if self._compact is None:
                raise DexError("no compaction handler")
            self._ledger_start(line, ran)
            with task_span(t, self.log):
                summary = await self._call(self._compact, mi)
            return _Outcome(complete=types_pb2.AttemptResult(summary=str(summary or "")))
        tool = self.tools[t.tool]
        call = ToolCall(session_id=t.session_id, step_id=t.ref.step_id, call_id=t.call_id, tool=t.tool,
                        arguments=t.arguments, idempotency_key=t.idempotency_key, attempt=a, task_id=t.task_id,
                        access=t.access, epoch=t.epoch, agent=t.agent, cancelled=cancel_event,
                        traceparent=t.traceparent,
                        _ledger=(self.ledger, line) if line is not None and self.ledger is not None else None)
        if t.handler == workers_pb2.TASK_HANDLER_POLL:
            if tool.poll is None:
                raise DexError(f"tool {t.tool!r} has no poll handler")
            await self._hold(HOLD_DURING_POLL, t)
            self._ledger_start(line, ran)
            with task_span(t, self.log):
                res = await self._call(tool.poll, call)
            done, result = (res, None) if isinstance(res, bool) or res is None else res
            pr = types_pb2.PollResult(done=bool(done))
            if done:
                pr.result.CopyFrom(_as_tool_result(result).proto())
            return _Outcome(complete=types_pb2.AttemptResult(poll_result=pr))
        if t.handler != workers_pb2.TASK_HANDLER_TOOL:  # _cannot_run refused it first
            raise DexError(f"no handler {_enum_name(workers_pb2.TaskHandler, t.handler)}")
        await self._hold(HOLD_TOOL_RUNNING, t)
        self._ledger_start(line, ran)
        call._out = live = self._output_stream(t, partition)
        try:
            with task_span(t, self.log):
                res = _as_tool_result(await self._call(tool.run, call))
            if live is not None:
                await live.finish(STREAM_FLUSH)
        finally:
            if live is not None:
                live.stop()
        return _Outcome(complete=types_pb2.AttemptResult(tool_result=res.proto()))

    async def _heartbeat(self, fields: dict, t: workers_pb2.Task, cancel: Callable[[str], None],
                         partition: Optional[int] = None) -> None:
        """Keeps the attempt alive; calls cancel when the cluster says the
        attempt is no longer current."""
        assert self.conn is not None
        interval = t.heartbeat_interval_ms / 1000.0 or self.heartbeat_interval
        # Heartbeats carry the seq of the last logged call (the claim).
        ref = types_pb2.AttemptRef(step_id=t.ref.step_id, attempt=t.ref.attempt, token=t.ref.token, seq=1)
        req = workers_pb2.HeartbeatRequest(ref=ref)
        failing = False
        while True:
            await asyncio.sleep(interval)
            try:
                resp = await self.conn.unary(workers_pb2_grpc.WorkerServiceStub, "Heartbeat", req, self.call_try(t),
                                             partition=partition)
            except grpc.RpcError as e:
                if e.code() in (grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.NOT_FOUND):
                    cancel(e.details() or "")
                    return
                if not failing:
                    self.log.warning("heartbeat failed; going on",
                                     extra={"fields": {**fields, "error": f"{e.code().name}: {e.details()}"}})
                    failing = True
                continue
            if resp.cancelled:
                cancel(resp.reason)
                return
            if failing:
                self.log.info("heartbeats reach the cluster again", extra={"fields": fields})
                failing = False
