"""Reading one raw value of a chunk: pure decisions about a single field, shared by the reader.

Every provider quirk of *shape* that concerns one value is decided here, once (rule 8 of
docs/design.md: each repair is recorded as an :class:`Anomaly`):

* **Written once, cleaned** (Q07-Q10, Q13, Q37). ``""``, ``null`` and ``"null"`` count as absent; an
  integer id becomes a string. An ``index`` is a non-negative integer; a plain ASCII decimal string
  of at most 9 digits (``"0"``) or an integral float is read as one (noted); anything else (``-1``,
  ``"²"``, ``"①"``, a 5,000-digit string, a bool) is unusable and read as missing (noted).
* **Arguments are text** (Q18, Q19). A JSON object is serialised once (noted); a value that is not
  JSON (a set, NaN, a non-string key, nesting beyond ``Limits.max_depth``) cannot be used.
* **Fields of any object** (:func:`read_object`): a ``dict`` as decoded from SSE, or a pydantic model,
  the SDK's own or a subclass that keeps its fields among pydantic's extras (LiteLLM's chunks).
"""

from __future__ import annotations

import json
import math
from operator import itemgetter
from typing import Any

from pydantic import BaseModel

from ._anomaly import Anomaly, AnomalyCode, show

__all__ = [
    "CHUNK_KEYS",
    "DELTA_KEYS",
    "FUNCTION_KEYS",
    "MAX_IDENTITY",
    "MAX_INDEX",
    "MAX_LABEL",
    "REASONING_FIELDS",
    "TOOL_CALL_KEYS",
    "Shape",
    "clean_str",
    "json_text",
    "opt_int",
    "opt_str",
    "read_index",
    "read_object",
    "show",
]

TOOL_CALL_KEYS = frozenset({"index", "id", "type", "function"})
FUNCTION_KEYS = frozenset({"name", "arguments"})
DELTA_KEYS = frozenset({"role", "content", "refusal", "tool_calls", "function_call"})
REASONING_FIELDS = frozenset({"reasoning_content", "reasoning", "reasoning_text", "thinking"})
"""Delta fields whose text is streamed in pieces and concatenated into the final message (Q29):
DeepSeek, xAI and Kimi use ``reasoning_content``; vLLM, Groq, Cerebras and OpenRouter ``reasoning``."""
CHUNK_KEYS = frozenset(
    {
        "id",
        "object",
        "created",
        "model",
        "system_fingerprint",
        "service_tier",
        "usage",
        "choices",
        # Per-chunk noise that has no meaning for the finished completion.
        "obfuscation",
    }
)
MAX_INDEX = 2**31
"""Indexes at or above this are unusable: no real stream has that many calls or choices."""
MAX_INDEX_DIGITS = 9
MAX_IDENTITY = 1024
"""Characters of an id or function name beyond which it is unusable (OpenAI allows 64 for a name)."""
MAX_LABEL = 64
"""Characters of a ``type``, ``role`` or ``finish_reason`` beyond which it is read as absent."""


def read_index(value: Any) -> tuple[int | None, str | None]:
    """``(index, note)``: a usable index (None when unusable), and what was repaired or refused."""
    kind = type(value)
    if kind is int:
        if 0 <= value < MAX_INDEX:
            return value, None
        return None, f"unusable index {show(value)}"
    if kind is str:
        if 0 < len(value) <= MAX_INDEX_DIGITS and value.isascii() and value.isdigit():
            return int(value), "index was a string"
        return None, f"unusable index {show(value)}"
    if kind is float and math.isfinite(value) and value.is_integer() and 0 <= value < MAX_INDEX:
        return int(value), "index was a float"
    return None, f"unusable index {show(value)}"


_MODEL_TYPES: dict[type, bool] = {}
"""Which types are pydantic models, remembered: ``isinstance(obj, BaseModel)`` goes through
pydantic's metaclass in Python (about 0.3 us), several times per chunk."""
_MAX_MODEL_TYPES = 1024


def _is_model(kind: type) -> bool:
    model = issubclass(kind, BaseModel)
    if len(_MODEL_TYPES) < _MAX_MODEL_TYPES:  # bounded: a caller could make types without end
        _MODEL_TYPES[kind] = model
    return model


class Shape:
    """One kind of JSON object the reader reads: the keys it knows there, and the ones it takes."""

    __slots__ = ("known", "names", "take")

    def __init__(self, known: frozenset[str], names: tuple[str, ...]) -> None:
        self.known = known
        self.names = names
        self.take = itemgetter(*names)


def read_object(obj: Any, shape: Shape) -> tuple[dict[str, Any], dict[str, Any] | None, Any] | None:
    """``(fields, unknown, values)`` of a JSON object, or None when ``obj`` is not an object.

    ``fields`` holds every field by name: a ``dict`` is itself; a pydantic model keeps its declared
    fields in ``__dict__`` (read whole, rather than with ``getattr`` per field: that keeps reading
    cheap per chunk, rule 7) and any other field in ``__pydantic_extra__``, and a model that keeps
    the chunk's own fields there (LiteLLM's chunk classes subclass ``openai.BaseModel`` that way)
    is read through both, the declared value winning unless it is None. Anything else (a list, a
    string, an object of another kind) is not an object.

    ``unknown`` holds the non-null fields outside ``shape.known`` (None when there are none): for
    the SDK's own models only their extras can be (a declared field of a newer SDK release that
    toolstitch does not know is left to the SDK). ``null`` values carry nothing and are dropped,
    so that a provider's ``"name": null`` beside a tool call (Fireworks) or ``"error": null`` on a
    chunk (Foundry Local) is not replayed in history.

    ``values`` are the fields ``shape.names`` (None where absent), in one C call when all are there
    (always so for the SDK's own models).
    """
    # The usual objects (the SDK's own models, and dicts of known keys only) take the short path;
    # the rest is in helpers, so that this function makes no closure cells (three allocations per
    # call in CPython 3.11, several calls per chunk).
    kind = type(obj)
    if kind is dict:
        if not obj.keys() <= shape.known:
            return obj, _unknown(obj, shape.known), _values(obj, shape)
        fields = obj
    else:
        model = _MODEL_TYPES.get(kind)
        if model is None:
            model = _is_model(kind)
        if not model:
            return None
        fields = obj.__dict__
        extra = obj.__pydantic_extra__
        if extra:
            fields = _with_extra(fields, extra)
            return fields, _unknown(extra, shape.known), _values(fields, shape)
    try:
        return fields, None, shape.take(fields)
    except KeyError:
        return fields, None, _values(fields, shape)


def _unknown(fields: dict[str, Any], known: frozenset[str]) -> dict[str, Any] | None:
    """The non-null fields outside ``known`` (None when there are none)."""
    return {k: v for k, v in fields.items() if k not in known and v is not None} or None


def _with_extra(declared: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """A model's declared fields and its extras, the declared value winning unless it is None."""
    fields = dict(extra)
    fields.update({k: v for k, v in declared.items() if v is not None or k not in extra})
    return fields


def _values(fields: dict[str, Any], shape: Shape) -> Any:
    """The fields ``shape.names`` (None where absent)."""
    try:
        return shape.take(fields)
    except KeyError:
        get = fields.get
        return tuple(get(name) for name in shape.names)


def opt_str(value: Any) -> str | None:
    return value if type(value) is str and value else None


def opt_int(value: Any) -> int | None:
    return value if type(value) is int and 0 <= value < 2**63 else None


def clean_str(value: Any, what: str, anomalies: list[Anomaly], raw: Any) -> tuple[str | None, str | None]:
    """``(text, unreadable)`` for an ``id`` or function ``name``: a usable non-empty string or None,
    and why the value could not be read when it was dropped (the call is then refused).

    ``""`` and ``"null"`` count as absent (providers send them on continuations; noted); an
    integer id becomes a string (noted). A name over ``MAX_IDENTITY`` characters or a value of
    another type is dropped and unreadable. Ids are not bounded here: real ones can be long
    (Gemini's thought signature rides in LiteLLM's ids), and the owner of the call bounds them by
    ``Limits.max_id_chars`` (``_owner.py``), naming the id in its refusal.
    """
    if type(value) is str:
        if value == "":
            anomalies.append(Anomaly(AnomalyCode.EMPTY_STRING_FIELD, f"{what} was an empty string", raw=raw))
            return None, None
        if value == "null":
            anomalies.append(Anomaly(AnomalyCode.NULL_STRING_FIELD, f'{what} was the string "null"', raw=raw))
            return None, None
        if len(value) > MAX_IDENTITY and what not in ("id", "call_id"):
            # No real id or function name is this long; keeping it would let identity fields grow
            # memory past every limit.
            anomalies.append(
                Anomaly(
                    AnomalyCode.MALFORMED_CHUNK, f"{what} of {len(value)} characters is unusable", raw=raw
                )
            )
            return None, f"its {what} of {len(value)} characters is unusable"
        return value, None
    if what == "id" and type(value) is int and -(10**40) < value < 10**40:
        anomalies.append(Anomaly(AnomalyCode.ID_NOT_STRING, "id was an integer", raw=raw))
        return str(value), None
    anomalies.append(Anomaly(AnomalyCode.MALFORMED_CHUNK, f"{what} was a {type(value).__name__}", raw=raw))
    return None, f"its {what} was a {type(value).__name__}"


def json_text(value: Any, max_depth: int) -> tuple[str | None, str | None]:
    """``(text, None)`` for a JSON value sent as an object, or ``(None, why)`` when it is not JSON.

    Only what JSON can hold is accepted (objects with string keys, arrays, strings, finite numbers,
    booleans, null), nested at most ``max_depth`` deep: ``json.dumps`` alone would turn a non-string
    key or NaN into text that says something else, or fail deep inside.
    """
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        kind = type(item)
        if kind is str or kind is int or kind is bool or item is None:
            continue
        if kind is float:
            if not math.isfinite(item):
                return None, f"arguments hold {item!r}, which JSON cannot express"
            continue
        if depth > max_depth:
            return None, f"arguments are nested deeper than {max_depth} levels"
        if kind is dict:
            for key, inner in item.items():
                if type(key) is not str:
                    return None, f"arguments hold a key of type {type(key).__name__}, not a string"
                stack.append((inner, depth + 1))
        elif kind is list:
            stack.extend((inner, depth + 1) for inner in item)
        else:
            return None, f"arguments hold a {kind.__name__}, which is not a JSON value"
    return json.dumps(value, ensure_ascii=False, allow_nan=False), None
