"""Your first Dex Worker, with no provider key: a fake model that answers by
rules, and three tools.

    PYTHONPATH=api/python /usr/bin/python3 -m dex.examples.first_worker --addr dex:///127.0.0.1:7101,127.0.0.1:7102,127.0.0.1:7103

The fake model reads the last message of the turn:

- with the word "ask", it calls the built-in ask_user: the session waits for
  your answer (dexctl answer STEP TEXT, or the console);
- with the word "email", it calls send_email, which needs approval: the
  session waits for it (dexctl approve STEP / deny STEP, or the console);
- any other message is looked up (lookup, a read) and saved as a note
  (save_note, an idempotent write).

Once the tools have answered, it answers with what they said. To run a real
model next, replace fake_model with a call to your provider
(examples/openai_worker.py does it for an OpenAI-compatible API).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from typing import Optional

import dex
from dex.connection import parse_target
from dex.v1 import types_pb2

DEFAULT_ADDR = "dex:///127.0.0.1:7101,127.0.0.1:7102,127.0.0.1:7103"

_notes: dict[str, str] = {}  # save_note's store, by idempotency key


def fake_model(inp: dex.ModelInput):
    """The model's answer, decided by rules from the turn's history."""
    history = list(inp.history)
    users = [i for i, e in enumerate(history) if e.kind == types_pb2.HISTORY_KIND_USER]
    if not users:  # the messages were compacted into a summary
        return "Done."
    last = history[users[-1]]
    results = [e for e in history[users[-1] + 1:] if e.kind == types_pb2.HISTORY_KIND_TOOL_RESULT]
    if results:
        # Results arrive as the tools finish; the answer follows the calls' order.
        results.sort(key=lambda r: r.call_id)
        return "Done. " + " ".join(f"{r.tool}: {r.text}." for r in results)

    def call(n: int, tool: str, args: dict) -> dict:
        # A call id is unique in the session: the message's seq names the turn.
        return {"call_id": f"call-{last.seq}-{n}", "tool": tool, "arguments": args}

    if re.search(r"\bask\b", last.text, re.IGNORECASE):
        return dex.model_output("", [call(1, "ask_user", {"question": "Which city should I look up?"})])
    if re.search(r"\bemail\b", last.text, re.IGNORECASE):
        return dex.model_output("", [call(1, "send_email", {"to": "team@example.com", "body": last.text})])
    return dex.model_output("", [call(1, "lookup", {"query": last.text}), call(2, "save_note", {"note": last.text})])


def new_worker(addr: str, worker_id: str = "first-worker-py") -> dex.Worker:
    worker = dex.Worker(addr, id=worker_id)

    @worker.tool(access="read")
    def lookup(call: dex.ToolCall) -> str:
        """Looks something up. Arguments: {"query": "..."}."""
        return f"found {call.args.get('query', '')!r}"

    @worker.tool(access="idempotent_write")
    def save_note(call: dex.ToolCall) -> str:
        """Saves a note. Arguments: {"note": "..."}."""
        # A retried attempt carries the same key, so the note is saved once.
        _notes[call.idempotency_key] = call.args.get("note", "")
        return f"saved note {len(_notes)}"

    @worker.tool(access="single_attempt", needs_approval=True)
    def send_email(call: dex.ToolCall) -> str:
        """Sends an email; a person approves it first. Arguments: {"to": "...", "body": "..."}."""
        print(f"first_worker: email to {call.args.get('to')}: {call.args.get('body')}", file=sys.stderr, flush=True)
        return f"sent to {call.args.get('to')}"

    worker.model(fake_model)

    @worker.compactor
    def compact(inp: dex.ModelInput) -> str:
        return f"Summary of {len(inp.history)} earlier entries."

    return worker


def main(argv: Optional[list[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python3 -m dex.examples.first_worker",
                                description="A first Dex Worker with a fake model: no provider key needed.")
    p.add_argument("--addr", default=os.environ.get("DEX_ADDR", DEFAULT_ADDR),
                   help="the cluster: dex:///h1:p1,h2:p2,... or host:port (default $DEX_ADDR, else %(default)s)")
    p.add_argument("--id", default="first-worker-py", help="the Worker's id (default %(default)s)")
    a = p.parse_args(argv)
    try:
        parse_target(a.addr)
        worker = new_worker(a.addr, a.id)
        print(f"first_worker: serving lookup, save_note and send_email (needs approval) with a fake model for {a.addr}",
              file=sys.stderr, flush=True)
        worker.run_forever()  # until SIGINT or SIGTERM
    except dex.DexError as e:
        print(f"first_worker: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
