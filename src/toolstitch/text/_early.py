"""Early refusal: the verdicts on a call that are certain while its arguments still stream.

Issue 30 and rule 4 of docs/design.md: a call is checked once, at seal, against the request. Some
verdicts are known long before: ``"budget": "`` where the schema wants an integer, a key outside
``properties`` under ``additionalProperties: false``, a string no ``enum`` member starts with, a
tool the request did not offer. For those the owner of the call (``core/_owner.py``) refuses the call the
moment its text shows it (an event while it streams; it can never be ``ready``), so a loop can stop
the model at once (``ts.run(fail_fast=True)``).

Only certain verdicts, never guesses. A verdict here is given only when *no* continuation of the
text so far can make the call valid at seal, under every JSON Schema draft ``jsonschema`` may pick
for the schema. So a schema node is read only for the keywords whose failure fails the node
whatever its other keywords say (``type``, ``enum``, ``const``, ``properties`` with
``additionalProperties: false``, ``items``, the ``false`` schema); and a node that may not apply
the way it reads is not read at all: one with a ``$ref`` (drafts 4 to 7 ignore its siblings), an
array's ``items`` beside ``prefixItems``, a schema of draft 3 or older. Integers and numbers are
one kind here (``1.0`` is an integer in some drafts and not in others). What the text says is read
as JSON only as far as it is valid: text that is not valid JSON is refused at seal anyway, and
the scanner (``_scanner.py``) reports it.

``tests/core/test_early.py`` holds the promise: on generated schemas and values, on the real-stream
corpus and on mutated streams, an early verdict is always followed by a refusal at seal, and no call
that ends ``ready`` is ever refused early.

Bounded (rule 9): the key or enum string being read is kept only up to the longest name it could
be, and nesting beyond :data:`MAX_DEPTH` stops the checks for the call (the seal still checks all).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

__all__ = ["EarlyCheck", "Node", "compile_node"]

_PREFIX_MEMBERS = 256
"""Members of an ``enum`` beyond which a string is checked only when it closes (each prefix check
reads every member)."""
MAX_DEPTH = 64
"""Containers deep beyond which a call is no longer checked early (the seal checks it whole)."""

_KINDS = {
    "string": "string",
    "integer": "number",
    "number": "number",
    "boolean": "boolean",
    "object": "object",
    "array": "array",
    "null": "null",
}
_ALL_KINDS = frozenset(_KINDS.values())
_OLD_DRAFTS = re.compile(r"draft-0[0-3]")
_CONST_DRAFTS = re.compile(r"draft-0[67]/|/20(19-09|20-12)/")
_UNSURE = ("$ref", "$dynamicRef", "$recursiveRef")
# A run of string characters that cannot end the string: anything but a quote or a backslash, and
# whole two-character escapes (``\\u`` digits are never a quote, so they need no special case).
_IN_STRING = re.compile(r'(?:[^"\\]+|\\.)*', re.DOTALL)
_LITERAL_END = re.compile(r"[\s,\]}]")
_SPACE = frozenset(" \t\r\n")


def _kind(value: Any) -> str | None:
    """The JSON kind of a parsed value (``bool`` before ``int``: ``true`` is not ``1`` here)."""
    if value is None:
        return "null"
    kind = type(value)
    if kind is bool:
        return "boolean"
    if kind is int or kind is float:
        return "number"
    if kind is str:
        return "string"
    if kind is dict:
        return "object"
    if kind is list:
        return "array"
    return None


class Node:
    """What is certain about one schema node: the kinds a value may have (``None``: any), the
    strings it may be (``enum``/``const``; ``None``: any), its properties and whether other keys
    are refused, the node of every array item."""

    __slots__ = ("closed", "items", "longest", "props", "shown", "strings", "types")

    def __init__(self) -> None:
        self.types: frozenset[str] | None = None
        self.shown = ""
        """What ``types`` is, in the schema's words (``integer``), for messages."""
        self.strings: frozenset[str] | None = None
        self.longest = 0
        """The longest member of ``strings`` (a longer string cannot be one)."""
        self.props: dict[str, Node | None] = {}
        self.closed = False
        self.items: Node | None = None


def compile_node(schema: Any, depth: int = 0) -> Node | None:
    """The certain part of ``schema`` (a tool's ``parameters``), or None when nothing about it is
    certain. Never raises: a schema this cannot read is not checked early."""
    try:
        const = True
        if isinstance(schema, Mapping) and "$schema" in schema:
            found = schema.get("$schema")
            if not isinstance(found, str) or _OLD_DRAFTS.search(found):
                return None
            # ``const`` is a keyword from draft 6 on: under draft 4, or a metaschema not known
            # here, it may mean nothing.
            const = _CONST_DRAFTS.search(found) is not None
        return _compile(schema, depth, const)
    except Exception:  # a hostile schema object: the seal decides (fail closed there)
        return None


def _compile(schema: Any, depth: int, const: bool) -> Node | None:
    if schema is False:
        node = Node()
        node.types = frozenset()
        return node
    if not isinstance(schema, Mapping) or depth > MAX_DEPTH or any(k in schema for k in _UNSURE):
        return None
    node = Node()
    useful = False
    kind = schema.get("type")
    if isinstance(kind, str) and kind in _KINDS:
        node.types = frozenset([_KINDS[kind]])
        node.shown = kind
        useful = True
    elif isinstance(kind, list) and kind and all(isinstance(k, str) and k in _KINDS for k in kind):
        node.types = frozenset(_KINDS[k] for k in kind)
        node.shown = " or ".join(kind)
        useful = True
    for key in ("enum", "const") if const else ("enum",):
        if key not in schema:
            continue
        members = schema[key] if key == "enum" else [schema[key]]
        if not isinstance(members, list):
            continue
        kinds = {_kind(m) for m in members}
        if None in kinds:
            continue  # a member JSON does not hold: the seal decides
        node.types = frozenset(kinds) if node.types is None else node.types & frozenset(kinds)  # type: ignore[arg-type]
        node.shown = f"a value of its {key}"
        strings = frozenset(m for m in members if type(m) is str)
        node.strings = strings if node.strings is None else node.strings & strings
        useful = True
    if node.strings is not None:
        node.longest = max((len(s) for s in node.strings), default=0)
    props = schema.get("properties")
    if isinstance(props, Mapping):
        for name, sub in props.items():
            if isinstance(name, str):
                node.props[name] = _compile(sub, depth + 1, const)
        useful = useful or any(v is not None for v in node.props.values())
    if (
        schema.get("additionalProperties") is False
        and "patternProperties" not in schema
        and isinstance(props, Mapping | None)
        and all(isinstance(name, str) for name in props or ())
    ):
        node.closed = True
        useful = True
    items = schema.get("items")
    if isinstance(items, Mapping | bool) and "prefixItems" not in schema:
        node.items = _compile(items, depth + 1, const)
        useful = useful or node.items is not None
    return node if useful else None


# The lexer's expectations.
_VALUE, _KEY, _COLON, _COMMA = 0, 1, 2, 3


class _Frame:
    __slots__ = ("count", "expect", "key", "node", "object")

    def __init__(self, node: Node | None, is_object: bool) -> None:
        self.node = node
        self.object = is_object
        self.expect = _KEY if is_object else _VALUE
        self.key: str | None = None
        self.count = 0


class EarlyCheck:
    """One call's argument text, read as it streams against its tool's :class:`Node`.

    :meth:`feed` takes each fragment once, in order, and returns the reason the call can no longer
    become valid (then it stops), or None. Cost: inside a string it needs nothing (one C search
    per fragment); elsewhere it reads the few characters between the strings.
    """

    __slots__ = (
        "_buffer",
        "_escape",
        "_frames",
        "_in_literal",
        "_in_string",
        "_key",
        "_limit",
        "_root",
        "_string_node",
        "_tracking",
        "done",
        "free",
        "offset",
    )

    def __init__(self, root: Node) -> None:
        self._root = root
        self._frames: list[_Frame] = []
        self._in_string = False
        self._escape = False
        self._in_literal = False
        self._key = False
        """True while the string being read is a key."""
        self._tracking = False
        """True while the string being read must be kept (a key, or a value with ``enum``)."""
        self._buffer: list[str] = []
        self._limit = 0
        """Characters of the tracked string beyond which it is certainly no allowed value."""
        self._string_node: Node | None = None
        self.done = False
        """True once a verdict was given, or the text stopped being readable: nothing more to say."""
        self.offset = 0
        """Characters fed so far (the owner feeds it only text that follows them)."""
        self.free = False
        """True while it reads a string nobody checks (no escape open): text that stays inside
        that string changes nothing here but :attr:`offset`. The scanner tells the owner which
        fragments do (``JSONScanner.feed`` returns None), so such a fragment is not read twice."""

    def feed(self, text: str, at: int) -> str | None:
        """Read ``text``, which follows ``at`` characters of the call's text: the reason the call
        can no longer be valid, or None. Text that does not follow what was read (some arrived
        while nobody read events) ends the check: nothing more is said early."""
        if self.offset != at:
            self.done = True
            self.free = False
            return None
        self.offset += len(text)
        if self.done:
            return None
        try:
            reason = self._feed(text)
        except Exception:  # never a verdict from our own failure: stop checking, the seal decides
            self.done = True
            reason = None
        self.free = self._in_string and not self._tracking and not self._escape and not self.done
        return reason

    def _feed(self, text: str) -> str | None:
        i, n = 0, len(text)
        frames = self._frames
        while i < n:
            if self._in_string:
                start = i
                if self._escape:
                    self._escape = False
                    i += 1  # the character a backslash at the end of the last fragment escaped
                end = _IN_STRING.match(text, i).end()  # type: ignore[union-attr]  # matches ""
                if end < n:
                    if text[end] == "\\":
                        # A backslash the fragment cut: its escaped character comes next.
                        self._escape = True
                        if self._tracking:
                            self._buffer.append(text[start:])
                        return self._over_limit()
                elif self._tracking:
                    self._buffer.append(text[start:])
                    return self._over_limit() or self._prefix()
                else:
                    return None
                if self._tracking:
                    self._buffer.append(text[start:end])
                self._in_string = False
                i = end + 1
                reason = self._string_closed()
                if reason is not None:
                    return self._verdict(reason)
                if self.done:
                    return None
                continue
            if self._in_literal:
                m = _LITERAL_END.search(text, i)
                if m is None:
                    return None
                self._in_literal = False
                i = m.start()
                continue
            c = text[i]
            if c in _SPACE:
                i += 1
                continue
            frame = frames[-1] if frames else None
            expect = _VALUE if frame is None else frame.expect
            if expect == _VALUE:
                reason = self._value(c, frame)
                if reason is not None:
                    return self._verdict(reason)
                if self.done:
                    return None
                i += 1
                continue
            if expect == _KEY:
                if c == '"':
                    self._open_string(None, key=True)
                elif c == "}":
                    self._close()
                else:
                    self.done = True  # not JSON: the scanner says so, the seal refuses it
                    return None
                i += 1
                continue
            if expect == _COLON:
                if c != ":":
                    self.done = True
                    return None
                frame.expect = _VALUE  # type: ignore[union-attr]
                i += 1
                continue
            # _COMMA: after a value
            if c == ",":
                frame.expect = _KEY if frame.object else _VALUE  # type: ignore[union-attr]
            elif c in "}]":
                self._close()
            else:
                self.done = True
                return None
            i += 1
        return None

    # -- values --------------------------------------------------------------------------------

    def _node_here(self, frame: _Frame | None) -> Node | None:
        if frame is None:
            return self._root
        node = frame.node
        if node is None:
            return None
        if frame.object:
            return node.props.get(frame.key) if frame.key is not None else None
        return node.items

    def _value(self, c: str, frame: _Frame | None) -> str | None:
        node = self._node_here(frame)
        if frame is not None:
            frame.count += 1
        if c == "{":
            kind = "object"
        elif c == "[":
            kind = "array"
        elif c == '"':
            kind = "string"
        elif c in "tf":
            kind = "boolean"
        elif c == "n":
            kind = "null"
        elif c == "-" or "0" <= c <= "9":
            kind = "number"
        else:
            self.done = True  # not JSON
            return None
        if node is not None and node.types is not None and kind not in node.types:
            allowed = (node.shown or " or ".join(sorted(node.types))) if node.types else "no value at all"
            article = "an" if kind[0] in "aeiou" else "a"
            return f"{self._path()}: {article} {kind} began where the schema allows {allowed}"
        if frame is not None:
            frame.expect = _COMMA
        if kind == "object" or kind == "array":
            if len(self._frames) >= MAX_DEPTH:
                self.done = True
                return None
            self._frames.append(_Frame(node, kind == "object"))
        elif frame is None:
            self.done = True  # a top-level value that is no object: refused at seal anyway
        elif kind == "string":
            self._open_string(node, key=False)
        else:
            self._in_literal = True
        return None

    def _open_string(self, node: Node | None, *, key: bool) -> None:
        self._in_string = True
        self._key = key
        self._buffer = []
        self._string_node = node
        # Kept only as far as an allowed value could reach: a character of a string's value takes
        # at most twelve characters of text (a surrogate pair written as two ``\\u`` escapes).
        if key:
            owner = self._frames[-1].node
            self._tracking = owner is not None and bool(owner.props or owner.closed)
            longest = max((len(p) for p in owner.props), default=0) if owner is not None else 0
        else:
            self._tracking = node is not None and node.strings is not None
            longest = node.longest if node is not None else 0
        self._limit = 12 * longest + 12

    def _over_limit(self) -> str | None:
        """The tracked string grew past any allowed value: decided now (a key: unknown)."""
        if not self._tracking:
            return None
        buffer = self._buffer
        if len(buffer) > 8:  # kept short, so that the sum below stays cheap however it is cut
            buffer[:] = ["".join(buffer)]
        if sum(len(p) for p in buffer) > self._limit:
            return self._decide_string(None)
        return None

    def _prefix(self) -> str | None:
        """An ``enum`` string so far that no member starts with (read only while it holds no
        escape: its text is then its value)."""
        node = self._string_node
        if not self._tracking or node is None or node.strings is None or len(node.strings) > _PREFIX_MEMBERS:
            return None  # a long enum is held to its members when the string closes (one lookup)
        so_far = "".join(self._buffer)
        self._buffer = [so_far]
        if "\\" in so_far or any(s.startswith(so_far) for s in node.strings):
            return None
        return self._verdict(f"{self._path()}: no allowed value starts with {so_far[:40]!r}")

    def _string_closed(self) -> str | None:
        if not self._tracking:
            if self._key:
                frame = self._frames[-1]
                frame.key = None
                frame.expect = _COLON
            return None
        raw = "".join(self._buffer)
        self._buffer = []
        if len(raw) > self._limit:
            return self._decide_string(None)
        try:
            value = json.loads('"' + raw + '"')
        except ValueError:
            self.done = True  # not a JSON string: the seal refuses it
            return None
        return self._decide_string(value)

    def _decide_string(self, value: str | None) -> str | None:
        """A whole key or ``enum`` string (``value`` None: longer than anything it could be)."""
        self._tracking = False
        if self._key:
            frame = self._frames[-1]
            self._buffer = []
            node = frame.node
            if value is not None and node is not None and value in node.props:
                frame.key = value
            else:
                frame.key = None
                if node is not None and node.closed:
                    shown = "a key longer than any property" if value is None else repr(value[:40])
                    return self._verdict(
                        f"{self._path()}: {shown} is not one of the properties "
                        f"({', '.join(sorted(node.props)) or 'none'}) and additionalProperties is false"
                    )
            frame.expect = _COLON
            return None
        node = self._string_node
        self._buffer = []
        if node is not None and node.strings is not None and (value is None or value not in node.strings):
            allowed = ", ".join(repr(s) for s in sorted(node.strings)[:8]) or "none"
            return self._verdict(f"{self._path()}: the string is not one of the allowed values ({allowed})")
        return None

    def _close(self) -> None:
        self._frames.pop()
        if not self._frames:
            self.done = True  # the value is whole: the seal takes it from here

    def _verdict(self, reason: str) -> str:
        self.done = True
        return reason

    def _path(self) -> str:
        parts: list[str] = []
        for frame in self._frames:
            if frame.object:
                if frame.key is not None:
                    parts.append(frame.key)
            else:
                parts.append(str(max(frame.count - 1, 0)))
        return "/".join(parts) or "(root)"
