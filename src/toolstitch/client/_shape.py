"""A non-streamed completion as the one chunk it is equivalent to, for ``ts.calls_of(completion)``.

:func:`as_chunk` reads ``message`` as the ``delta`` and gives each call its list position as its
``index``. Streamed chunks need no shape of their own: the core reads every object the way
:func:`~toolstitch.core._values.read_object` decides (a dict, the SDK's models, and any other pydantic
model, such as LiteLLM's, whose fields may sit among pydantic's extras), and the objects of a
completion are read here by that same function, so that a field kept both as a declared field and
as an extra means the same thing in a stream and in a completion.

Nothing is changed in what is given; anything that is not an object is returned as it is, for the
core to refuse (with an anomaly).
"""

from __future__ import annotations

from typing import Any

from ..core import CHUNK_KEYS, DELTA_KEYS, TOOL_CALL_KEYS, Shape, read_object

__all__ = ["as_chunk"]

_COMPLETION = Shape(CHUNK_KEYS, ("choices",))
_CHOICE = Shape(frozenset({"index", "message", "finish_reason", "logprobs"}), ("message",))
_MESSAGE = Shape(DELTA_KEYS, ("tool_calls",))
_CALL = Shape(TOOL_CALL_KEYS, ("index",))


def _fields(value: Any, shape: Shape) -> dict[str, Any] | None:
    """The fields of an object as the core reads them (never written to here), or None."""
    read = read_object(value, shape)
    return None if read is None else read[0]


def _delta(message: Any) -> Any:
    """A finished message as a delta: its calls get their list position as ``index`` (a finished
    list is in order and holds each call once, whatever ``index`` a provider left on it)."""
    fields = _fields(message, _MESSAGE)
    if fields is None:
        return message
    calls = fields.get("tool_calls")
    if type(calls) is not list:
        return fields
    return {**fields, "tool_calls": [_indexed(call, n) for n, call in enumerate(calls)]}


def _indexed(call: Any, position: int) -> Any:
    fields = _fields(call, _CALL)
    return call if fields is None else {**fields, "index": position}


def _choice(choice: Any) -> Any:
    fields = _fields(choice, _CHOICE)
    if fields is None:
        return choice
    out = {k: v for k, v in fields.items() if k != "message"}
    out["delta"] = _delta(fields.get("message"))
    return out


def as_chunk(completion: Any) -> Any:
    """The one chunk a non-streamed ``completion`` is equivalent to (see the module docstring)."""
    fields = _fields(completion, _COMPLETION)
    if fields is None:
        return completion
    chunk = {k: v for k, v in fields.items() if k != "choices"}
    choices = fields.get("choices")
    chunk["choices"] = [_choice(c) for c in choices] if type(choices) is list else choices
    return chunk
