"""The result cache of read-only tools: ``@tool(read_only=True, cache=seconds)``.

A model often asks the same read-only question twice in one conversation (the weather of the city
it just looked up, the same search after a correction). A tool that declares ``cache=seconds``
answers a call with the same tool and the same *canonical* arguments (the parsed JSON, keys sorted,
so ``{"a":1,"b":2}`` and ``{ "b": 2, "a": 1 }`` are one question) from the stored result for that
long, without running. Only ``read_only`` tools may declare it (a side effect must happen each
time it is asked for; the declaration is refused otherwise), and only ``ok`` results are stored.

The cache belongs to the run's ledger scope: one ``ts.run`` with its own in-memory ledger has its
own cache; runs given the same ledger object (same ``scope``) share one, in this process. It is
bounded in entries and bytes (least recently used first out). A result taken from it has
``result.cached`` and ``result.timings.cached`` set, and its ``CallFinished`` event says so.
"""

from __future__ import annotations

import json
import threading
import weakref
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from ..core import ToolCall, now

__all__ = ["ResultCache", "cache_for"]

MAX_ENTRIES = 1024
MAX_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class _Entry:
    value: Any
    content: str
    expires_at: float
    size: int


def canonical_key(name: str, call: ToolCall | Any) -> str | None:
    """The cache key of a call: the tool's name and its parsed arguments as canonical JSON (None
    when they cannot be written so: such a call is not cached). ``call`` is anything with
    ``parsed``."""
    try:
        arguments = json.dumps(call.parsed, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    except (TypeError, ValueError):
        return None
    return f"{name}\x00{arguments}"


class ResultCache:
    """Stored ``ok`` results by (tool, canonical arguments), each for its tool's ``cache`` seconds;
    at most ``max_entries`` entries and ``max_bytes`` of keys and contents. Thread-safe."""

    def __init__(self, *, max_entries: int = MAX_ENTRIES, max_bytes: int = MAX_BYTES) -> None:
        if max_entries < 1 or max_bytes < 1:
            raise ValueError("max_entries and max_bytes must be at least 1")
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self.bytes = 0
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: str) -> tuple[Any, str] | None:
        """``(value, content)`` stored under ``key`` and not expired, or None."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            if entry.expires_at <= now():
                self._drop(key)
                return None
            self._entries.move_to_end(key)
            return entry.value, entry.content

    def put(self, key: str, value: Any, content: str, seconds: float) -> None:
        """Store a result for ``seconds``; one larger than the whole bound is not stored."""
        size = len(key.encode("utf-8", "replace")) + len(content.encode("utf-8", "replace"))
        if size > self.max_bytes:
            return
        with self._lock:
            if key in self._entries:
                self._drop(key)
            self._entries[key] = _Entry(value, content, now() + seconds, size)
            self.bytes += size
            while len(self._entries) > self.max_entries or self.bytes > self.max_bytes:
                self._drop(next(iter(self._entries)))

    def _drop(self, key: str) -> None:
        entry = self._entries.pop(key)
        self.bytes -= entry.size


_BY_LEDGER: weakref.WeakKeyDictionary[Any, dict[str, ResultCache]] = weakref.WeakKeyDictionary()
_BY_LEDGER_LOCK = threading.Lock()


def cache_for(ledger: Any) -> ResultCache:
    """The cache of ``ledger``'s scope (made on first use, gone with the ledger object)."""
    scope = getattr(ledger, "scope", "")
    scope = scope if isinstance(scope, str) else ""
    with _BY_LEDGER_LOCK:
        try:
            caches = _BY_LEDGER.setdefault(ledger, {})
        except TypeError:  # a ledger that cannot be referenced weakly: a cache of its own run
            return ResultCache()
        found = caches.get(scope)
        if found is None:
            found = caches[scope] = ResultCache()
        return found
