"""Helpers shared by the tool, gate, executor, ledger and run-loop tests."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import toolstitch as ts
from toolstitch.testing import StreamScript, chunk, tool_call_chunks


def sealed(
    calls: Sequence[tuple[str, str, str]],
    tools: Sequence[Any] | None = None,
    *,
    finish_reason: str | None = "tool_calls",
) -> list[ts.ToolCall]:
    """Calls as the core makes them: a realistic stream fed through a real Accumulator, then ended."""
    acc = ts.Accumulator(tools)
    for c in tool_call_chunks(calls, finish_reason=finish_reason):
        acc.feed(c)
    acc.end()
    return acc.tool_calls


class Recorder:
    """A thread-safe log of what the tools really ran with."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.calls: list[tuple[str, Any]] = []

    def add(self, name: str, value: Any = None) -> None:
        with self._lock:
            self.calls.append((name, value))

    def names(self) -> list[str]:
        with self._lock:
            return [n for n, _ in self.calls]

    def count(self, name: str) -> int:
        return self.names().count(name)


def text_reply(text: str) -> StreamScript:
    """A streamed plain answer (no tool calls)."""
    return StreamScript(
        [chunk(delta={"role": "assistant", "content": text}), chunk(delta={}, finish_reason="stop")]
    )


def calls_reply(calls: Sequence[tuple[str, str, str]], **kw: Any) -> StreamScript:
    """A streamed answer with these tool calls ``(id, name, arguments_text)``."""
    return StreamScript(tool_call_chunks(calls), **kw)


def tool_messages_of(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The tool messages of a request body, in order."""
    return [m for m in body.get("messages") or [] if m.get("role") == "tool"]


def user(text: str = "hi") -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


def first_chunk_of(chunks: Sequence[Any], call_id: str) -> int:
    """The number of the first chunk that carries the call ``call_id`` (its first fragment): a
    ``StreamScript.hold`` there keeps the rest of the stream back until an event."""
    for n, item in enumerate(chunks):
        for choice in item.get("choices") or () if isinstance(item, dict) else ():
            for piece in (choice.get("delta") or {}).get("tool_calls") or ():
                if piece.get("id") == call_id:
                    return n
    raise ValueError(f"no chunk carries {call_id}")
