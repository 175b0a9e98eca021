"""The scripted, deterministic model (cmd/dexworker/script.go): its answer
depends only on the history it is sent and the attempt number. See
cmd/dexworker/README.md for the script format."""

from __future__ import annotations

import asyncio
import json
import os
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from dex.errors import ERROR_TYPES, ModelError
from dex.v1 import types_pb2
from dex.worker import ModelInput

INLINE_TOOLS = {"calc"}
FINAL_TEXT = "done"  # answers a turn whose outputs ran out

#: What every scripted model call reports it used, unless its output gives
#: "usage" (cmd/dexworker's DemoUsage): fixed figures, so that budgets can be tried.
DEMO_USAGE = {"input_tokens": 100, "output_tokens": 20, "cost_micros": 150}
#: The model name the scripted model reports.
DEMO_MODEL_NAME = "dex-demo"
_USAGE_FIELDS = {"input_tokens": int, "output_tokens": int, "cost_micros": int}
_MAX_UINT64 = 2**64 - 1
_MAX_INT64 = 2**63 - 1


class ScriptError(ValueError):
    pass


class _RawNumber(str):
    """A JSON number kept as written, so arguments compact as Go's
    json.Compact does."""


_ABSENT = object()


@dataclass
class Call:
    tool: str
    arguments: Any = _ABSENT
    call_id: str = ""


@dataclass
class Output:
    text: str = ""
    tool_calls: list = field(default_factory=list)
    inline: list = field(default_factory=list)
    error: Optional[dict] = None
    always: bool = False
    delay_ms: int = 0
    while_file: str = ""
    #: What the call reports it used (None: DEMO_USAGE); a field left out is 0.
    usage: Optional[dict] = None

    def usage_proto(self) -> types_pb2.Usage:
        """The call's usage on the wire, with the demo model's name."""
        u = DEMO_USAGE if self.usage is None else self.usage
        return types_pb2.Usage(input_tokens=u.get("input_tokens") or 0, output_tokens=u.get("output_tokens") or 0,
                               cost_micros=u.get("cost_micros") or 0, model=DEMO_MODEL_NAME)


@dataclass
class Turn:
    match: str
    outputs: list
    prefix: bool = False


@dataclass
class Script:
    turns: list = field(default_factory=list)
    default: list = field(default_factory=list)
    compact: list = field(default_factory=list)


def _fields(where: str, d: Any, known: dict[str, type]) -> dict:
    if not isinstance(d, dict):
        raise ScriptError(f"script: {where}: want a JSON object")
    for k, v in d.items():
        if k not in known:
            raise ScriptError(f'script: json: unknown field "{k}"')
        want = known[k]
        if want is not object and v is not None and not (isinstance(v, want) and not (want is int and isinstance(v, bool))):
            raise ScriptError(f"script: {where}: field {k!r} has the wrong type")
    return d


def _call(where: str, d: Any) -> Call:
    d = _fields(where, d, {"tool": str, "arguments": object, "call_id": str})
    return Call(tool=d.get("tool") or "", arguments=d.get("arguments", _ABSENT), call_id=d.get("call_id") or "")


def _usage(where: str, d: Any) -> Optional[dict]:
    if d is None:
        return None
    d = _fields(where + " usage", d, _USAGE_FIELDS)
    for k, v in d.items():
        if v is not None and not 0 <= v <= _MAX_UINT64:
            raise ScriptError(f"script: {where} usage: field {k!r} must be from 0 to 2**64-1, not {v}")
    return {k: v for k, v in d.items() if v is not None}


def _output(where: str, d: Any) -> Output:
    d = _fields(where, d, {"text": str, "tool_calls": list, "inline": list, "error": dict, "always": bool,
                           "delay_ms": int, "while_file": str, "usage": dict})
    err = d.get("error")
    if err is not None:
        err = _fields(where + " error", err, {"type": str, "message": str, "retry_after_ms": int})
    return Output(text=d.get("text") or "", tool_calls=[_call(where, c) for c in d.get("tool_calls") or []],
                  inline=[_call(where, c) for c in d.get("inline") or []], error=err, always=bool(d.get("always")),
                  delay_ms=d.get("delay_ms") or 0, while_file=d.get("while_file") or "",
                  usage=_usage(where, d.get("usage")))


def parse_script(text: str) -> Script:
    """Parses and checks a script."""
    try:
        raw = json.loads(text, parse_float=_RawNumber, parse_int=_RawNumber)
    except ValueError as e:
        raise ScriptError(f"script: {e}") from None
    raw = _numbers_for_fields(raw)
    d = _fields("the script", raw, {"turns": list, "default": list, "compact": list})
    s = Script()
    for i, t in enumerate(d.get("turns") or [], 1):
        t = _fields(f"turn {i}", t, {"match": str, "prefix": bool, "outputs": list})
        s.turns.append(Turn(match=t.get("match") or "", prefix=bool(t.get("prefix")),
                            outputs=[_output(f"turn {i}", o) for o in t.get("outputs") or []]))
    s.default = [_output("default", o) for o in d.get("default") or []]
    s.compact = [_output("compact", o) for o in d.get("compact") or []]

    def check(where: str, outs: list, model: bool) -> None:
        for i, o in enumerate(outs, 1):
            at_ = f"{where} output {i}"
            if o.error is None and not o.text and not o.tool_calls and not o.inline:
                raise ScriptError(f"script: {at_} has no text, tool call or error")
            if o.error is not None and (o.text or o.tool_calls or o.inline):
                raise ScriptError(f"script: {at_} has an error and an answer")
            if o.error is not None and (o.error.get("type") or "") not in ERROR_TYPES:
                raise ScriptError(f"script: {at_}: unknown error type {o.error.get('type')!r}")
            if o.error is not None and not 0 <= (o.error.get("retry_after_ms") or 0) <= _MAX_INT64:
                raise ScriptError(f"script: {at_}: retry_after_ms must be from 0 to 2**63-1, "
                                  f"not {o.error['retry_after_ms']}")
            if not model and (o.tool_calls or o.inline):
                raise ScriptError(f"script: {at_}: a compaction calls no tool")
            if o.delay_ms < 0:
                raise ScriptError(f"script: {at_}: negative delay_ms")
            for j, c in enumerate(o.tool_calls, 1):
                if not c.tool:
                    raise ScriptError(f"script: {at_} tool call {j} names no tool")
            for j, c in enumerate(o.inline, 1):
                if c.tool not in INLINE_TOOLS:
                    raise ScriptError(f"script: {at_} inline call {j}: {c.tool!r} is not an inline tool (known: calc)")

    for i, t in enumerate(s.turns, 1):
        where = f"turn {i} ({json.dumps(t.match)})"
        if not t.outputs:
            raise ScriptError(f"script: {where} has no outputs")
        check(where, t.outputs, True)
    check("default", s.default, True)
    check("compact", s.compact, False)
    return s


def _numbers_for_fields(v: Any, in_args: bool = False) -> Any:
    """Turns kept numbers back into ints outside tool arguments (delay_ms);
    arguments keep them as written."""
    if isinstance(v, dict):
        return {k: (v2 if k == "arguments" else _numbers_for_fields(v2)) for k, v2 in v.items()}
    if isinstance(v, list):
        return [_numbers_for_fields(x) for x in v]
    if isinstance(v, _RawNumber):
        if v.lstrip("-").isdigit():
            return int(v)  # exactly, however large (a usage count is up to 2**64-1)
        f = float(v)
        return int(f) if f == int(f) else f
    return v


def load_script(path: str) -> Script:
    with open(path, encoding="utf-8") as f:
        return parse_script(f.read())


def _compact_json(v: Any) -> str:
    if isinstance(v, _RawNumber):
        return str(v)
    if isinstance(v, dict):
        return "{" + ",".join(json.dumps(k, ensure_ascii=False) + ":" + _compact_json(x) for k, x in v.items()) + "}"
    if isinstance(v, list):
        return "[" + ",".join(_compact_json(x) for x in v) + "]"
    return json.dumps(v, ensure_ascii=False)


def compact_args(raw: Any, escaped_msg: str) -> str:
    """A call's arguments as compact JSON ("{}" when absent), with
    {{message}} replaced."""
    args = "{}" if raw is _ABSENT else _compact_json(raw)
    return args.replace("{{message}}", escaped_msg)


def go_json_string_body(s: str) -> str:
    """s escaped as Go's json.Marshal does, without the quotes."""
    out = json.dumps(s, ensure_ascii=False)[1:-1]
    for c, r in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("\u2028", "\\u2028"), ("\u2029", "\\u2029")):
        out = out.replace(c, r)
    return out


DEMO_OUTPUTS = [
    Output(tool_calls=[
        Call(tool="lookup", arguments={"query": "{{message}}"}),
        Call(tool="save_note", arguments={"note": "{{message}}"}),
        Call(tool="send_email", arguments={"to": "ops@example.com", "body": "{{message}}"}),
    ]),
    Output(text="Done: looked it up, saved a note and sent the email."),
]


def outputs_for(s: Optional[Script], msgs: list) -> list:
    if s is not None:
        for t in s.turns:
            for m in msgs:
                if m == t.match or (t.prefix and m.startswith(t.match)):
                    return t.outputs
        if s.default:
            return s.default
    return DEMO_OUTPUTS


def active(outs: list) -> list:
    """Leaves out the outputs whose while_file is missing."""
    return [o for o in outs if not o.while_file or os.path.exists(o.while_file)]


def pick(outs: list, n0: int, attempt: int) -> int:
    """The output index of a RunModel: each of the n0 committed outputs
    consumed one answer and the error outputs before it; each earlier
    attempt of this Step consumed one error output."""
    idx = 0
    for _ in range(n0):
        while idx < len(outs) and outs[idx].error is not None and not outs[idx].always:
            idx += 1
        idx += 1
    for _ in range(1, attempt):
        o = at(outs, idx)
        if o.error is not None and not o.always:
            idx += 1
    return idx


def at(outs: list, idx: int) -> Output:
    """Output idx, honouring always; past the end the turn answers text."""
    for i in range(min(len(outs), idx + 1)):
        if outs[i].always:
            return outs[i]
    if idx < len(outs):
        return outs[idx]
    return Output(text=FINAL_TEXT)


def turn_of(h: list) -> tuple[list, int, int]:
    """The turn in progress: its user messages, the outputs it already
    committed and the seq of the last history entry."""
    last = -1
    for i in range(len(h) - 1, -1, -1):
        if h[i].kind == types_pb2.HISTORY_KIND_USER:
            last = i
            break
    last_seq = h[-1].seq if h else 0
    if last < 0:
        # No user message after the summary: the summary stands for them.
        for i in range(len(h) - 1, -1, -1):
            if h[i].kind == types_pb2.HISTORY_KIND_SUMMARY:
                outputs = sum(1 for e in h[i + 1:] if e.kind == types_pb2.HISTORY_KIND_ASSISTANT)
                return [h[i].text], outputs, last_seq
        return [], 0, last_seq
    msgs: list = []
    i = last
    while i >= 0 and h[i].kind == types_pb2.HISTORY_KIND_USER:
        msgs.insert(0, h[i].text)
        i -= 1
    outputs = sum(1 for e in h[last + 1:] if e.kind == types_pb2.HISTORY_KIND_ASSISTANT)
    return msgs, outputs, last_seq


def script_error(e: dict) -> ModelError:
    """A scripted error; its retry_after_ms is the failure's Retry-After
    (reported for a rate_limit)."""
    t = e.get("type") or ""
    ms = e.get("retry_after_ms") or 0
    return ModelError(ERROR_TYPES[t], e.get("message") or f"scripted {t} error", ms / 1000 if ms else None)


#: --stream: how many bytes a delta holds and how often one goes out.
STREAM_DELTA = 8
STREAM_EVERY_MS = 10


async def wait_ms(ms: int) -> None:
    if ms > 0:
        await asyncio.sleep(ms / 1000.0)


class Model:
    """The scripted model: RunModel and Compact handlers."""

    def __init__(self, script: Optional[Script], ledger: Any, worker: str,
                 inline: Optional[Callable[..., Any]] = None, stream: bool = False,
                 stream_delta: int = STREAM_DELTA, stream_every_ms: int = STREAM_EVERY_MS) -> None:
        self.script, self.ledger, self.worker, self.inline = script, ledger, worker, inline
        # stream: the output's text goes out as live output first,
        # stream_delta bytes every stream_every_ms (--stream).
        self.stream, self.stream_delta, self.stream_every_ms = stream, stream_delta, stream_every_ms

    async def stream_text(self, mi: ModelInput, text: str) -> None:
        """Streams text in small deltas, as a model writes it."""
        b = text.encode()
        while b:
            n = min(self.stream_delta, len(b))
            while n < len(b) and b[n] & 0xC0 == 0x80:
                n += 1  # a delta ends on a character's end
            mi.stream(b[:n].decode())
            b = b[n:]
            await wait_ms(self.stream_every_ms)

    def _record(self, kind: str, mi: ModelInput) -> None:
        self.ledger.append(session=mi.session_id, tool=kind, attempt=mi.attempt, step=mi.step_id, kind=kind,
                           worker=self.worker, epoch=mi.epoch, agent=mi.agent)

    def output(self, mi: ModelInput) -> tuple[Output, Optional[types_pb2.ModelOutput], Optional[ModelError]]:
        """The model output for mi, without side effects."""
        msgs, n0, last_seq = turn_of(mi.history)
        outs = active(outputs_for(self.script, msgs))
        o = at(outs, pick(outs, n0, mi.attempt))
        if o.error is not None:
            return o, None, script_error(o.error)
        msg = msgs[-1] if msgs else ""
        escaped = go_json_string_body(msg)
        out = types_pb2.ModelOutput(text=o.text.replace("{{message}}", msg), usage=o.usage_proto())
        for i, c in enumerate(o.tool_calls, 1):
            out.tool_calls.append(types_pb2.ToolCall(call_id=c.call_id or f"call-{last_seq}-{i}", tool=c.tool,
                                                     arguments=compact_args(c.arguments, escaped)))
        for i, c in enumerate(o.inline, 1):
            out.inline_results.append(types_pb2.InlineResult(call_id=c.call_id or f"inline-{last_seq}-{i}", tool=c.tool,
                                                             arguments=compact_args(c.arguments, escaped)))
        return o, out, None

    async def run_model(self, mi: ModelInput) -> types_pb2.ModelOutput:
        self._record("model", mi)
        o, out, err = self.output(mi)
        await wait_ms(o.delay_ms)
        if err is not None:
            raise err
        assert out is not None
        if self.stream:
            await self.stream_text(mi, out.text)
        if out.inline_results:
            if self.inline is None:
                raise RuntimeError("inline calls but no inline tool runner")
            # Inline tools run inside this RunModel attempt: a rerun runs them again.
            await self.inline(mi, out.inline_results)
        return out

    async def compact(self, mi: ModelInput) -> str:
        self._record("compact", mi)
        summary = f"Summary of {len(mi.history)} entries."
        if self.script is None or not self.script.compact:
            return summary
        o = at(self.script.compact, mi.attempt - 1)
        await wait_ms(o.delay_ms)
        if o.error is not None:
            raise script_error(o.error)
        if not o.text or (mi.attempt > len(self.script.compact) and not o.always):
            return summary
        msgs, _, _ = turn_of(mi.history)
        return o.text.replace("{{message}}", msgs[-1] if msgs else "")
