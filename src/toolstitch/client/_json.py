"""``json.loads``'s value for a streamed ``data:`` payload, parsed by pydantic-core when that is the same.

The SDK turns every ``data:`` line into Python with ``json.loads`` (the ``json()`` of its
``ServerSentEvent``), as much as validating the event costs once decoding is fast.
``pydantic_core.from_json`` parses in Rust in about a quarter of the time (0.6 against 2.4 µs for a
130-byte argument delta on the shared development machine), and :func:`loads` takes its value, or
``json.loads``'s whenever it refuses the text. Why that is ``json.loads``'s own result, value for
value and error for error:

* Both parse RFC 8259 JSON strictly, plus ``NaN``, ``Infinity`` and ``-Infinity``. What
  ``json.loads`` refuses (control characters inside strings, leading zeros, ``+1``, ``.5``, trailing
  commas or text, a BOM, ``nan``) pydantic-core refuses too; then ``json.loads`` runs, so its error
  is the SDK's own error, and any text pydantic-core alone refuses (a lone surrogate escape, nesting
  deeper than its limit) gets ``json.loads``'s value.
* The values are the same Python types: ``dict`` (a duplicated key keeps its first position and
  its last value), ``list``, ``str``, ``int`` (exact, however long, within Python's digit limit),
  ``float`` (correctly rounded, ``1e400`` is ``inf``), ``bool``, ``None``.

:data:`SAMPLE_TEXTS` holds a case of every rule above. The first :func:`loads` checks the installed
pydantic-core on all of them (value, type and ``repr`` at every level, or refusal where
``json.loads`` refuses); a release where one differs, or one without ``from_json``, keeps
``json.loads`` for good.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Callable
from typing import Any, Final

import pydantic_core

__all__ = ["SAMPLE_TEXTS", "loads", "parser_agrees"]

_json_loads = json.loads

#: Texts on which pydantic-core must agree with ``json.loads`` before :func:`loads` uses it.
SAMPLE_TEXTS: tuple[str, ...] = (
    '{"type":"response.function_call_arguments.delta","item_id":"fc_1","output_index":0,'
    '"delta":"{\\"a","sequence_number":3}',
    '{"a":1,"b":2,"a":3}',
    '{"s":"\\u00e9\\u20ac\\ud83d\\ude00 \\/ \\" \\\\ \\b\\f\\n\\r\\t \\u0000","t":"é€😀"}',
    '"\\ud800"',
    '"\\udc00x"',
    "[NaN, Infinity, -Infinity]",
    "[1e400, -1e400, 1e-400, -0.0, 0e0, 1E+2, 1e-7, -0]",
    "[0.1, 0.30000000000000004, 1e23, 8.98846567431158e307, 1.7976931348623157e308, "
    "2.2250738585072014e-308, 4.9e-324, 2.4703282292062328e-324, 100000000000000000000000.0]",
    "[123456789012345678901234567890, -9223372036854775809, 18446744073709551616]",
    "9" * 4300,
    "9" * 4301,
    " \t\r\n{} \t\r\n",
    '"a\nb"',
    '"a\tb"',
    '"\x7f"',
    "01",
    "1.",
    "-",
    ".5",
    "+1",
    '"\\x"',
    "\ufeff{}",
    "\x0c{}",
    "\xa0{}",
    "{} x",
    "[1,]",
    '{"a":1,}',
    "tru",
    "nan",
    "-NaN",
    "inf",
    "1_000",
    "",
    "[" * 300 + "]" * 300,
    '[true, false, null, {}, [], {"": []}]',
)


def _outcome(parse: Callable[[str], Any], text: str) -> tuple[str, str]:
    """What parsing ``text`` gives, comparable across parsers: the value's ``repr`` with its types
    at every level (NaN is NaN), or that it was refused."""
    try:
        value = parse(text)
    except (ValueError, RecursionError):
        return ("refused", "")
    return ("value", _typed(value))


def _typed(value: Any) -> str:
    pending = [value]
    out: list[str] = []
    while pending:
        item = pending.pop()
        out.append(type(item).__name__)
        if isinstance(item, dict):
            out.append(repr(list(item)))
            pending.extend(item.values())
        elif isinstance(item, list):
            out.append(str(len(item)))
            pending.extend(item)
        else:
            out.append(repr(item))
    return "|".join(out)


def parser_agrees() -> bool:
    """Whether the installed pydantic-core parses every sample text as ``json.loads`` does (and
    refuses it only where ``json.loads`` refuses it or gives a value :func:`loads` falls back to)."""
    parse = getattr(pydantic_core, "from_json", None)
    if not callable(parse):
        return False
    for text in SAMPLE_TEXTS:
        expected = _outcome(_json_loads, text)
        found = _outcome(parse, text)
        if found[0] == "refused":
            continue  # loads() gives json.loads's own outcome for it
        if found != expected:
            return False
    return True


class _Parser(enum.Enum):
    """Where the choice of parser stands before the first :func:`loads`."""

    UNCHECKED = enum.auto()
    """pydantic-core not yet checked against ``json.loads`` (:func:`parser_agrees`)."""


_UNCHECKED: Final = _Parser.UNCHECKED
_parse: Callable[[str], Any] | _Parser | None = _UNCHECKED
"""``pydantic_core.from_json`` once :func:`parser_agrees` held, ``None`` when it did not."""


def _checked() -> Callable[[str], Any] | None:
    global _parse
    try:
        agrees = parser_agrees()
    except Exception:  # a check that fails proves nothing: keep json.loads
        agrees = False
    _parse = pydantic_core.from_json if agrees else None
    return _parse


def loads(text: str) -> Any:
    """``json.loads(text)``: the same value, or the same exception."""
    parse = _parse
    if parse is _UNCHECKED:
        parse = _checked()
    if parse is not None:
        try:
            return parse(text)
        except Exception:  # refused: json.loads decides, as the SDK would
            pass
    return _json_loads(text)
