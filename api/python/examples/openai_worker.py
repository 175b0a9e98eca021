"""A Dex Worker with a real model: one tool and a model handler that calls an
OpenAI-compatible chat API ($OPENAI_API_KEY, $OPENAI_BASE_URL, $OPENAI_MODEL).

    PYTHONPATH=api/python /usr/bin/python3 api/python/examples/openai_worker.py
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request

import dex
from dex.v1 import types_pb2

TARGET = os.environ.get("DEX_ADDR", "dex:///127.0.0.1:7101,127.0.0.1:7102,127.0.0.1:7103")
worker = dex.Worker(TARGET, id="my-openai-worker")


@worker.tool(access="read")
def weather(call: dex.ToolCall) -> str:
    """Tells the weather of a city. Arguments: {"city": "Paris"}."""
    return f"Sunny in {call.args.get('city', 'nowhere')}"


def _messages(history) -> list:
    """Dex's history as chat messages."""
    out = []
    for e in history:
        if e.kind == types_pb2.HISTORY_KIND_USER:
            out.append({"role": "user", "content": e.text})
        elif e.kind == types_pb2.HISTORY_KIND_ASSISTANT:
            m = {"role": "assistant", "content": e.text or None}
            if e.tool_calls:
                m["tool_calls"] = [{"id": c.call_id, "type": "function",
                                    "function": {"name": c.tool, "arguments": c.arguments or "{}"}}
                                   for c in e.tool_calls]
            out.append(m)
        elif e.kind == types_pb2.HISTORY_KIND_TOOL_RESULT:
            out.append({"role": "tool", "tool_call_id": e.call_id, "content": e.text})
        elif e.text:  # notes and summaries
            out.append({"role": "system", "content": e.text})
    return out


def _tools(specs) -> list:
    return [{"type": "function", "function": {"name": t.name, "description": t.description,
                                              "parameters": {"type": "object"}}} for t in specs]


@worker.model
def model(inp: dex.ModelInput):
    """One chat completion. A plain function runs in a thread; an HTTP error
    becomes a ModelError with Dex's error type (429: rate_limit, ...) and,
    for a rate_limit, the answer's Retry-After."""
    body = {"model": os.environ.get("OPENAI_MODEL", "gpt-4o-mini"), "messages": _messages(inp.history)}
    if inp.tools:
        body["tools"] = _tools(inp.tools)
    req = urllib.request.Request(
        os.environ.get("OPENAI_BASE_URL", "https://api.openai.com/v1") + "/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Authorization": "Bearer " + os.environ["OPENAI_API_KEY"], "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            msg = json.load(r)["choices"][0]["message"]
    except urllib.error.HTTPError as e:
        raise dex.http_model_error(e.code, e.read().decode(errors="replace"), e.headers) from None
    return dex.model_output(msg.get("content") or "", [
        {"call_id": c["id"], "tool": c["function"]["name"], "arguments": c["function"]["arguments"]}
        for c in msg.get("tool_calls") or []])


@worker.compactor
def compact(inp: dex.ModelInput) -> str:
    return f"(summary of {len(inp.history)} earlier entries)"


if __name__ == "__main__":
    worker.run_forever()
