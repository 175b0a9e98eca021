"""Agents: a session names the agent that runs it (NAME or NAME@VERSION);
a Worker registers the agents whose model it runs and, per tool, the agents
it serves the tool for (none: every agent). The same checks as the cluster's
(fsm/agents.go), so a bad list is refused before the Worker starts."""

from __future__ import annotations

import re
from typing import Iterable

from dex.errors import DexError

MAX_ID_LENGTH = 200
_ID = re.compile(r"[A-Za-z0-9\-_.:@]+")
ID_CHARS = 'letters, digits and "-_.:@"'


def check_agent(agent: str) -> None:
    """Raises DexError unless agent is an id the cluster accepts ("" is the
    default agent)."""
    if agent == "":
        return
    if len(agent.encode()) > MAX_ID_LENGTH:
        raise DexError(f"agent {agent!r} is longer than {MAX_ID_LENGTH} bytes")
    if not _ID.fullmatch(agent):
        raise DexError(f"agent {agent!r}: use only {ID_CHARS}")
    if agent == "." or ".." in agent:
        raise DexError(f'agent {agent!r} must not be "." or hold ".."')


def agent_list(what: str, agents: Iterable[str]) -> list[str]:
    """The agents as a list, or DexError for an empty, bad or repeated name
    (what says whose: "worker agents", "tool 'x' agents")."""
    if isinstance(agents, str):
        raise DexError(f"{what}: give a list of agent names, not the string {agents!r}")
    out: list[str] = []
    for ag in agents:
        if not isinstance(ag, str) or ag == "":
            raise DexError(f"{what}: an empty agent name (list none for the default agent)")
        try:
            check_agent(ag)
        except DexError as e:
            raise DexError(f"{what}: {e}") from None
        if ag in out:
            raise DexError(f"{what}: agent {ag!r} is listed twice")
        out.append(ag)
    return out
