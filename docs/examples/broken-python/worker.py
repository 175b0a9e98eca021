"""The Worker of ../python/worker.py, broken on purpose in two ways that
`dexchaos certify` must catch (see README.md). Everything else is reused."""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))

import dex  # noqa: E402
import worker as example  # noqa: E402  ../python/worker.py


def send_invoice(call: dex.ToolCall) -> str:
    """Sends the invoice of an order (amount in cents)."""
    a = call.args
    key = ""  # BROKEN: ignores call.idempotency_key, so every retry sends another invoice
    dex.side_effect(call, "invoice", key)
    return "sent " + example.create_invoice(key, a.get("order_id", ""), int(a.get("amount_cents", 0)))


TOOLS = {
    **example.TOOLS,
    "send_invoice": (send_invoice, "idempotent_write"),
    "charge_card": (example.charge_card, "read"),  # BROKEN: tools.json says single_attempt; read lets Dex run it twice
}

if __name__ == "__main__":
    example.main(TOOLS)
