"""Argument checks against the request's ``tools``: JSON Schema via ``jsonschema``.

The accumulator sees the request's ``tools``, so a sealed call can be checked against the schema the
model was given before anything executes it (rule 4). Validators are built once per tool, lazily.
A ``custom`` tool takes text, not JSON: its call is checked against the tool's ``format``
(``_schema_grammar.py``), and a call of one kind never runs a tool offered as the other.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable, Mapping
from typing import Any

from ..errors import SchemaViolation, ToolCallError, UnknownTool
from ..text import Check, Node, compile_node, compile_quick
from ._anomaly import Anomaly
from ._schema_grammar import InputFormat, read_format

__all__ = ["ToolSchemas"]


def _as_mapping(tool: Any) -> Mapping[str, Any] | None:
    if isinstance(tool, Mapping):
        return tool
    dump = getattr(tool, "model_dump", None)
    if callable(dump):
        dumped = dump()
        if isinstance(dumped, Mapping):
            return dumped
    return None


class ToolSchemas:
    """The tools of one request, by name, with their parameter schemas."""

    __slots__ = ("_custom", "_early", "_formats", "_schemas", "_strict", "_validators")

    def __init__(self, tools: Iterable[Any]) -> None:
        self._schemas: dict[str, Mapping[str, Any] | None] = {}
        self._validators: dict[str, tuple[Any, Check]] = {}
        self._strict: set[str] = set()
        self._custom: dict[str, Any] = {}
        """The custom tools' ``format`` values, by name (read into ``_formats`` on first use)."""
        self._formats: dict[str, InputFormat] = {}
        self._early: dict[str, Node | None] = {}
        for tool in tools:
            spec = _as_mapping(tool)
            if spec is None:
                continue
            kind = spec.get("type", "function")
            body = spec.get(kind) if isinstance(spec.get(kind), Mapping) else None
            if body is None:
                continue
            name = body.get("name")
            if isinstance(name, str) and kind == "custom":
                self._schemas[name] = None
                self._custom[name] = body.get("format")
            elif isinstance(name, str):
                self._custom.pop(name, None)
                params = body.get("parameters") if kind == "function" else None
                self._schemas[name] = params if isinstance(params, Mapping) else None
                if body.get("strict") is True:
                    self._strict.add(name)

    def __contains__(self, name: object) -> bool:
        return name in self._schemas

    def __bool__(self) -> bool:
        return bool(self._schemas)

    def takes_no_arguments(self, name: str) -> bool:
        """True when the named tool's schema declares no properties at all (or it has no schema).

        For such a tool ``""`` and ``{}`` cannot mean different things, so ``""`` may be read as
        ``{}`` (two real servers send ``""`` for them). ``{}`` is still checked against the schema.
        """
        if name not in self._schemas or name in self._custom:
            return False
        schema = self._schemas[name]
        if schema is None:
            return True
        properties = schema.get("properties")
        return properties is None or (isinstance(properties, Mapping) and not properties)

    def _unknown(self, name: str, raw: str) -> UnknownTool:
        names = sorted(self._schemas)
        offered = ", ".join(names) or "none"
        return UnknownTool(
            f"the model called {name!r}, which the request did not offer (offered: {offered})",
            raw=raw,
            offered=names,
        )

    def unknown(self, name: str, raw: str) -> UnknownTool | None:
        """The error for a call to a tool the request did not offer, else None."""
        return self._unknown(name, raw) if name not in self._schemas else None

    def early_node(self, name: str) -> Node | None:
        """What is certain about the named tool's schema while a call streams (``text/_early.py``);
        None when nothing is (a custom tool's input is text: nothing). Compiled once per tool."""
        if name in self._early:
            return self._early[name]
        schema = self._schemas.get(name)
        node = compile_node(schema) if schema is not None and name not in self._custom else None
        if len(self._early) < 1024:
            self._early[name] = node
        return node

    def is_custom(self, name: str) -> bool:
        """True when the request offered ``name`` as a custom tool (its input is text)."""
        return name in self._custom

    def kind_error(self, name: str, custom: bool, raw: str) -> UnknownTool | None:
        """The error for a call to a tool the request did not offer, or offered as the other kind
        (a custom tool's call to a function tool, a function call to a custom tool), else None."""
        if name not in self._schemas:
            return self._unknown(name, raw)
        if custom and name not in self._custom:
            return UnknownTool(
                f"the model called {name!r} as a custom tool, but the request offered it as a function "
                "tool (its input would be text where JSON arguments are expected)",
                raw=raw,
                offered_as="function",
            )
        if not custom and name in self._custom:
            return UnknownTool(
                f"the model called {name!r} as a function, but the request offered it as a custom tool",
                raw=raw,
                offered_as="custom",
            )
        return None

    def check_input(self, name: str, text: Any, raw: str, notes: list[Anomaly]) -> ToolCallError | None:
        """None when a custom tool's call may run with the input ``text``, else the error to record:
        the tool must be offered as a custom tool, and the input must fit its ``format``."""
        wrong = self.kind_error(name, True, raw)
        if wrong is not None:
            return wrong
        found = self._formats.get(name)
        if found is None:
            found = self._formats[name] = read_format(self._custom[name])
        return found.check(name, text if type(text) is str else "", raw, notes)

    def check(self, name: str, arguments: Any, raw: str) -> ToolCallError | None:
        """None when the arguments fit the named tool, else the error to record on the call."""
        wrong = self.kind_error(name, False, raw)
        if wrong is not None:
            return wrong
        schema = self._schemas[name]
        if schema is None:
            return None
        found = self._validators.get(name)
        if found is None:
            validator, problem, quick = _validator(schema)
            if problem is not None:
                # Not a valid JSON Schema: nothing can be checked against it, so no call of this tool
                # becomes ready on the strength of it (fail closed, like a schema that cannot run).
                message = f"the schema of {name!r} is not a valid JSON Schema: {problem}"
                return SchemaViolation(message, raw=raw, errors=[f"(schema): {problem}"])
            self._validators[name] = (validator, quick)
        else:
            validator, quick = found
        try:
            if quick(arguments):
                return None  # a yes from the quick check is a yes from jsonschema (``text/_schema_quick.py``)
        except Exception:  # never a verdict: jsonschema below decides (fail closed)
            pass
        try:
            errors = sorted(validator.iter_errors(arguments), key=lambda e: list(e.absolute_path))
        except Exception as exc:
            # The schema passed check_schema but cannot be evaluated (a $ref that points nowhere, a
            # remote $ref that is never fetched, nesting deep enough to exhaust the stack). The
            # arguments were not checked, so the call must not become ready (rule 4): refuse it.
            message = f"the arguments could not be checked against the schema of {name!r}: {exc}"
            return SchemaViolation(message, raw=raw, errors=[f"(schema): {exc}"])
        if errors and name in self._strict:
            errors = [e for e in errors if not _omitted_nullable(e)]
        if not errors:
            return None
        messages = [f"{'/'.join(str(p) for p in e.absolute_path) or '(root)'}: {e.message}" for e in errors]
        return SchemaViolation(
            f"arguments do not match the schema of {name!r}: " + "; ".join(messages),
            raw=raw,
            errors=messages,
        )


_CACHE_SIZE = 256
_Built = tuple[Any, str | None, Check]
_cache: dict[str, _Built] = {}
_cache_lock = threading.Lock()


def _validator(schema: Mapping[str, Any]) -> _Built:
    """``(validator, None, quick)`` for a valid schema, ``(None, why, _never)`` for one that is not
    a JSON Schema. ``quick`` is the schema's quick check (``text/_schema_quick.py``; ``_never`` outside
    its subset), compiled from the validator's own copy of the schema.

    Checking a schema against its metaschema costs milliseconds, far more than validating a call:
    a process that streams the same tools again and again (every request of an agent) builds each
    validator once. Keyed by the schema's canonical JSON, so an equal schema is the same entry; a
    schema that is not JSON (it cannot be keyed) is built every time. Bounded (``_CACHE_SIZE``,
    oldest out first).
    """
    try:
        key: str | None = json.dumps(schema, sort_keys=True, allow_nan=False)
    except (TypeError, ValueError, RecursionError):
        key = None
    if key is not None:
        found = _cache.get(key)
        if found is not None:
            return found
    import jsonschema  # imported on first use: most streams never need it

    if key is not None:
        # The cached validator holds its own copy: a caller that later changes its schema dict in
        # place must not change what an equal request is checked against.
        schema = json.loads(key)
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        cls.check_schema(schema)
        built: _Built = (cls(schema), None, compile_quick(schema) or _never)
    except jsonschema.SchemaError as exc:
        built = (None, exc.message, _never)
    if key is not None:
        with _cache_lock:
            if len(_cache) >= _CACHE_SIZE:
                del _cache[next(iter(_cache))]
            _cache[key] = built
    return built


def _never(value: Any) -> bool:
    return False


def _omitted_nullable(error: Any) -> bool:
    """A ``required`` error for properties that a strict schema declares nullable.

    Strict mode makes every property required and spells "optional" as "nullable": ``null`` means
    "use the default". A server that ignores ``strict`` lets the model leave such a property out,
    which means the same thing, so it is not held against the call.
    """
    if error.validator != "required" or not isinstance(error.instance, dict):
        return False
    properties = error.schema.get("properties") if isinstance(error.schema, Mapping) else None
    if not isinstance(properties, Mapping):
        return False
    missing = [p for p in error.validator_value if p not in error.instance]
    return bool(missing) and all(_nullable(properties.get(p)) for p in missing)


def _nullable(schema: Any) -> bool:
    if not isinstance(schema, Mapping):
        return False
    kind = schema.get("type")
    if kind == "null" or (isinstance(kind, list) and "null" in kind):
        return True
    for key in ("anyOf", "oneOf"):
        branches = schema.get(key)
        if isinstance(branches, list) and any(_nullable(b) for b in branches):
            return True
    return False
