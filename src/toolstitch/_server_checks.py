"""The 400 answers OpenAI gives a request whose history breaks its rules, as the local test server
(``testing.py``, ``check_history=True``) gives them: :func:`~toolstitch.testing.check_messages_h01_h04`
and :func:`~toolstitch.testing.check_response_input`, re-exported by ``toolstitch.testing``.

Written independently of the package's own validator (``history/_validate.py``), from the answers
OpenAI gives (rules H01-H04 of ``docs/history-rules.md``), so that a real-SDK test can hold the two
against each other; it imports nothing of toolstitch.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

# ------------------------------------------------------------------------- history check (H01-H04)

_H01 = (
    "Invalid parameter: messages with role 'tool' must be a response to a preceeding message"
    " with 'tool_calls'."
)
_H02 = "Invalid parameter: 'tool_call_id' of '{id}' not found in 'tool_calls' of previous message."
_H03 = (
    "An assistant message with 'tool_calls' must be followed by tool messages responding to each"
    " 'tool_call_id'. The following tool_call_ids did not have response messages: {ids}"
)
_H07 = "Missing parameter 'tool_call_id': messages with role 'tool' must have a 'tool_call_id'."


def history_violation(messages: Sequence[Any]) -> tuple[str, str] | None:
    """First H01-H04 violation as ``(message, param)``, scanning in order as OpenAI appears to.

    H04 (a foreign message between the calls and their results) has no text of its own: it shows up
    as H03 on the assistant message. Assumptions (not confirmed by a live server): H03's ``param``
    points at the assistant message; several missing ids are joined by ", "; H02's ``param`` is
    ``messages.[N].tool_call_id``; a trailing assistant message with ``tool_calls`` fails H03.
    """
    msgs = [m.model_dump() if hasattr(m, "model_dump") else dict(m) for m in messages]
    i = 0
    while i < len(msgs):
        calls = msgs[i].get("tool_calls") if msgs[i].get("role") == "assistant" else None
        if calls:
            declared = [c.get("id") for c in calls if isinstance(c, Mapping)]
            pending = list(declared)
            j = i + 1
            while j < len(msgs) and msgs[j].get("role") == "tool":
                call_id = msgs[j].get("tool_call_id")
                if call_id is None:
                    return _H07, f"messages.[{j}].tool_call_id"
                if call_id not in declared:
                    return _H02.format(id=call_id), f"messages.[{j}].tool_call_id"
                if call_id in pending:
                    pending.remove(call_id)
                j += 1
            if pending:
                return _H03.format(ids=", ".join(map(str, pending))), f"messages.[{i}].role"
            i = j
            continue
        if msgs[i].get("role") == "tool":
            return _H01, f"messages.[{i}].role"
        i += 1
    return None


def check_messages_h01_h04(messages: Sequence[Any]) -> str | None:
    """OpenAI's error text for the first H01-H04 violation in ``messages``; None when they pass."""
    found = history_violation(messages)
    return None if found is None else found[0]


# ------------------------------------------------------------------ Responses input check (R01-R03)

_R01 = "No tool call found for function call output with call_id {id}."
_R02 = "No tool output found for function call {id}."
_R03 = "Missing required parameter: 'input[{n}].call_id'."


def check_response_input(input: Any, previous_calls: Sequence[str] = ()) -> str | None:
    """OpenAI's error text for the first problem it answers a Responses request's ``input`` with
    (400), or None: a ``function_call_output`` whose ``call_id`` no ``function_call`` before it
    (nor the previous response, ``previous_calls``) made; a ``function_call`` (or a previous
    response's call) that no ``function_call_output`` answers; an output without ``call_id``. A
    custom tool's ``custom_tool_call`` and ``custom_tool_call_output`` are held to the same.

    Written independently of the package's validator, from the answers OpenAI gives, so a test can
    hold the two against each other. A string ``input`` is a user message.
    """
    if not isinstance(input, list):
        return None
    items = [i.model_dump() if hasattr(i, "model_dump") else i for i in input]
    made: list[Any] = list(previous_calls)
    answered: set[str] = set()
    for n, item in enumerate(items):
        if not isinstance(item, Mapping):
            continue
        kind = item.get("type")
        if kind in ("function_call", "custom_tool_call"):
            made.append(item.get("call_id"))
        elif kind in ("function_call_output", "custom_tool_call_output"):
            call_id = item.get("call_id")
            if not isinstance(call_id, str) or not call_id:
                return _R03.format(n=n)
            if call_id not in made:
                return _R01.format(id=call_id)
            answered.add(call_id)
    for call_id in made:
        if call_id not in answered:
            return _R02.format(id=call_id)
    return None
