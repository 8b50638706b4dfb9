"""``calls_of(completion, tools=...)``: the ``ToolCall`` view of a completion that was not streamed.

A non-streamed response carries malformed or truncated arguments as often as a streamed one; it
deserves the same strict parse, schema check, contract check, statuses and errors. Rather than a
second implementation of those rules, the completion is read as what it is equivalent to: one
chunk holding every choice whole (``message`` as the ``delta``, each call at its list position as
its ``index``), fed to an :class:`~toolstitch.Accumulator`, then the end of the input. So a choice
that finished with ``length`` leaves its calls ``incomplete``, one without a ``finish_reason`` too,
and every provider quirk the core repairs (arguments sent as an object, ...) is repaired and
recorded here as it is in a stream.

The completion itself is only read: the SDK's object (or dict) is never changed.

A Responses API ``Response`` (the SDK's, or a dict with ``"object": "response"``) is read by the
Responses reader instead (``_responses_stream.response_tool_calls``), with the same checks.

Its first name was ``tool_calls``; ``toolstitch.tool_calls`` still resolves, with a
``DeprecationWarning``, for one release (:func:`calls_of` says why the name changed).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal

from ..core import Limits, ToolCall
from ..recording import given_contract
from ._responses_stream import is_response, response_tool_calls
from ._shape import as_chunk

__all__ = ["calls_of"]


def calls_of(
    completion: Any,
    *,
    tools: Iterable[Any] | None = None,
    tool_choice: Any = None,
    parallel_tool_calls: bool | None = None,
    function_call: Any = None,
    choice: int | None = 0,
    limits: Limits | None = None,
    empty_arguments: Literal["invalid", "object"] = "invalid",
    recover_text_tool_calls: bool = False,
) -> list[ToolCall]:
    """The tool calls of a non-streamed ``ChatCompletion`` (an SDK object or a dict), sealed and
    checked as a stream's are: ``ready`` only when the choice finished, the arguments parse
    strictly, and they satisfy the offered tool's schema and the request's ``tool_choice`` /
    ``parallel_tool_calls``; otherwise ``invalid`` (``error`` says why) or ``incomplete``.

    ``tools`` are the request's (omitted: names and schemas go unchecked; ``[]``: every call is
    ``invalid``). ``choice`` picks one choice's calls by its ``index`` (``None``: every choice's).
    Never raises on a hostile completion: what cannot be read becomes an anomaly on the calls
    (``call.anomalies``) and never a ``ready`` call. ``ts.assistant_message(completion)`` and
    ``ts.tool_message(call, ...)`` / ``ts.call_error_text(call)`` build the history from it as
    from a stream.

    A Responses API ``Response`` is read the same way: its ``function_call`` items are the calls
    (``id`` is the item's ``call_id``, in output order), ``ready`` only when its ``status`` is
    ``"completed"``; ``tools`` and ``tool_choice`` in this API's flat shape or the chat one.

    Why ``calls_of`` (its first name was ``tool_calls``): ``stream.tool_calls`` and
    ``accumulator.tool_calls`` are properties, choice 0's calls of a stream, which grow while it
    streams; this is a function you hand a finished result to, and it returns that result's calls,
    every choice on request. One name for both read as if ``ts.tool_calls(x)`` were the property
    fetched from ``x``. ``calls_of(completion)`` says it takes what it reads from, and stays true
    for a Responses API ``Response``, which ``completion_calls`` would not.
    """
    if is_response(completion):
        return response_tool_calls(
            completion,
            tools=tools,
            tool_choice=tool_choice,
            parallel_tool_calls=parallel_tool_calls,
            limits=limits,
            empty_arguments=empty_arguments,
        )
    accumulator = given_contract(tools, tool_choice, function_call, parallel_tool_calls).accumulator(
        limits=limits,
        empty_arguments=empty_arguments,
        recover_text_tool_calls=recover_text_tool_calls,
    )
    try:
        chunk = as_chunk(completion)
    except Exception:  # a hostile mapping that fails when read: the core refuses the raw value
        chunk = completion
    accumulator.feed(chunk)
    accumulator.end()
    return accumulator.calls(choice)
