"""Bounds that keep one misbehaving stream from exhausting memory or time.

Defaults are generous enough for agents that write whole files through a tool call, and small enough
that a runaway or hostile stream is stopped long before it hurts the process.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any

from pydantic import BaseModel

__all__ = ["Limits", "retained", "sample"]


@dataclass(frozen=True, slots=True)
class Limits:
    """Per-stream bounds. Every value must be a positive integer (``ValueError`` otherwise).

    What happens at each bound (the stream keeps flowing in every case; the SDK's chunks still pass
    through unchanged, and an anomaly ``limit_exceeded`` says which bound was hit):

    * ``max_argument_bytes``: the call becomes ``invalid`` with ``LimitExceeded``; only a sample of
      ``sample_chars`` characters of its text is kept, further text is counted, not kept.
    * ``max_calls_per_choice``: the first call over the bound is kept as an ``invalid`` sample
      (``LimitExceeded``); further new calls of that choice are only counted (nothing of them is
      kept, no event names them, they are absent from the final message).
    * ``max_choices``: chunks for further choice indexes are counted and dropped.
    * ``max_stream_bytes``: a total over the whole stream of what is retained: content, refusal,
      reasoning text, argument text and unknown provider fields. Past it, argument text makes its
      call ``invalid`` (``LimitExceeded``, so nothing runs on a truncated basis); content, refusal
      and reasoning text stop being kept (the final message holds what arrived before the bound;
      the anomaly is the marker that it was cut, and the live events still carry every piece);
      unknown fields are dropped.
    * ``max_id_chars``: a call whose id is longer is ``invalid`` (``LimitExceeded``); the id is
      never replaced by one of toolstitch's own.
    * ``max_depth``: an unknown provider field nested deeper than this is dropped (a value nested
      900 deep would break serialisation of the final completion and of the history).
    """

    max_argument_bytes: int = 4 * 1024 * 1024
    """UTF-8 bytes of argument text for one call."""
    max_calls_per_choice: int = 128
    """Tool calls in one choice (OpenAI accepts at most 128 tools per request)."""
    sample_chars: int = 2048
    """How much of an oversized call's text (or of an anomaly's raw value) is kept for diagnosis."""
    max_stream_bytes: int = 16 * 1024 * 1024
    """Bytes retained across the whole stream: content, refusal, reasoning, arguments, unknown fields."""
    max_choices: int = 128
    """Distinct choice indexes in one stream (``n`` is at most 128 at OpenAI)."""
    max_depth: int = 64
    """Nesting depth of an unknown provider field kept for the final message."""
    max_id_chars: int = 65536
    """Characters of one call id. Real ids can be long (LiteLLM carries Gemini's thought signature
    in the id: 5,532 characters in a real recording); an id over the bound refuses its call
    (``LimitExceeded``) and is never replaced. Ids are counted in ``max_stream_bytes`` too."""

    def __post_init__(self) -> None:
        for field in fields(self):
            value = getattr(self, field.name)
            if type(value) is not int:
                if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
                    raise ValueError(f"Limits.{field.name} must be a finite positive integer, got {value}")
                raise ValueError(
                    f"Limits.{field.name} must be a positive integer, got {type(value).__name__} {value!r}"
                )
            if value <= 0:
                raise ValueError(f"Limits.{field.name} must be a positive integer, got {value}")


def retained(value: Any, max_depth: int, stop: int = 1 << 62) -> int:
    """Approximate bytes a kept value holds, or ``-1`` when it is nested deeper than ``max_depth``.

    Iterative (a value nested 900 deep cannot exhaust the stack) and linear in the value's size; it
    stops early once the size passes ``stop``. Strings count their length, other leaves 8.
    """
    size = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        kind = type(item)
        if kind is str:
            size += len(item)
        elif kind is dict or kind is list or kind is tuple or isinstance(item, BaseModel):
            if depth > max_depth:
                return -1
            size += 8
            if kind is dict:
                for key, inner in item.items():
                    size += len(key) if type(key) is str else 8
                    stack.append((inner, depth + 1))
            elif kind is list or kind is tuple:
                stack.extend([(inner, depth + 1) for inner in item])
            else:
                stack.extend([(inner, depth + 1) for inner in item.__dict__.values()])
                extra = item.__pydantic_extra__
                if extra:
                    stack.extend([(inner, depth + 1) for inner in extra.values()])
        else:
            size += 8
        if size > stop:
            return size
    return size


def sample(value: Any, chars: int, depth: int = 4) -> Any:
    """A bounded copy of ``value`` for diagnosis: strings cut to ``chars``, containers to 16 items
    and ``depth`` levels. Small values are returned as they are (the same object)."""
    if 0 <= retained(value, 16, stop=chars * 4) <= chars * 4:
        return value
    return _cut(value, chars, depth)


def _cut(value: Any, chars: int, depth: int) -> Any:
    kind = type(value)
    if kind is str:
        return value[:chars]
    if isinstance(value, BaseModel):
        fields = dict(value.__dict__)
        fields.update(value.__pydantic_extra__ or {})
        value, kind = fields, dict
    if kind is dict or kind is list or kind is tuple:
        if depth <= 0:
            return "…"
        if kind is dict:
            items = list(value.items())[:16]
            return {(k if type(k) is str else "?"): _cut(v, chars, depth - 1) for k, v in items}
        return [_cut(v, chars, depth - 1) for v in list(value[:16])]
    if kind is int and not -(10**40) < value < 10**40:
        return f"<an integer of {value.bit_length()} bits>"
    return value
