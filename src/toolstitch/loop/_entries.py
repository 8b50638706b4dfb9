"""The few things the loop reads and writes in history entries (messages, Responses items): the
caller's entries taken in as plain JSON, their top-level keys, read safely from hostile entries, and
the correction a ``fail_fast`` step adds."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..core import ToolCall
from ..history import to_plain

__all__ = [
    "CALL_ITEMS",
    "OUTPUT_ITEMS",
    "as_sent",
    "corrected",
    "correction_text",
    "list_field",
    "plain_entry",
    "text_of",
]

CALL_ITEMS = frozenset({"function_call", "custom_tool_call"})
"""The Responses items that are calls (a function's, a custom tool's)."""
OUTPUT_ITEMS = frozenset({"function_call_output", "custom_tool_call_output"})
"""The Responses items that answer them."""


def text_of(error: BaseException) -> str:
    try:
        return str(error)
    except Exception:  # a hostile __str__
        return type(error).__name__


def correction_text(call: ToolCall, reason: str) -> str:
    """What the model reads after ``fail_fast`` closed its answer: the tool, the reason (which
    names the argument when the check does), and what to do."""
    name = call.name if isinstance(call.name, str) and call.name else "a tool"
    reason = reason if len(reason) <= 500 else reason[:499] + "…"
    return (
        f"Your previous answer was stopped while you were writing the call to {name}: it was refused "
        f"because {reason}. It was not run. Write the call to {name} again with valid arguments."
    )


def corrected(history: list[Any], correction: str | None, with_output: bool) -> list[Any]:
    """The next request's history with ``correction`` in a form every server accepts: added to the
    text of the last message when it is a user or tool message (a second user message in a row,
    or one right after a tool message, is refused by some servers: H37, H41), else as a user
    message. The stored history is left as it is."""
    if correction is None:
        return history
    last = plain_entry(history[-1]) if history else {}
    key = "output" if with_output and last.get("type") in OUTPUT_ITEMS else "content"
    role_ok = last.get("role") in ("user", "tool") or key == "output"
    value = last.get(key)
    if role_ok and isinstance(value, str):
        return [*history[:-1], {**last, key: f"{value}\n\n{correction}" if value else correction}]
    if role_ok and isinstance(value, list) and not with_output:
        return [*history[:-1], {**last, key: [*value, {"type": "text", "text": correction}]}]
    return [*history, {"role": "user", "content": correction}]


def as_sent(entry: Any) -> Any:
    """A history entry of the caller's as plain JSON values, read the way the SDK serialises it for
    the request (``history.to_plain``: an SDK model is ``model_dump(mode="json", exclude_unset=True,
    exclude=__api_exclude__)``, as the SDK's ``openai._utils._transform._transform_recursive`` does;
    mappings become dicts, tuples lists). So the history a run returns (``RunResult.messages``,
    ``.input``) is JSON that can be stored, whatever the caller's held: a ``ChatCompletionMessage``
    appended as it came, the Responses API's output items. The one place the loop takes the
    caller's history in; an entry that cannot be read stays as it is, for the request's check."""
    try:
        return to_plain(entry)[0]
    except Exception:
        return entry


def plain_entry(value: Any) -> dict[str, Any]:
    """A message or call as a dict; anything that is not one (hostile history entries) is ``{}``."""
    # Not history's to_plain (nor recording's plain): the loop reads a few top-level keys of history
    # entries each step and needs a dict; to_plain copies every level, which would cost the whole
    # history's size per step, and plain turns values into JSON text. Same name, other jobs.
    try:
        if isinstance(value, Mapping):
            return dict(value)
        dump = getattr(value, "model_dump", None)
        if callable(dump):
            out = dump()
            if isinstance(out, dict):
                return out
    except Exception:
        pass
    return {}


def list_field(value: Any) -> list[Any]:
    """A list field of a history entry (``tool_calls``), or ``[]`` when it is not a list."""
    return list(value) if isinstance(value, list | tuple) else []
