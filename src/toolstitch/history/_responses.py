"""History for the Responses API: the input items the next request accepts, and their rules.

A Responses request carries its history as ``input`` items (stateless), or names the previous
response (``previous_response_id``) and carries only what is new. Either way, after a function
call the next request must hold, for every ``function_call`` the model made, exactly one
``function_call_output`` with the same ``call_id``; an output whose call the server cannot find
earns "No tool call found for function call output with call_id ...", a call left unanswered "No
tool output found for function call ...", and a reasoning item sent without the item it produced
"... was provided without its required following item".

* :func:`response_items`: the output items of a response (a ``Response``, a stitched Responses
  stream, or the same as plain data) to append to ``input``: ``function_call`` items as received
  (their ``arguments`` text untouched), ``reasoning`` items kept (a reasoning model needs them
  back beside its calls), messages and every other item as the server sent them.
* :func:`function_call_output` / :func:`function_call_outputs`: the items answering calls, paired
  by ``call_id``, with the tool messages' rules (a call that is not ``ready`` never ran: it is
  answered with an error, never with a result).

The validator of these rules, ``validate_input`` (rules ``R00``-``R09``), is :mod:`._validate_input`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, cast

import pydantic

from ..core import serialisable, valid_unicode
from ._build import ToolCallLike, _answer_text, _AnswerWords, _call_facts, _is_result
from ._common import _MISSING, _plain

if TYPE_CHECKING:
    # What the builders return, for type checkers: the SDK's input item type, so their items go
    # into a ``ResponseInputParam`` as the SDK's own would. At run time they are plain dicts.
    from openai.types.responses import ResponseInputItemParam as InputItem

__all__ = [
    "function_call_output",
    "function_call_outputs",
    "response_items",
]

Item = dict[str, Any]

_CALLS = {"function_call": "arguments", "custom_tool_call": "input"}
"""The item types that are calls, and the field that holds each one's text."""
_OUTPUTS = {"function_call_output": "function_call", "custom_tool_call_output": "custom_tool_call"}
"""The item types that answer calls, and the call type each answers."""


def _is_call(kind: Any) -> bool:
    """``kind`` (an item's ``type``) names a call item. A type that is a list or an object, which a
    hostile history may hold, names none (and could not be looked up in ``_CALLS``)."""
    return isinstance(kind, str) and kind in _CALLS


def _response_of(source: Any) -> Any:
    """The response inside a stitched Responses stream (``get_final_response()``), or ``source``."""
    final = getattr(source, "get_final_response", None)
    if callable(final) and not isinstance(source, Mapping):
        return final()
    return source


def _dump(item: Any) -> Any:
    if isinstance(item, pydantic.BaseModel):
        # by alias (the SDK's ``async_`` is ``async`` on the wire), without the fields the
        # server did not send: the item goes back as it came
        return item.model_dump(mode="json", by_alias=True, exclude_unset=True, warnings=False)
    return _plain(item)


def response_items(source: Any, *, reasoning: bool = True) -> list[InputItem]:
    """The output items of a response, as input items for the next request.

    ``source`` is a ``Response``, a stitched Responses stream (its ``get_final_response()``), a
    response as a dict, or its ``output`` list. ``function_call`` items keep their ``id``,
    ``call_id``, ``name`` and ``arguments`` text exactly as received (``null`` fields the server
    sent are left out: input items do not take them); ``reasoning`` items are kept, and with
    ``reasoning=False`` only those that came with a call (the last one before each
    ``function_call``: OpenAI refuses a call sent back without it, rule R08). With ``store=False``
    a reasoning item can go back only with its ``encrypted_content``: ask for it with
    ``include=["reasoning.encrypted_content"]`` (``ts.run`` does). Every other item is kept as
    sent. Input is never changed: the items are copies.
    """
    response = _response_of(source)
    if isinstance(response, list | tuple):
        output: Any = response
    elif isinstance(response, Mapping):
        output = response.get("output")
    else:
        output = getattr(response, "output", None)
    if not isinstance(output, list | tuple):
        raise TypeError(
            f"expected a Response, a Responses stream or an output list, got {type(source).__name__}"
        )
    items: list[Item] = []
    for entry in output:
        data = _dump(entry)
        if not isinstance(data, Mapping):
            raise TypeError(f"an output item is {type(data).__name__}, not an object")
        # What no request can carry (a lone surrogate a hostile server put in a refused call, a
        # value nested too deep to write) is repaired as the chat completion's data is
        # (``core.serialisable``), so the next request can be sent whatever the response held.
        items.append(serialisable({k: v for k, v in data.items() if v is not None})[0])
    if not reasoning:
        kept = _reasoning_with_calls(items)
        items = [i for k, i in enumerate(items) if i.get("type") != "reasoning" or k in kept]
    return cast("list[InputItem]", items)


def _reasoning_with_calls(items: list[Item]) -> set[int]:
    """The positions of the reasoning items that came with a call: the last reasoning item before
    each ``function_call``. The server wants it back beside the call (R08), so
    ``reasoning=False`` never drops it."""
    kept: set[int] = set()
    last: int | None = None
    for k, item in enumerate(items):
        kind = item.get("type")
        if kind == "reasoning":
            last = k
        elif _is_call(kind) and last is not None:
            kept.add(last)
    return kept


def function_call_output(
    call: ToolCallLike | Any, result: Any = _MISSING, *, error: str | BaseException | None = None
) -> InputItem:
    """The ``function_call_output`` item answering ``call`` (a :class:`~toolstitch.ToolCall`, a
    ``function_call`` item of a response, or a dict with ``call_id``). A custom tool's call (a
    ``ToolCall`` whose ``type`` is ``"custom"``, or a ``custom_tool_call`` item) is answered with a
    ``custom_tool_call_output`` item, the type the server pairs it with.

    ``result`` is a ``str`` (sent as is) or any JSON value (compact JSON, as
    :func:`~toolstitch.history.tool_message` sends it); an exception as ``result``, or ``error=``,
    is an error result. A call that is not ``ready`` never ran: without an error result this raises
    :class:`~toolstitch.errors.CallNotReadyError`; answer it with
    ``function_call_output(call, error=call_error_text(call))``.
    """
    facts = _facts(call)
    output = _answer_text(call, facts, result, error, _OUTPUT_WORDS)
    kind = "custom_tool_call_output" if _is_custom(call) else "function_call_output"
    return cast("InputItem", {"type": kind, "call_id": valid_unicode(facts[0]), "output": output})


_OUTPUT_WORDS = _AnswerWords("function_call_output", "function call", "call_id", "output")
"""How :func:`function_call_output` names itself, a call and its answer when it refuses one."""


def _is_custom(call: Any) -> bool:
    """A custom tool's call: a ``ToolCall`` of ``type`` ``"custom"``, or a ``custom_tool_call`` item."""
    if isinstance(call, pydantic.BaseModel | Mapping):
        data = _plain(call)
        if isinstance(data, Mapping) and "call_id" in data:
            return data.get("type") == "custom_tool_call"
    return getattr(call, "type", None) == "custom"


def _facts(call: Any) -> tuple[Any, str | None, str | None, BaseException | None]:
    """``(call_id, name, status, error)`` of a ToolCall, a call item, or a dict."""
    if isinstance(call, pydantic.BaseModel | Mapping):
        data = _plain(call)
        if isinstance(data, Mapping) and ("call_id" in data or _is_call(data.get("type"))):
            name = data.get("name")
            return data.get("call_id"), name if isinstance(name, str) else None, None, None
    return _call_facts(call)


def function_call_outputs(items: Iterable[tuple[ToolCallLike | Any, Any] | Any]) -> list[InputItem]:
    """One ``function_call_output`` per item: a ``(call, result)`` pair, or an executed result of
    ``Toolbox.execute`` (anything with ``.call``, ``.ok`` and ``.content``). In the calls' output
    order when every call carries an ``index`` (toolstitch ``ToolCall``), else as given."""
    entries: list[tuple[Any, Any]] = []
    for item in items:
        if isinstance(item, tuple):
            if len(item) != 2:
                raise TypeError("function_call_outputs() takes (call, result) pairs or executed results")
            entries.append((item[0], item))
        elif _is_result(item):
            entries.append((item.call, item))
        else:
            raise TypeError(
                "function_call_outputs() takes (call, result) pairs or executed results, "
                f"got {type(item).__name__}"
            )
    if entries and all(isinstance(getattr(c, "index", None), int) for c, _ in entries):
        entries.sort(key=lambda e: tuple(getattr(e[0], k, 0) for k in ("choice", "index", "slot")))
    out: list[InputItem] = []
    for call, item in entries:
        if isinstance(item, tuple):
            out.append(function_call_output(call, item[1]))
        elif item.ok is True:
            out.append(function_call_output(_as_item(call), item.content))
        else:
            out.append(function_call_output(_as_item(call), error=item.content))
    return out


def _as_item(call: Any) -> Item:
    """An executed call as a bare item: the gate decided it ran, not its stream status."""
    call_id, name, _, _ = _facts(call)
    kind = "custom_tool_call" if _is_custom(call) else "function_call"
    return {"type": kind, "call_id": call_id, "name": name}
