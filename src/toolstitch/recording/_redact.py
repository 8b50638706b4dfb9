"""Redaction: argument and content text masked character by character, shapes kept.

Redaction (``redact=True``, or ``"arguments"`` / ``"content"``) masks text but keeps its shape: the
characters of JSON string values in tool-call arguments become ``x``, digits become ``1``, object
keys and structure stay, so a redacted recording still replays into calls that parse, with the
same fragment sizes and timing. Credentials are another matter, masked always: see ``_secrets``.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any, Literal, TypeAlias

__all__ = ["Masker", "Redact", "redact_parts"]

Redact: TypeAlias = bool | Literal["arguments", "content"] | Collection[Literal["arguments", "content"]]
"""``True`` masks both; ``"arguments"`` only tool-call arguments; ``"content"`` only text content."""


def redact_parts(redact: Redact) -> set[str]:
    """What ``redact`` asks to mask; raises ``ValueError`` for anything but the documented values."""
    if redact is True:
        return {"arguments", "content"}
    if redact is False or not redact:
        return set()
    parts: set[str] = {redact} if isinstance(redact, str) else set(redact)
    unknown = parts - {"arguments", "content"}
    if unknown:
        raise ValueError(f"redact accepts True, 'arguments' or 'content'; got {sorted(unknown)}")
    return parts


class Masker:
    """Masks argument and content text in chunks and requests, keeping every length and shape."""

    def __init__(self, redact: Redact) -> None:
        parts = redact_parts(redact)
        self.parts = parts
        self.active = bool(parts)
        self._arguments = "arguments" in parts
        self._content = "content" in parts
        self._scanners: dict[tuple[Any, Any], _JSONMasker] = {}

    def chunk(self, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        for choice in data.get("choices") or []:
            if not isinstance(choice, dict):
                continue
            delta = choice.get("delta")
            if isinstance(delta, dict):
                self._delta(choice.get("index"), delta)
            if self._content and isinstance(choice.get("logprobs"), dict):
                choice["logprobs"] = _mask_logprobs(choice["logprobs"])
        return data

    def _delta(self, choice: Any, delta: dict[str, Any]) -> None:
        for key, value in list(delta.items()):
            if key == "tool_calls" and isinstance(value, list):
                for position, call in enumerate(value):
                    if isinstance(call, dict):
                        self._call(choice, call.get("index", position), call)
            elif key == "function_call" and isinstance(value, dict):
                self._call(choice, "function_call", {"function": value})
            elif key != "role" and self._content:
                delta[key] = _mask_text(value)

    def _call(self, choice: Any, index: Any, call: dict[str, Any]) -> None:
        function = call.get("function")
        if not self._arguments or not isinstance(function, dict):
            return
        key = (choice, index if isinstance(index, (int, str)) else None)
        if call.get("id") or key not in self._scanners:
            self._scanners[key] = _JSONMasker()  # a new call starts a new JSON text
        arguments = function.get("arguments")
        if isinstance(arguments, str):
            function["arguments"] = self._scanners[key].feed(arguments)
        elif arguments is not None:
            function["arguments"] = _mask_value(arguments)

    def request(self, request: dict[str, Any]) -> dict[str, Any]:
        messages = request.get("messages")
        if not isinstance(messages, list):
            return request
        for message in messages:
            if not isinstance(message, dict):
                continue
            if self._content:
                for key in ("content", "refusal", "reasoning_content", "reasoning"):
                    if key in message:
                        message[key] = _mask_text(message[key])
            if self._arguments:
                for call in message.get("tool_calls") or []:
                    function = call.get("function") if isinstance(call, dict) else None
                    if isinstance(function, dict) and isinstance(function.get("arguments"), str):
                        function["arguments"] = _JSONMasker().feed(function["arguments"])
        return request


def _mask_text(value: Any) -> Any:
    """Text content: every non-space character becomes ``x`` (lengths and line breaks survive)."""
    if isinstance(value, str):
        return "".join(c if c.isspace() else "x" for c in value)
    if isinstance(value, list):
        return [_mask_text(v) for v in value]
    if isinstance(value, dict):
        return {k: (v if k in ("type", "index", "id", "format") else _mask_text(v)) for k, v in value.items()}
    return value


def _mask_value(value: Any) -> Any:
    """A JSON value sent as an object: strings masked, numbers replaced, keys kept."""
    if isinstance(value, str):
        return "x" * len(value)
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, (int, float)):
        return 1
    if isinstance(value, list):
        return [_mask_value(v) for v in value]
    if isinstance(value, dict):
        return {k: _mask_value(v) for k, v in value.items()}
    return value


def _mask_logprobs(logprobs: dict[str, Any]) -> dict[str, Any]:
    def entry(item: Any) -> Any:
        if not isinstance(item, dict):
            return item
        out = dict(item)
        if isinstance(out.get("token"), str):
            out["token"] = _mask_text(out["token"])
        if isinstance(out.get("bytes"), list):
            out["bytes"] = [120] * len(out["bytes"])  # b"x"
        if isinstance(out.get("top_logprobs"), list):
            out["top_logprobs"] = [entry(t) for t in out["top_logprobs"]]
        return out

    return {k: ([entry(i) for i in v] if isinstance(v, list) else v) for k, v in logprobs.items()}


class _JSONMasker:
    """Masks JSON text fragment by fragment, carrying its state across fragments.

    Inside string values every character (escapes included) becomes ``x``; outside strings digits
    become ``1``; object keys, punctuation and ``true``/``false``/``null`` are kept. Lengths are
    kept character for character, so the masked text is valid JSON exactly when the original is.
    """

    __slots__ = ("_escape", "_expect_key", "_in_key", "_in_string", "_stack")

    def __init__(self) -> None:
        self._stack: list[str] = []
        self._in_string = False
        self._in_key = False
        self._escape = False
        self._expect_key = False

    def feed(self, text: str) -> str:
        out: list[str] = []
        for c in text:
            if self._in_string:
                if self._escape:
                    self._escape = False
                    out.append(c if self._in_key else "x")
                elif c == "\\":
                    self._escape = True
                    out.append(c if self._in_key else "x")
                elif c == '"':
                    self._in_string = False
                    out.append(c)
                else:
                    out.append(c if self._in_key else "x")
                continue
            if c == '"':
                self._in_string = True
                self._in_key = self._expect_key
                self._expect_key = False
            elif c in "{[":
                self._stack.append(c)
                self._expect_key = c == "{"
            elif c in "}]":
                if self._stack:
                    self._stack.pop()
                self._expect_key = False
            elif c == ",":
                self._expect_key = bool(self._stack) and self._stack[-1] == "{"
            elif c in "0123456789":
                c = "1"
            out.append(c)
        return "".join(out)
