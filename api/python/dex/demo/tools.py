"""Demo tools, one per policy (cmd/dexworker/tools.go). Every execution
appends a ledger line before it does anything else. Arguments every tool
understands: "sleep_ms": N (run this long, cancellable), "fail_attempts": N
(attempts 1..N fail), "error_result": true (answer an error result)."""

from __future__ import annotations

import asyncio
import decimal
import hashlib
import json
from typing import Any, Optional

from dex.demo.ledger import Ledger
from dex.v1 import types_pb2
from dex.worker import ModelInput, ToolCall, ToolResult, Worker

BUILD_POLLS_RUNNING = 2  # polls of a build that report "running"


def _test_args(arguments: str) -> tuple[int, int, bool]:
    try:
        a = json.loads(arguments) if arguments else {}
    except ValueError:
        a = {}
    if not isinstance(a, dict):
        a = {}

    def num(k: str) -> int:
        v = a.get(k)
        return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else 0

    return num("sleep_ms"), num("fail_attempts"), a.get("error_result") is True


def go_float(x: float) -> str:
    """x as Go's strconv.FormatFloat(x, 'g', -1, 64) writes it."""
    if x != x:
        return "NaN"
    if x in (float("inf"), float("-inf")):
        return "+Inf" if x > 0 else "-Inf"
    if x == 0:
        return "-0" if str(x).startswith("-") else "0"
    d = decimal.Decimal(repr(x))
    sign, digits, exp = d.as_tuple()
    ds = "".join(map(str, digits)).rstrip("0") or "0"
    exp10 = len("".join(map(str, digits))) - 1 + int(exp)
    s = "-" if sign else ""
    if exp10 < -4 or exp10 >= 21:
        m = ds[0] + ("." + ds[1:] if len(ds) > 1 else "")
        return f"{s}{m}e{'-' if exp10 < 0 else '+'}{abs(exp10):02d}"
    if exp10 >= len(ds) - 1:
        return s + ds + "0" * (exp10 - len(ds) + 1)
    if exp10 >= 0:
        return s + ds[:exp10 + 1] + "." + ds[exp10 + 1:]
    return s + "0." + "0" * (-exp10 - 1) + ds


def calculate(arguments: str) -> tuple[str, bool]:
    try:
        c = json.loads(arguments)
        if not isinstance(c, dict):
            raise ValueError("want an object")
        a, b, op = float(c.get("a", 0)), float(c.get("b", 0)), c.get("op", "")
    except (ValueError, TypeError) as e:
        return f"calc: bad arguments: {e}", True
    if op in ("", "+"):
        return go_float(a + b), False
    if op == "-":
        return go_float(a - b), False
    if op == "*":
        return go_float(a * b), False
    return f'calc: unknown op "{op}"', True


class DemoTools:
    def __init__(self, ledger: Optional[Ledger], worker: str, poll_interval: float = 0.2,
                 run_timeouts: Optional[dict[str, float]] = None, agents: Optional[list[str]] = None) -> None:
        self.ledger, self.worker = ledger, worker
        self.agents = agents or []  # serve the tools only for these agents (none: every agent)
        self.poll_interval = poll_interval
        self.run_timeouts = run_timeouts or {}
        self.polls: dict[str, int] = {}

    #: name → (access, policy extras, description); calc is inline.
    SPECS: dict[str, tuple[str, dict, str]] = {
        "lookup": ("read", {}, "Looks something up."),
        "save_note": ("idempotent_write", {}, "Saves a note."),
        "send_email": ("single_attempt", {}, "Sends an email (not idempotent)."),
        "deploy": ("idempotent_write", {"needs_approval": True}, "Deploys a service; needs approval."),
        "build": ("idempotent_write", {"long_running": True},
                  "Starts a build and returns its task id; polled until done."),
        "calc": ("read", {"inline": True},
                 "Adds, subtracts or multiplies two numbers; inline: runs inside the model call."),
    }

    def register(self, w: Worker) -> None:
        handlers = {"lookup": self.simple("found"), "save_note": self.simple("saved"),
                    "send_email": self.simple("sent"), "deploy": self.simple("deployed"),
                    "build": self.build_start, "calc": self.calc_step}
        for name, (access, extra, desc) in self.SPECS.items():
            policy = dict(extra)
            if name == "build":
                policy["poll_interval"] = self.poll_interval
            w.add_tool(name, handlers[name], access=access, description=desc,
                       run_timeout=self.run_timeouts.get(name, 0.0), agents=self.agents, **policy)
        w.poll("build")(self.build_poll)

    async def begin(self, c: ToolCall, tool: str, kind: str) -> bool:
        """Records the execution and applies the test arguments; returns
        error_result."""
        sleep_ms, fail_attempts, error_result = _test_args(c.arguments)
        assert self.ledger is not None
        self.ledger.append(session=c.session_id, call_id=c.call_id, tool=tool, attempt=c.attempt,
                           idempotency_key=c.idempotency_key, step=c.step_id, kind=kind, task_id=c.task_id,
                           worker=self.worker, epoch=c.epoch)
        if sleep_ms > 0:
            await asyncio.sleep(sleep_ms / 1000.0)
        if c.attempt <= fail_attempts:
            raise RuntimeError(f"{tool}: scripted failure of attempt {c.attempt}")
        return error_result

    def simple(self, answer: str) -> Any:
        async def run(c: ToolCall) -> ToolResult:
            if await self.begin(c, c.tool, "tool"):
                return ToolResult(content=c.tool + " failed: scripted error result", is_error=True)
            return ToolResult(content=f"{answer} {c.arguments}")

        return run

    async def build_start(self, c: ToolCall) -> ToolResult:
        """The task id derives from the idempotency key, so every attempt of
        the call names the same task."""
        if await self.begin(c, c.tool, "tool"):
            return ToolResult(content="build failed to start", is_error=True)
        key = c.idempotency_key or f"{c.session_id}/{c.call_id}"
        tid = "build-" + hashlib.sha256(key.encode()).hexdigest()[:12]
        return ToolResult(content="build started: " + tid, task_id=tid)

    async def build_poll(self, c: ToolCall) -> tuple[bool, Optional[ToolResult]]:
        """"running" for the first polls of a task this process has seen, then done."""
        await self.begin(c, c.tool + ".poll", "poll")
        self.polls[c.task_id] = self.polls.get(c.task_id, 0) + 1
        if self.polls[c.task_id] <= BUILD_POLLS_RUNNING:
            return False, None
        return True, ToolResult(content=f"build {c.task_id} succeeded")

    async def calc_step(self, c: ToolCall) -> ToolResult:
        raise RuntimeError("calc is inline: it runs inside the model call, not as a Step")

    async def inline(self, mi: ModelInput, calls: Any) -> None:
        """Runs a model output's inline calls inside the RunModel attempt."""
        for r in calls:
            c = ToolCall(session_id=mi.session_id, step_id=mi.step_id, call_id=r.call_id, tool=r.tool,
                         arguments=r.arguments, idempotency_key="", attempt=mi.attempt, epoch=mi.epoch)
            error_result = await self.begin(c, r.tool, "inline")
            r.content, r.is_error = calculate(r.arguments)
            if error_result:
                r.content, r.is_error = r.tool + " failed: scripted error result", True
