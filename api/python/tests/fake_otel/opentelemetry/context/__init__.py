"""opentelemetry.context, faked: the current context in a context variable."""

from __future__ import annotations

import contextvars
from typing import Any, Optional


class Context(dict):
    """An immutable-by-convention mapping, as the real one."""


_CURRENT: contextvars.ContextVar = contextvars.ContextVar("current_context", default=Context())


def get_current() -> Context:
    return _CURRENT.get()


def attach(context: Context) -> contextvars.Token:
    return _CURRENT.set(context)


def detach(token: contextvars.Token) -> None:
    _CURRENT.reset(token)


def get_value(key: str, context: Optional[Context] = None) -> Any:
    return (context if context is not None else get_current()).get(key)


def set_value(key: str, value: Any, context: Optional[Context] = None) -> Context:
    new = Context(context if context is not None else get_current())
    new[key] = value
    return new
