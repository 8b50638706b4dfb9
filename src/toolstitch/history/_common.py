"""Helpers that more than one of the builders, the validator and repair use.

They live here, not in one of those modules, so that none of the three has to import another's
internals: reading input the way the SDK sends it (``_plain``), the ``tool_calls`` of a message,
the ``_MISSING`` sentinel, and the shape of a tool message (``_tool_dict``), which both
:func:`~toolstitch._history._build.tool_message` and repair's inserted results must agree on.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pydantic

from ._dialects import Dialect

Message = dict[str, Any]

_MISSING: Any = object()

# ------------------------------------------------------------------------- reading input


def _plain(value: Any) -> Any:
    """Plain JSON-like data from dicts, lists and SDK models, dumped the way the SDK sends them."""
    if isinstance(value, pydantic.BaseModel):
        exclude = getattr(value, "__api_exclude__", None)
        return value.model_dump(mode="json", exclude_unset=True, exclude=exclude, warnings=False)
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _tool_calls(message: Mapping[str, Any]) -> list[Any]:
    """The message's tool calls when it is an assistant message with a non-empty list, else []."""
    calls = message.get("tool_calls") if message.get("role") == "assistant" else None
    return calls if isinstance(calls, list) else []


# --------------------------------------------------------------------------- tool messages


def _tool_dict(call_id: str, content: str, name: str | None, d: Dialect) -> Message:
    out: Message = {"role": "tool", "tool_call_id": call_id, "content": content}
    if d.tool_message_name and name:
        out["name"] = name
    return out
