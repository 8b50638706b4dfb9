"""The result cache of read-only tools: ``@tool(read_only=True, cache=seconds)``.

A model often asks the same read-only question twice in one conversation (the weather of the city
it just looked up, the same search after a correction). A tool that declares ``cache=seconds``
answers a call with the same tool and the same *canonical* arguments (the parsed JSON, keys sorted,
so ``{"a":1,"b":2}`` and ``{ "b": 2, "a": 1 }`` are one question) from the stored result for that
long, without running. Only ``read_only`` tools may declare it (a side effect must happen each
time it is asked for; the declaration is refused otherwise), and only ``ok`` results are stored.

"The same tool" is the tool's identity (:func:`tool_identity`), not its name: the fingerprint of its
definition (name, description, schema) and of the function that runs it. Another function that is
also named ``search`` (another toolbox on the same ledger) never gets this one's answers. The
cache is the door's step after confirmation (``_executor.py``): a ``confirm=True`` tool that
declares a cache is asked every time, and only a yes is answered from the cache.

The cache belongs to the run's ledger scope: one ``ts.run`` with its own in-memory ledger has its
own cache; runs given the same ledger object (same ``scope``) share one, in this process. It is
bounded in entries and bytes (least recently used first out). A result taken from it has
``result.cached`` and ``result.timings.cached`` set, and its ``CallFinished`` event says so.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import threading
import weakref
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from ..core import ToolCall, now

__all__ = ["ResultCache", "cache_for", "cached", "canonical_key", "tool_identity"]

MAX_ENTRIES = 1024
MAX_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class _Entry:
    value: Any
    content: str
    expires_at: float
    size: int


_SERIALS = itertools.count(1)
_FUNCTIONS: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()
_FUNCTIONS_LOCK = threading.Lock()


def _function_serial(fn: Any) -> int | None:
    """A number of this function object's own for as long as it lives (never given to another):
    the same function in two toolboxes is one tool, two functions are two, even with one name.
    None when it cannot be referenced weakly (then its calls are not cached)."""
    with _FUNCTIONS_LOCK:
        try:
            found = _FUNCTIONS.get(fn)
            if found is None:
                found = _FUNCTIONS[fn] = next(_SERIALS)
        except Exception:  # not weakly referable, or a callable whose __hash__/__eq__ raises
            return None
        return found


def tool_identity(t: Any) -> str | None:
    """The identity of tool ``t`` for its cache: the fingerprint of its definition and the serial
    of its function (None: not cacheable)."""
    serial = _function_serial(t.fn)
    if serial is None:
        return None
    try:
        definition = json.dumps(t.definition(), sort_keys=True, separators=(",", ":"), default=repr)
    except (TypeError, ValueError):
        return None
    digest = hashlib.sha256(definition.encode("utf-8", "surrogatepass")).hexdigest()[:32]
    return f"{t.name}\x00{digest}\x00{serial}"


def canonical_key(t: Any, call: ToolCall | Any) -> str | None:
    """The cache key of a call to tool ``t``: the tool's identity (:func:`tool_identity`) and the
    call's parsed arguments as canonical JSON (None when either cannot be written so: such a call is
    not cached). ``call`` is anything with ``parsed``."""
    identity = tool_identity(t)
    if identity is None:
        return None
    try:
        arguments = json.dumps(call.parsed, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    except (TypeError, ValueError):
        return None
    return f"{identity}\x00{arguments}"


def cached(
    cache: ResultCache | None, t: Any, call: ToolCall | Any
) -> tuple[str | None, tuple[Any, str] | None]:
    """The cache key of a call to ``t`` and what the cache holds for it: ``(None, None)`` when the
    tool or the run keeps no cache (or the call cannot be keyed), ``(key, None)`` on a miss,
    ``(key, (value, content))`` on a hit. The one reading of the rule, for the door and for the
    loop's decision not to start early what the cache answers."""
    if cache is None or getattr(t, "cache", None) is None:
        return None, None
    key = canonical_key(t, call)
    if key is None:
        return None, None
    return key, cache.get(key)


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
