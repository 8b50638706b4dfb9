"""Chunks and completions as the core reads them, for sources that are not the SDK's own objects.

The core reads a chunk's fields from a dict, or from an SDK model's ``__dict__`` (rule 7: no dump
per chunk). Two kinds of input need a shape first, done here level by level (chunk, choices,
delta or message, tool calls, function), never deeper and never by a full dump:

* :func:`plain_chunk`: a pydantic model that is not the SDK's (LiteLLM's ``ModelResponseStream``
  keeps ``content``, ``role`` and ``tool_calls`` among its extras, where the core does not look);
* :func:`as_chunk`: a non-streamed completion, read as the one chunk it is equivalent to
  (``message`` as the ``delta``; each call at its list position as its ``index``).

Neither changes what it is given; both return anything that is not an object as it is, for the
core to refuse (with an anomaly).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import openai
from pydantic import BaseModel

__all__ = ["as_chunk", "fields_of", "plain_chunk"]


def fields_of(value: Any) -> Any:
    """A JSON object as a dict (a model's fields and its provider extras), without copying deeper:
    what the core reads per level. Anything else is returned as it is, for the core to refuse."""
    if type(value) is dict:
        return value
    if isinstance(value, BaseModel):
        fields = dict(value.__dict__)
        fields.update(value.__pydantic_extra__ or {})
        return fields
    if isinstance(value, Mapping):
        return dict(value)
    return value


def _delta(message: Any) -> Any:
    """A finished message as a delta: its calls get their list position as ``index`` (a finished
    list is in order and holds each call once, whatever ``index`` a provider left on it)."""
    delta = fields_of(message)
    if type(delta) is not dict:
        return delta
    calls = delta.get("tool_calls")
    if type(calls) is list:
        delta = {**delta, "tool_calls": [_indexed(call, n) for n, call in enumerate(calls)]}
    return delta


def _indexed(call: Any, position: int) -> Any:
    call = fields_of(call)
    if type(call) is not dict:
        return call
    function = call.get("function")
    fields = {**call, "index": position}
    if function is not None:
        fields["function"] = fields_of(function)
    return fields


def _choice(choice: Any) -> Any:
    fields = fields_of(choice)
    if type(fields) is not dict:
        return fields
    out = {k: v for k, v in fields.items() if k != "message"}
    out["delta"] = _delta(fields.get("message"))
    return out


def as_chunk(completion: Any) -> Any:
    """The one chunk a non-streamed ``completion`` is equivalent to (see the module docstring)."""
    fields = fields_of(completion)
    if type(fields) is not dict:
        return fields
    chunk = {k: v for k, v in fields.items() if k != "choices"}
    choices = fields.get("choices")
    chunk["choices"] = [_choice(c) for c in choices] if type(choices) is list else choices
    return chunk


def plain_chunk(chunk: Any) -> Any:
    """``chunk`` as the core reads it: an SDK model or a dict as it is (the cheap path); another
    pydantic model as dicts down to its calls' ``function``, its extras included."""
    if type(chunk) is dict or isinstance(chunk, openai.BaseModel) or not isinstance(chunk, BaseModel):
        return chunk
    fields = fields_of(chunk)
    choices = fields.get("choices")
    if type(choices) is list:
        fields["choices"] = [_plain_choice(c) for c in choices]
    return fields


def _copy(value: Any) -> Any:
    """:func:`fields_of`, and a copy of a dict: the caller's own dicts are never written to."""
    return dict(value) if type(value) is dict else fields_of(value)


def _plain_choice(choice: Any) -> Any:
    fields = _copy(choice)
    if type(fields) is not dict:
        return fields
    delta = _copy(fields.get("delta"))
    if type(delta) is dict:
        calls = delta.get("tool_calls")
        if type(calls) is list:
            delta["tool_calls"] = [_plain_call(c) for c in calls]
        fields["delta"] = delta
    return fields


def _plain_call(call: Any) -> Any:
    fields = _copy(call)
    if type(fields) is dict and fields.get("function") is not None:
        fields["function"] = fields_of(fields["function"])
    return fields
