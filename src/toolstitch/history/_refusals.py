"""What the model reads about a call that did not run, for each kind of refusal, written once.

Two places tell a model that its call was refused: ``ts.call_error_text(call)``, for a user's own
loop, and ``ts.run``'s gate (``tools/_gate.py``), which answers each refused call with a tool
message. Both take the words from here, so a call gets the same advice whichever answers it, and
the advice fits what was wrong: an unknown tool names the tools that exist, a call that broke the
request's ``tool_choice`` is told to answer without it, a second call under
``parallel_tool_calls=False`` to make one call at a time; only arguments that are not one JSON
object are told to send one. This is the lowest layer both need (the gate is in ``tools/``, above).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from ..errors import (
    ArgumentsNotAnObject,
    CallIncomplete,
    ContractViolation,
    EmptyArguments,
    InternalFault,
    LateFragment,
    LimitExceeded,
    MalformedArguments,
    MissingName,
    SchemaViolation,
    UnknownTool,
)

__all__ = ["call_refusal_text", "invalid_arguments_text", "unknown_tool_text", "wrong_kind_text"]

#: What a call refused because of ``tool_choice`` or ``parallel_tool_calls`` should do instead,
#: by :attr:`~toolstitch.errors.ContractViolation.kind`.
_CONTRACT_ADVICE = {
    "tool_choice_none": "Answer without calling a tool.",
    "tool_choice": "Call only the tools the request allows.",
    "parallel_tool_calls": (
        "Make one tool call at a time: send this call again on its own after the first call's "
        "result, if it is still needed."
    ),
    "unreadable": "Answer without calling a tool.",
}

#: The arguments, or the input, could not be read as the call's type needs them.
_UNREADABLE = (MalformedArguments, ArgumentsNotAnObject, EmptyArguments, LateFragment)


def shown(name: Any) -> str:
    """A tool name as the texts quote it (``'get_weather'``), or ``(no name)``."""
    return repr(name) if isinstance(name, str) and name else "(no name)"


def unknown_tool_text(name: Any, available: Iterable[str] | None) -> str:
    """The model called a tool that does not exist: name the ones that do (sorted), when known."""
    if available is None:
        listing = "Call one of the tools you were offered."
    else:
        listing = f"Available tools: {', '.join(sorted(available)) or 'none'}."
    return f"Error: there is no tool named {shown(name)}; the call was not run. {listing}"


def wrong_kind_text(name: Any, custom: bool) -> str:
    """The model called a custom tool as a function (``custom``), or a function tool as custom."""
    if custom:
        said = f"{shown(name)} is a custom tool: call it with its text input, not JSON arguments"
    else:
        said = f"{shown(name)} is a function tool: call it with JSON arguments, not text input"
    return f"Error: {said}; the call was not run."


def invalid_arguments_text(name: str, problems: Sequence[str]) -> str:
    """The arguments parsed, but the tool's schema (or its custom format) refused them: each problem
    on its own line, and the call to send again."""
    listing = "\n".join(f"- {p}" for p in problems)
    return (
        f"Error: invalid arguments for {name}; the call was not run.\n{listing}\n"
        f"Call {name} again with corrected arguments."
    )


def call_refusal_text(name: Any, status: str | None, error: BaseException | None, custom: bool) -> str:
    """What the model reads about a call that is not ``ready`` (``status`` and ``error`` as the call
    has them; ``custom``: the call is a custom tool's, its input text), by what was wrong."""
    who = shown(name)
    why = getattr(error, "message", None) or (str(error) if error is not None else "")
    if status == "incomplete" or isinstance(error, CallIncomplete):
        return (
            f"Error: the call to {who} was cut off before its arguments were complete; it was not run. "
            "Send the call again if it is still needed."
        )
    if status == "open":
        return f"Error: the call to {who} was still streaming; it was not run."
    if isinstance(error, MissingName):
        return (
            "Error: this tool call had no function name, so it was not run. "
            "Call one of the available tools by name."
        )
    if isinstance(error, UnknownTool):
        if error.offered_as is not None:
            return wrong_kind_text(name, error.offered_as == "custom")
        return unknown_tool_text(name, error.offered)
    if isinstance(error, SchemaViolation):
        problems = [error.message] if custom or not error.errors else error.errors
        return invalid_arguments_text(name if isinstance(name, str) and name else who, problems)
    if isinstance(error, ContractViolation):
        advice = _CONTRACT_ADVICE.get(error.kind, "Answer without this call.")
        return f"Error: the request did not allow this call to {who} ({why}); it was not run. {advice}"
    if isinstance(error, LimitExceeded):
        advice = (
            "Make fewer tool calls at once."
            if error.limit == "max_calls_per_choice"
            else "Send it again with shorter arguments, if it is still needed."
        )
        return f"Error: the call to {who} was over a limit ({why}); it was not run. {advice}"
    if isinstance(error, InternalFault):
        return (
            f"Error: the call to {who} could not be checked ({why}); it was not run. "
            "Send the call again if it is still needed."
        )
    if isinstance(error, _UNREADABLE) or error is None:
        again = (
            "Send the call again as a custom tool call, its input as the tool's format asks."
            if custom
            else "Send the call again with the arguments as one complete JSON object."
        )
        said = why or "the call is not ready"
        unusable = f"Error: the arguments of this call to {who} could not be used ({said}); it was not run."
        return f"{unusable} {again}"
    return f"Error: the call to {who} could not be used ({why}); it was not run."
