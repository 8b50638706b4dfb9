"""A quick yes for the common shape of a tool schema, before ``jsonschema`` is asked.

Checking a sealed call with ``jsonschema`` costs about 16 us for a two-property object, most of a
call's sealing cost (issue 12), while nearly every tool schema in practice is a plain tree of
``type``, ``properties``, ``required``, ``additionalProperties`` and ``items``. For such a schema
:func:`compile_quick` builds a small Python predicate that answers in about a microsecond.

The predicate may only ever say **yes** when ``jsonschema`` would too; it is never the one that says
no. When it answers False (or the schema uses anything outside the subset, so no predicate is
built) the caller asks ``jsonschema`` as before, which gives the verdict and the error messages.
The subset is chosen so that every JSON Schema draft ``jsonschema`` knows agrees on it:

* ``integer`` is accepted only as a Python ``int`` (draft 4 refuses ``1.0``, later drafts take it:
  a ``1.0`` goes to ``jsonschema``), never ``bool``; ``number`` as ``int`` or ``float``, never
  ``bool``;
* ``additionalProperties`` only as a boolean, ``items`` only as one schema (not draft 7's list);
* annotations that never change a verdict (``title``, ``description``, ``default``, ``examples``,
  ``$comment``) are ignored; any other keyword (``enum``, ``format``, ``$ref``, ``anyOf``,
  ``minimum``, ...) means no predicate at all.

``tests/text/test_schema_quick.py`` holds the promise with hypothesis: for generated schemas in and
around the subset and generated values, a yes from the predicate is always a yes from
``jsonschema``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["compile_quick"]

Check = Callable[[Any], bool]

_ANNOTATIONS = frozenset({"title", "description", "default", "examples", "$comment"})
_KEYWORDS = frozenset({"type", "properties", "required", "additionalProperties", "items"}) | _ANNOTATIONS


def _is_object(value: Any) -> bool:
    return type(value) is dict


def _is_array(value: Any) -> bool:
    return type(value) is list


def _is_string(value: Any) -> bool:
    return type(value) is str


def _is_integer(value: Any) -> bool:
    return type(value) is int


def _is_number(value: Any) -> bool:
    return type(value) is int or type(value) is float


def _is_boolean(value: Any) -> bool:
    return type(value) is bool


def _is_null(value: Any) -> bool:
    return value is None


_TYPES: dict[str, Check] = {
    "object": _is_object,
    "array": _is_array,
    "string": _is_string,
    "integer": _is_integer,
    "number": _is_number,
    "boolean": _is_boolean,
    "null": _is_null,
}
_DEPTH = 32


def compile_quick(schema: Any) -> Check | None:
    """A predicate that says True only for values ``jsonschema`` accepts under ``schema``, or None
    when the schema is outside the subset. Never raises."""
    try:
        return _compile(schema, 0)
    except Exception:
        return None


def _compile(schema: Any, depth: int) -> Check | None:
    if depth > _DEPTH or not isinstance(schema, Mapping) or not schema.keys() <= _KEYWORDS:
        return None
    if any(type(key) is not str for key in schema):
        return None
    checks: list[Check] = []

    if "type" in schema:
        kind = schema["type"]
        names = [kind] if type(kind) is str else kind
        if type(names) is not list or not names or any(type(n) is not str or n not in _TYPES for n in names):
            return None
        tests = tuple(_TYPES[n] for n in names)
        if len(tests) == 1:
            checks.append(tests[0])
        else:
            checks.append(lambda value: any(test(value) for test in tests))

    object_check = _object_part(schema, depth)
    if object_check is not None:
        checks.append(object_check)

    if "items" in schema:
        item = _compile(schema["items"], depth + 1)
        if item is None:
            return None
        checks.append(lambda value: type(value) is not list or all(item(v) for v in value))

    if not checks:
        return _anything
    if len(checks) == 1:
        return checks[0]
    parts = tuple(checks)
    return lambda value: all(check(value) for check in parts)


def _anything(value: Any) -> bool:
    return True


class _Outside(Exception):
    """The schema uses something outside the subset: no predicate (``compile_quick`` answers None)."""


def _object_part(schema: Mapping[str, Any], depth: int) -> Check | None:
    """The check of ``properties``/``required``/``additionalProperties`` (None when the schema has
    none of them); raises :class:`_Outside` when they are outside the subset."""
    if not {"properties", "required", "additionalProperties"} & schema.keys():
        return None
    raw_properties = schema.get("properties", {})
    if not isinstance(raw_properties, Mapping):
        raise _Outside
    properties: dict[str, Check] = {}
    for name, sub in raw_properties.items():
        if type(name) is not str:
            raise _Outside
        compiled = _compile(sub, depth + 1)
        if compiled is None:
            raise _Outside
        properties[name] = compiled
    required = schema.get("required", [])
    if type(required) is not list or any(type(r) is not str for r in required):
        raise _Outside
    needed = tuple(dict.fromkeys(required))
    additional = schema.get("additionalProperties", True)
    if type(additional) is not bool:
        raise _Outside
    known = frozenset(properties)
    closed = not additional

    def check(value: Any) -> bool:
        if type(value) is not dict:
            return True  # these keywords apply to objects only
        for name in needed:
            if name not in value:
                return False
        if closed and not value.keys() <= known:
            return False
        for name, item in value.items():
            test = properties.get(name)
            if test is not None and not test(item):
                return False
        return True

    return check
