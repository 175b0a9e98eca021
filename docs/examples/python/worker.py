"""A Dex Worker for an order desk: a model behind the OpenAI Chat Completions
API and three tools, one of each policy. Run it with the Dex Python library
on PYTHONPATH (see README.md):

    OPENAI_API_KEY=sk-... python3 worker.py

Environment: DEX_ADDR (the cluster), DEX_TOKEN (an ACL token, read by the
library), DEX_WORKER_ID (this Worker's id), OPENAI_BASE_URL, OPENAI_API_KEY,
OPENAI_MODEL, INVOICE_STORE (the invoice system's file).
"""

from __future__ import annotations

import fcntl
import json
import os
import sys
import tempfile
import uuid

import httpx

import dex
from dex.v1 import types_pb2

DEX_ADDR = os.environ.get("DEX_ADDR", "dex:///127.0.0.1:7101,127.0.0.1:7102,127.0.0.1:7103")
INVOICE_STORE = os.environ.get("INVOICE_STORE") or os.path.join(tempfile.gettempdir(), "dex-example-invoices.json")


# The invoice system: a JSON file of invoices keyed by idempotency key. A
# request with a key it has seen gets the same invoice back; one without a
# key makes a new invoice every time.
def create_invoice(key: str, order_id: str, amount_cents: int) -> str:
    key = key or "no-key-" + uuid.uuid4().hex
    with open(INVOICE_STORE + ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # other Workers may share the file
        try:
            with open(INVOICE_STORE) as f:
                invoices = json.load(f)
        except FileNotFoundError:
            invoices = {}
        if key not in invoices:
            invoices[key] = {"invoice": f"INV-{len(invoices) + 1}", "order_id": order_id, "amount_cents": amount_cents}
            with open(INVOICE_STORE + ".tmp", "w") as f:
                json.dump(invoices, f, indent=1)
            os.replace(INVOICE_STORE + ".tmp", INVOICE_STORE)
        return invoices[key]["invoice"]


def lookup_order(call: dex.ToolCall) -> str:
    """Looks an order up by its id."""
    return json.dumps({"order_id": call.args.get("order_id", ""), "status": "shipped", "amount_cents": 1250})


def send_invoice(call: dex.ToolCall) -> str:
    """Sends the invoice of an order (amount in cents)."""
    a = call.args
    key = call.idempotency_key  # the same in every attempt of this call: a retry sends no second invoice
    # Reported before it is made, so a crash in between cannot hide it.
    dex.side_effect(call, "invoice", key)
    return "sent " + create_invoice(key, a.get("order_id", ""), int(a.get("amount_cents", 0)))


def charge_card(call: dex.ToolCall) -> str:
    """Charges the card on file for an order (amount in cents)."""
    a = call.args
    dex.side_effect(call, "charge", "")  # the card network takes no key: never run it twice
    return f"charged {a.get('amount_cents', 0)} cents for order {a.get('order_id', '')}"


# Each tool with its policy: what Dex may do when an attempt fails or its
# Worker dies (read: run it again; idempotent_write: run it again with the
# same key; single_attempt: never run it twice).
TOOLS = {
    "lookup_order": (lookup_order, "read"),
    "send_invoice": (send_invoice, "idempotent_write"),
    "charge_card": (charge_card, "single_attempt"),
}

# The arguments of each tool, as JSON Schema for the model.
PARAMETERS = {
    "lookup_order": {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]},
    "send_invoice": {"type": "object", "properties": {"order_id": {"type": "string"}, "amount_cents": {"type": "integer"}},
                     "required": ["order_id", "amount_cents"]},
    "charge_card": {"type": "object", "properties": {"order_id": {"type": "string"}, "amount_cents": {"type": "integer"}},
                    "required": ["order_id", "amount_cents"]},
}


def messages(history: list) -> list:
    """A session's history as Chat Completions messages."""
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


async def model(inp: dex.ModelInput):
    """One model call: the history and the tools in, text or tool calls out."""
    body = {"model": os.environ.get("OPENAI_MODEL", "gpt-4o-mini"), "messages": messages(inp.history),
            "tools": [{"type": "function", "function": {"name": t.name, "description": t.description,
                                                         "parameters": PARAMETERS.get(t.name, {"type": "object"})}}
                      for t in inp.tools]}
    url = os.environ.get("OPENAI_BASE_URL", "https://api.openai.com/v1").rstrip("/") + "/chat/completions"
    headers = {"Authorization": "Bearer " + os.environ.get("OPENAI_API_KEY", "")}
    try:
        async with httpx.AsyncClient(timeout=120) as client:
            r = await client.post(url, json=body, headers=headers)
    except httpx.TimeoutException as e:
        raise dex.ModelError("timeout", f"{url}: {e!r}") from None
    except httpx.TransportError as e:
        raise dex.ModelError("network", f"{url}: {e!r}") from None
    if r.status_code >= 400:
        # 429 → rate_limit (with its Retry-After), 400 "context length" → context_length, 5xx → server_error, ...
        raise dex.http_model_error(r.status_code, r.text, r.headers)
    answer = r.json()
    msg = answer["choices"][0]["message"]
    used = answer.get("usage") or {}
    return dex.model_output(msg.get("content") or "", [
        {"call_id": c["id"], "tool": c["function"]["name"], "arguments": c["function"]["arguments"]}
        for c in msg.get("tool_calls") or []],
        usage={"input_tokens": used.get("prompt_tokens", 0), "output_tokens": used.get("completion_tokens", 0),
               "model": answer.get("model", body["model"])})


def compact(inp: dex.ModelInput) -> str:
    """A long session's earlier history, summarised (a model call would do better)."""
    return "Earlier in this session: " + " / ".join(e.text[:200] for e in inp.history if e.text)[-2000:]


def new_worker(tools: dict = TOOLS) -> dex.Worker:
    worker = dex.Worker(DEX_ADDR, id=os.environ.get("DEX_WORKER_ID", ""))
    for name, (fn, access) in tools.items():
        worker.add_tool(name, fn, access=access, description=fn.__doc__ or "")
    worker.model(model)
    worker.compactor(compact)
    return worker


def main(tools: dict = TOOLS) -> None:
    if not os.environ.get("OPENAI_API_KEY"):
        sys.exit("worker: set OPENAI_API_KEY (and OPENAI_BASE_URL for another provider of the API)")
    try:
        new_worker(tools).run_forever()  # until SIGINT or SIGTERM
    except dex.DexError as e:  # a bad setting, or the cluster refused a tool's policy
        sys.exit(f"worker: {e}")


if __name__ == "__main__":
    main()
