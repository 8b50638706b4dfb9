"""The strict parse a call's text meets at seal (rule 2 of docs/design.md), and the Unicode tests
it needs: RFC 8259 JSON, an object at the top level, and a value every parser reads alike (no NaN
or Infinity, no number outside a double's range, no key twice, no lone surrogate, raw or escaped).
So a ``ready`` value is valid Unicode. The owner of a call's life (``core/_owner.py``) calls
:func:`parse_arguments` once per call, or :func:`parse_input` for a custom tool's call (its input
is text, not JSON)."""

from __future__ import annotations

import json
import math
import re
import sys
from typing import Any

from ..errors import ArgumentsNotAnObject, EmptyArguments, MalformedArguments, ToolCallError

__all__ = ["has_lone_surrogate", "join_surrogate_pairs", "parse_arguments", "parse_input"]


def has_lone_surrogate(text: str) -> bool:
    """True when ``text`` is not valid Unicode (holds a surrogate code point)."""
    if text.isascii():
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def join_surrogate_pairs(text: str) -> str:
    """Recombine surrogate pairs (a character split by a proxy that cuts UTF-16 code units)."""
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _finite_float(text: str) -> float:
    value = float(text)
    if value in (math.inf, -math.inf):
        # ``1e400`` is valid JSON text, but no double holds it: Python reads infinity, other
        # parsers an error or another number. A value a tool would not receive as sent is refused.
        raise ValueError(f"the number {text[:40]} is outside the range of a double")
    return value


def _finite_int(text: str) -> int:
    value = int(text)
    if len(text) > 308 and abs(value) > _MAX_DOUBLE:
        raise ValueError(f"the number {text[:40]}... is outside the range of a double")
    return value


_MAX_DOUBLE = int(sys.float_info.max)


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    value = dict(pairs)
    if len(value) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                # Parsers disagree on duplicates (first wins, last wins, error): what a preview or
                # an approval screen showed could differ from what a tool receives. Refused.
                raise ValueError(f"the key {key[:40]!r} appears twice in one object")
            seen.add(key)
    return value


_ESCAPED_SURROGATE = re.compile(r"\\[uU][dD][89a-fA-F]")


def _has_surrogate_value(value: Any) -> bool:
    """True when a parsed value holds a lone surrogate (from an escape such as ``"\\udc00"``)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if type(item) is str:
            if has_lone_surrogate(item):
                return True
        elif type(item) is dict:
            stack.extend(item.keys())
            stack.extend(item.values())
        elif type(item) is list:
            stack.extend(item)
    return False


def parse_arguments(text: str) -> tuple[Any, ToolCallError | None]:
    """Parse argument text strictly: RFC 8259 JSON, an object at the top level, and a value every
    parser reads alike: no NaN or Infinity, no number outside a double's range, no key twice in one
    object, no lone surrogate (raw or escaped). So a ``ready`` value is valid Unicode."""
    if text == "":
        return None, EmptyArguments(
            "no argument text arrived (arguments is an empty string, not {})", raw=text
        )
    if has_lone_surrogate(text):
        return None, MalformedArguments(
            "the argument text is not valid Unicode (it holds a lone UTF-16 surrogate, e.g. a "
            "character cut in half by a proxy): it cannot reach a tool intact",
            raw=text,
        )
    try:
        value = json.loads(
            text,
            parse_constant=_reject_constant,
            parse_float=_finite_float,
            parse_int=_finite_int,
            object_pairs_hook=_unique_keys,
        )
    except (ValueError, RecursionError) as exc:
        pos = getattr(exc, "pos", None)
        return None, MalformedArguments(f"arguments are not valid JSON: {exc}", raw=text, position=pos)
    if _ESCAPED_SURROGATE.search(text) is not None and _has_surrogate_value(value):
        return None, MalformedArguments(
            "the arguments hold an escaped lone UTF-16 surrogate (such as \\udc00): the value is not "
            "valid Unicode, so no tool could receive it intact",
            raw=text,
        )
    if not isinstance(value, dict):
        return value, ArgumentsNotAnObject(
            f"arguments must be a JSON object, got {type(value).__name__}", raw=text
        )
    return value, None


def parse_input(text: str) -> tuple[Any, ToolCallError | None]:
    """A custom tool call's input: text, not JSON, so it is not parsed: it is the value itself
    (``""`` included), provided it is valid Unicode (a lone surrogate cannot reach a tool intact)."""
    if has_lone_surrogate(text):
        return None, MalformedArguments(
            "the input text is not valid Unicode (it holds a lone UTF-16 surrogate, e.g. a character "
            "cut in half by a proxy): it cannot reach a tool intact",
            raw=text,
        )
    return text, None
