"""Fast decoding of Responses API stream events: the SDK's own event objects, built by one validator.

The SDK turns each ``data:`` payload of a Responses stream into a ``ResponseStreamEvent`` with
``openai._models.construct_type``, which for this union first runs pydantic's lax validation of the
whole union (``validate_type``): pydantic tries the union's members one by one (about 60 of them),
so a 5-byte ``response.function_call_arguments.delta`` costs about 100 µs, a ``response.completed``
several hundred. Only when that validation fails does the SDK construct the member its
discriminator (``type``) names, or failing that the first member that constructs.

:func:`build_event` validates the payload against the one member its ``type`` names, in the same
lax mode, and gives up (``None``: the SDK's own construction runs) whenever that fails. Why the
result is the SDK's own, field for field:

* Every member of the union has a required ``type: Literal[...]`` field (no alias), and no two
  members share a literal (:data:`_MEMBERS` proves both from the installed release's annotations,
  or stays ``None`` and nothing is built fast). So for a payload whose ``type`` is a ``str``, no
  member but the one that literal names can accept it: lax validation of a ``Literal`` of strings
  accepts only an equal string.
* A union that exactly one member accepts returns that member's own validation of the value: the
  same validator, the same mode, hence the same class, ``__dict__``, extras and
  ``model_fields_set`` at every level.
* When that member refuses, so does the union, and the SDK's construction decides: the builder
  returns ``None`` (as for a ``type`` the union does not know, or a payload that is not a ``dict``).

:func:`sample_events` are the payloads the self-check in :mod:`._fast` builds both ways at first
use; a release where any differs keeps the SDK's decoding for Responses streams.
"""

from __future__ import annotations

import contextlib
import inspect
import types
import typing
from collections.abc import Callable
from typing import Any, Literal

import pydantic
import pydantic_core
from openai import _models as sdk_models

__all__ = ["EVENT_TYPE", "build_event", "sample_events"]


def _event_type() -> Any:
    try:
        from openai.types.responses import ResponseStreamEvent
    except ImportError:  # a release without the Responses API (the 1.55.3 floor): nothing to build
        return None
    return ResponseStreamEvent


#: The ``cast_to`` of the SDK's Responses streams (``None`` on a release without the API).
EVENT_TYPE: Any = _event_type()


def _members(event_type: Any) -> dict[str, type[pydantic.BaseModel]] | None:
    """Each ``type`` literal of the union, mapped to the one member that declares it; ``None``
    when the union is not a union of models each with its own required ``type`` literals."""
    if event_type is None:
        return None
    union = event_type
    if typing.get_origin(union) is typing.Annotated:
        union = typing.get_args(union)[0]
    origin = typing.get_origin(union)
    if origin is not typing.Union and origin is not types.UnionType:
        return None
    mapping: dict[str, type[pydantic.BaseModel]] = {}
    for member in typing.get_args(union):
        if not (inspect.isclass(member) and issubclass(member, sdk_models.BaseModel)):
            return None
        field = member.model_fields.get("type")
        if field is None or not field.is_required():
            return None
        if field.alias not in (None, "type") or field.validation_alias not in (None, "type"):
            return None
        if typing.get_origin(field.annotation) is not Literal:
            return None
        for literal in typing.get_args(field.annotation):
            if type(literal) is not str or literal in mapping:
                return None
            mapping[literal] = member
    return mapping or None


_MEMBERS = _members(EVENT_TYPE)


#: Each member's validator, bound once it is first needed (the SDK's models build their validators
#: lazily, and building all of them at import would cost every user, not only Responses streams).
_validators: dict[str, Callable[[Any], Any]] = {}


def _validator(kind: str) -> Callable[[Any], Any] | None:
    """The lax validation of the member ``kind`` names: its ``model_validate``, or once the model's
    validator is built, that validator's ``validate_python`` (what ``model_validate`` calls), bound
    once, one call shorter. A validator wrapped by a pydantic plugin is taken as it is, wrapper
    and all, as ``model_validate`` takes it."""
    member = None if _MEMBERS is None else _MEMBERS.get(kind)
    if member is None:
        return None
    validate: Callable[[Any], Any] = member.model_validate
    with contextlib.suppress(Exception):
        member.__pydantic_validator__.validate_python  # noqa: B018 (builds a deferred validator)
        validator = member.__pydantic_validator__
        if isinstance(validator, pydantic_core.SchemaValidator) or type(validator).__name__ == (
            "PluggableSchemaValidator"
        ):
            validate = validator.validate_python
    _validators[kind] = validate
    return validate


def build_event(data: Any) -> Any:
    """``data`` (one decoded ``data:`` payload of a Responses stream) as the SDK would build it, or
    ``None`` when only the SDK's own construction gives what the SDK gives (then call it)."""
    if type(data) is not dict:
        return None
    kind = data.get("type")
    if type(kind) is not str:
        return None
    validate = _validators.get(kind) or _validator(kind)
    if validate is None:
        return None
    try:
        return validate(data)
    except Exception:  # refused (or a hostile value): the SDK's construction decides what happens
        return None


def sample_events() -> list[Any]:
    """Payloads that exercise every rule above: the events a tool-calling stream sends, extras at
    every level, ints where floats are declared, and payloads the SDK alone must build."""
    response = _sample_response()
    call = {
        "id": "fc_1",
        "type": "function_call",
        "status": "in_progress",
        "arguments": "",
        "call_id": "c",
        "name": "f",
    }
    done = {**call, "status": "completed", "arguments": '{"a":1}', "extra": 1}
    return [
        {"type": "response.created", "response": response, "sequence_number": 0},
        {"type": "response.in_progress", "response": response, "sequence_number": 1},
        *_function_call_events(call, done),
        *_other_item_events(),
        *_ending_events(response, done),
        *_payloads_only_the_sdk_builds(),
    ]


def _sample_response() -> dict[str, Any]:
    """A response in progress, with a tool, an int where a float is declared and an extra field."""
    return {
        "id": "resp_1",
        "object": "response",
        "created_at": 1700000000,
        "status": "in_progress",
        "error": None,
        "incomplete_details": None,
        "instructions": None,
        "model": "m",
        "output": [],
        "parallel_tool_calls": True,
        "temperature": 1,
        "tool_choice": "auto",
        "tools": [{"type": "function", "name": "f", "parameters": {"type": "object"}, "strict": True}],
        "top_p": 1.0,
        "metadata": {},
        "x_extra": {"nested": [1, 2.5]},
    }


def _function_call_events(call: dict[str, Any], done: dict[str, Any]) -> list[dict[str, Any]]:
    """One function call's life: its item added, a delta of its arguments, their ``.done`` (with
    an extra field), its item done."""
    return [
        {"type": "response.output_item.added", "output_index": 0, "item": call, "sequence_number": 2},
        {
            "type": "response.function_call_arguments.delta",
            "item_id": "fc_1",
            "output_index": 0,
            "delta": "{",
            "sequence_number": 3,
        },
        {
            "type": "response.function_call_arguments.done",
            "item_id": "fc_1",
            "output_index": 0,
            "arguments": "{}",
            "sequence_number": 4,
            "z": None,
        },
        {"type": "response.output_item.done", "output_index": 0, "item": done, "sequence_number": 5},
    ]


def _other_item_events() -> list[dict[str, Any]]:
    """The other items a tool-calling stream sends: reasoning added, a text delta, a content part."""
    return [
        {
            "type": "response.output_item.added",
            "output_index": 1,
            "item": {"id": "rs_1", "type": "reasoning", "summary": [], "encrypted_content": "e"},
            "sequence_number": 6,
        },
        {
            "type": "response.output_text.delta",
            "item_id": "msg_1",
            "output_index": 1,
            "content_index": 0,
            "delta": "h",
            "logprobs": [],
            "sequence_number": 7,
        },
        {
            "type": "response.content_part.added",
            "item_id": "msg_1",
            "output_index": 1,
            "content_index": 0,
            "part": {"type": "output_text", "text": "", "annotations": []},
            "sequence_number": 8,
        },
    ]


def _ending_events(response: dict[str, Any], done: dict[str, Any]) -> list[dict[str, Any]]:
    """How a stream ends: ``response.completed`` (a message, the call ``done`` and the usage, extras
    in its details), ``response.failed``, an ``error`` event."""
    message = {
        "id": "msg_1",
        "type": "message",
        "status": "completed",
        "role": "assistant",
        "content": [{"type": "output_text", "text": "hi", "annotations": [], "logprobs": []}],
    }
    usage = {
        "input_tokens": 1,
        "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0, "more": 1},
        "output_tokens": 2,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 3,
    }
    finished = {**response, "status": "completed", "output": [message, done], "usage": usage}
    return [
        {"type": "response.completed", "response": finished, "sequence_number": 9},
        {
            "type": "response.failed",
            "response": {**response, "status": "failed", "error": {"code": "server_error", "message": "x"}},
            "sequence_number": 10,
        },
        {"type": "error", "code": None, "message": "boom", "param": None, "sequence_number": 11},
    ]


def _payloads_only_the_sdk_builds() -> list[Any]:
    """Payloads the member their ``type`` names refuses (an unknown item, a field missing, values of
    the wrong type), ``type``s the union does not know, and payloads that are not a ``dict``:
    :func:`build_event` gives ``None`` for each."""
    return [
        {
            "type": "response.output_item.added",
            "output_index": 2,
            "item": {"id": "x", "type": "unknown_item"},
            "sequence_number": 12,
        },
        {"type": "response.function_call_arguments.delta", "item_id": "fc_1", "delta": "{"},
        {
            "type": "response.function_call_arguments.delta",
            "item_id": 1,
            "output_index": "0",
            "delta": "{",
            "sequence_number": 3,
        },
        {
            "type": "response.output_text.delta",
            "item_id": "m",
            "output_index": True,
            "content_index": 0,
            "delta": "h",
            "sequence_number": 1.0,
        },
        {"type": "response.unknown", "sequence_number": 1},
        {"type": "", "sequence_number": 1},
        {"type": None},
        {"sequence_number": 1},
        [1, 2],
        "text",
    ]
