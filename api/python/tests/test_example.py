"""The README's provider example registers what it says (its LLM is never called)."""

import importlib.util
from pathlib import Path

from dex.v1 import types_pb2


def test_openai_worker_example_registers():
    p = Path(__file__).resolve().parents[1] / "examples" / "openai_worker.py"
    spec = importlib.util.spec_from_file_location("openai_worker", p)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    mod.worker.check()
    assert mod.worker.tools["weather"].spec.access == types_pb2.TOOL_ACCESS_READ
    assert "Tells the weather" in mod.worker.tools["weather"].spec.description
    msgs = mod._messages([types_pb2.HistoryEntry(kind=types_pb2.HISTORY_KIND_USER, text="hi")])
    assert msgs == [{"role": "user", "content": "hi"}]
