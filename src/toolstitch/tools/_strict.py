"""JSON schemas for OpenAI's strict mode (``"strict": true`` on a function tool).

Strict mode makes the model's arguments fit the schema by construction, which removes most
corrective rounds, but it accepts only a subset of JSON Schema: every object closed
(``additionalProperties: false``) with *all* its properties listed in ``required``; no ``default``;
no open-ended maps (``dict[str, X]``), tuples, ``allOf``/``not``/``if``; ``$ref`` without sibling
keywords. :func:`strict_schema` rewrites a pydantic-made schema into that subset, or says it cannot.

Optional parameters follow the rule OpenAI documents for strict mode: the property stays required and
its type becomes nullable; ``null`` then means "use the default". The tool's validator drops such
``null`` values before pydantic sees them, so the function receives its own default.

Keywords that only narrow what is valid (``minLength``, ``uniqueItems``, …) are dropped from the strict
schema rather than giving up strict mode: pydantic still enforces them when the call is checked, and a
violation reaches the model as a corrective message.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

__all__ = ["clean_schema", "is_strict_schema", "strict_schema"]

# Keywords OpenAI's strict mode accepts (Structured Outputs, "Supported schemas").
_STRICT_KEYWORDS = frozenset(
    {
        "type",
        "properties",
        "required",
        "additionalProperties",
        "enum",
        "const",
        "anyOf",
        "$ref",
        "$defs",
        "description",
        "title",
        "items",
        "minItems",
        "maxItems",
        "pattern",
        "format",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
    }
)
# Keywords that only narrow or annotate: safe to drop, pydantic still checks what they said.
_DROPPABLE = frozenset(
    {
        "default",
        "examples",
        "uniqueItems",
        "minLength",
        "maxLength",
        "minProperties",
        "maxProperties",
        "readOnly",
        "writeOnly",
        "deprecated",
        "contentEncoding",
        "contentMediaType",
        "$comment",
        "discriminator",
    }
)
_STRICT_FORMATS = frozenset(
    {"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"}
)
_MAX_DEPTH = 64

# Where sub-schemas live, so that walkers never mistake a property *named* "title" for a keyword.
_SCHEMA_MAPS = ("properties", "$defs", "definitions", "patternProperties", "dependentSchemas")
_SCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
_SCHEMA_ONE = ("items", "additionalProperties", "not", "if", "then", "else", "contains", "propertyNames")


class _NotStrict(Exception):
    """The schema uses something strict mode cannot express."""


def clean_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """A deep copy without pydantic's generated ``title`` keywords (noise in every request)."""
    out = copy.deepcopy(dict(schema))
    _strip_titles(out)
    return out


def _strip_titles(node: Any) -> None:
    if not isinstance(node, dict):
        return
    node.pop("title", None)
    for key in _SCHEMA_MAPS:
        sub = node.get(key)
        if isinstance(sub, dict):
            for value in sub.values():
                _strip_titles(value)
    for key in _SCHEMA_LISTS:
        sub = node.get(key)
        if isinstance(sub, list):
            for value in sub:
                _strip_titles(value)
    for key in _SCHEMA_ONE:
        _strip_titles(node.get(key))


def strict_schema(schema: Mapping[str, Any]) -> dict[str, Any] | None:
    """The strict-mode form of ``schema`` (a new dict), or None when strict mode cannot express it."""
    try:
        root = clean_schema(schema)
        out = _fix(root, root, 0)
    except (_NotStrict, TypeError, ValueError, AttributeError, RecursionError):
        # _NotStrict: a feature strict mode lacks; the others: a value of the wrong type somewhere
        # (a hand-written schema), which strict mode cannot express either.
        return None
    if out.get("type") != "object":
        return None
    return out


def _resolve(root: dict[str, Any], ref: str) -> dict[str, Any]:
    if not ref.startswith("#/"):
        raise _NotStrict(f"external $ref {ref!r}")
    node: Any = root
    for part in ref[2:].split("/"):
        if not isinstance(node, dict) or part not in node:
            raise _NotStrict(f"unresolvable $ref {ref!r}")
        node = node[part]
    if not isinstance(node, dict):
        raise _NotStrict(f"$ref {ref!r} is not a schema")
    return node


def _accepts_null(node: Mapping[str, Any]) -> bool:
    kind = node.get("type")
    if kind == "null" or (isinstance(kind, list) and "null" in kind):
        return True
    if "enum" in node and None in node["enum"]:
        return True
    variants = node.get("anyOf")
    return isinstance(variants, list) and any(isinstance(v, dict) and _accepts_null(v) for v in variants)


def _nullable(node: dict[str, Any], default: Any, has_default: bool) -> dict[str, Any]:
    """``node`` or null; the description says that null means the default."""
    description = node.pop("description", None)
    note = f"null means the default: {_show(default)}" if has_default else "null means the default"
    out: dict[str, Any] = {"anyOf": [node, {"type": "null"}]}
    out["description"] = f"{description} ({note})" if description else f"Optional; {note}."
    return out


def _show(value: Any) -> str:
    import json

    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return repr(value)


def _fix(value: Any, root: dict[str, Any], depth: int) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _NotStrict("a schema must be an object")
    node: dict[str, Any] = value
    if depth > _MAX_DEPTH:
        raise _NotStrict("schema nests too deeply (recursive $ref with sibling keywords?)")
    all_of = node.pop("allOf", None)
    if all_of is not None:
        if not isinstance(all_of, list) or len(all_of) != 1:
            raise _NotStrict("allOf with more than one schema")
        node = {**copy.deepcopy(all_of[0]), **node}
    ref = node.get("$ref")
    if isinstance(ref, str) and len(node) > 1:
        # Strict mode refuses siblings next to $ref (e.g. a description): inline the target.
        merged = {**copy.deepcopy(_resolve(root, ref)), **node}
        merged.pop("$ref")
        return _fix(merged, root, depth + 1)
    if "oneOf" in node:
        # pydantic's discriminated unions: the variants exclude each other, so anyOf means the same.
        node["anyOf"] = node.pop("oneOf")
    for key in list(node):
        if key in _DROPPABLE:
            del node[key]
        elif key not in _STRICT_KEYWORDS:
            raise _NotStrict(f"keyword {key!r}")
    if "format" in node and node["format"] not in _STRICT_FORMATS:
        del node["format"]
    kind = node.get("type")
    if "type" in node and not (
        isinstance(kind, str) or (isinstance(kind, list) and all(isinstance(k, str) for k in kind))
    ):
        raise _NotStrict("type must be a name or a list of names")
    if "$ref" in node:
        if not isinstance(ref, str):
            raise _NotStrict("$ref must be a string")
        _resolve(root, ref)  # external or dangling references: strict mode cannot follow them
    defs = node.get("$defs")
    if isinstance(defs, dict):
        node["$defs"] = {name: _fix(sub, root, depth + 1) for name, sub in defs.items()}
    kind = node.get("type")
    if kind == "object" or "properties" in node:
        _fix_object(node, root, depth)
    elif "additionalProperties" in node or "required" in node:
        raise _NotStrict("object keywords on a non-object schema")
    if "items" in node:
        node["items"] = _fix(node["items"], root, depth + 1)
    elif kind == "array" or (isinstance(kind, list) and "array" in kind):
        raise _NotStrict("array without items")
    if "anyOf" in node:
        variants = node["anyOf"]
        if not isinstance(variants, list):
            raise _NotStrict("anyOf must be a list")
        node["anyOf"] = [_fix(v, root, depth + 1) for v in variants]
    return node


def _fix_object(node: dict[str, Any], root: dict[str, Any], depth: int) -> None:
    extra = node.get("additionalProperties", False)
    if extra is not False:
        raise _NotStrict("an open object (a map, or additionalProperties allowed)")
    props = node.get("properties")
    if not isinstance(props, dict):
        # {"type": "object"} alone is a free-form map (pydantic's ``dict``): strict mode would close it.
        raise _NotStrict("an object without properties")
    required = set(node.get("required") or ())
    fixed: dict[str, Any] = {}
    for name, sub in props.items():
        has_default = isinstance(sub, dict) and "default" in sub
        default = sub.get("default") if has_default else None
        sub = _fix(sub, root, depth + 1)
        if name not in required and not _accepts_null(sub):
            sub = _nullable(sub, default, has_default)
        fixed[name] = sub
    node["properties"] = fixed
    node["required"] = list(fixed)
    node["additionalProperties"] = False
    node.setdefault("type", "object")


def is_strict_schema(schema: Any, _root: Any = None, _depth: int = 0) -> bool:
    """True when ``schema`` is already acceptable to strict mode as it stands (raw schemas are sent
    unchanged, so they are only marked strict when they already comply)."""
    if _root is None:
        try:
            return _is_strict(schema, schema, 0)
        except (TypeError, ValueError, AttributeError, RecursionError):  # wrong types: not strict
            return False
    return _is_strict(schema, _root, _depth)


def _is_strict(schema: Any, root: Any, _depth: int) -> bool:
    if not isinstance(schema, dict) or _depth > _MAX_DEPTH:
        return False
    if any(key not in _STRICT_KEYWORDS for key in schema):
        return False
    if "$ref" in schema and len(schema) > 1:
        return False
    if "format" in schema and schema["format"] not in _STRICT_FORMATS:
        return False
    subs: list[Any] = []
    if schema.get("type") == "object" or "properties" in schema:
        props = schema.get("properties", {})
        if not isinstance(props, dict) or schema.get("additionalProperties") is not False:
            return False
        if sorted(schema.get("required") or []) != sorted(props):
            return False
        subs.extend(props.values())
    defs = schema.get("$defs")
    if isinstance(defs, dict):
        subs.extend(defs.values())
    if "items" in schema:
        subs.append(schema["items"])
    if isinstance(schema.get("anyOf"), list):
        subs.extend(schema["anyOf"])
    if schema is root and schema.get("type") != "object":
        return False
    return all(_is_strict(sub, root, _depth + 1) for sub in subs)
