"""The contract of a Responses API request, read by the one contract reader (rule 10).

A Responses request offers its tools flat (``{"type": "function", "name": ..., "parameters": ...,
"strict": ...}``) and says ``tool_choice`` flat too (``{"type": "function", "name": ...}``,
``{"type": "allowed_tools", "mode": ..., "tools": [...]}``). They are put in the Chat Completions
shape (``core._responses.chat_tools`` / ``chat_tool_choice``), wherever the SDK sends them from
(``create``'s keyword arguments, ``extra_body`` over them), and then read by
:func:`~._contract.read_contract`, so a Responses request is held to exactly the rules of a chat
request: one that cannot be read refuses every call.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Literal

from ..core import Limits, ResponseAccumulator, chat_tool_choice, chat_tools
from ._contract import Contract, read_contract
from ._plain import is_sentinel

__all__ = ["chat_shaped", "given_responses_contract", "read_responses_contract", "responses_accumulator"]


def _shaped_fields(fields: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(fields)
    tools = out.get("tools")
    if isinstance(tools, list | tuple) and not is_sentinel(tools):
        out["tools"] = chat_tools(tools)
    choice = out.get("tool_choice")
    if choice is not None and not is_sentinel(choice):
        out["tool_choice"] = chat_tool_choice(choice)
    out.pop("functions", None)  # not a Responses parameter: never read as offered tools
    out.pop("function_call", None)
    return out


def chat_shaped(request: Mapping[str, Any]) -> dict[str, Any]:
    """``request`` (a Responses request's keyword arguments) with its ``tools`` and ``tool_choice``,
    and those of its ``extra_body``, in the Chat Completions shape :func:`read_contract` reads."""
    out = _shaped_fields(request)
    extra = out.get("extra_body")
    if isinstance(extra, Mapping):
        out["extra_body"] = _shaped_fields(extra)
    return out


def read_responses_contract(request: Mapping[str, Any]) -> Contract:
    """The contract of a Responses request: readable, or unreadable with the reason."""
    try:
        shaped = chat_shaped(request)
    except Exception as exc:  # a hostile mapping that fails when read
        return Contract([], unreadable=f"reading it raised {type(exc).__name__}")
    return read_contract(shaped)


def given_responses_contract(
    tools: Iterable[Any] | None, tool_choice: Any, parallel_tool_calls: Any
) -> Contract:
    """The contract a caller passes by hand (``ts.calls_of(response, tools=...)``): ``tools=None``
    means "not known" (names and schemas unchecked)."""
    tool_list = list(tools) if tools is not None and not isinstance(tools, str | bytes | Mapping) else tools
    contract = read_responses_contract(
        {"tools": tool_list, "tool_choice": tool_choice, "parallel_tool_calls": parallel_tool_calls}
    )
    if tools is None and contract.unreadable is None:
        return Contract(None, contract.tool_choice, contract.parallel_tool_calls)
    return contract


def responses_accumulator(
    contract: Contract,
    *,
    limits: Limits | None = None,
    empty_arguments: Literal["invalid", "object"] = "invalid",
    started_at: float | None = None,
    clock: Callable[[], float] | None = None,
) -> ResponseAccumulator:
    """A :class:`ResponseAccumulator` that holds every call to ``contract``: the contract's own
    :meth:`Contract.accumulator`, of the Responses reader's class."""
    accumulator = contract.accumulator(
        limits=limits,
        empty_arguments=empty_arguments,
        started_at=started_at,
        clock=clock,
        kind=ResponseAccumulator,
    )
    return accumulator
