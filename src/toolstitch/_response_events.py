"""The Responses API events a scripted "model" sends: :func:`~toolstitch.testing.response_object`
and :func:`~toolstitch.testing.response_events`, re-exported by ``toolstitch.testing``.

A stream is built item by item, each item's events by the function named for it (a reasoning
summary, a message, a function or custom tool call), then numbered in the order they are sent; the
chat twin is ``_chat_chunks.py``. Like the local test server (``testing.py``), it imports nothing of
toolstitch.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

from ._chat_chunks import round_robin, split_evenly

_RESPONSE_USAGE = {
    "input_tokens": 12,
    "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
    "output_tokens": 20,
    "output_tokens_details": {"reasoning_tokens": 0},
    "total_tokens": 32,
}


def response_object(
    *,
    status: str = "completed",
    output: Sequence[Mapping[str, Any]] = (),
    id: str = "resp_test",
    model: str = "test-model",
    created_at: int = 1700000000,
    usage: Mapping[str, Any] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """A ``response`` object as OpenAI sends it (in ``response.created`` ... ``response.completed``
    events, and as a non-streamed answer). ``extra`` keys override or add fields (``tools``,
    ``tool_choice``, ``error``, ``incomplete_details`` ...)."""
    out: dict[str, Any] = {
        "id": id,
        "object": "response",
        "created_at": created_at,
        "status": status,
        "background": False,
        "error": None,
        "incomplete_details": None,
        "instructions": None,
        "max_output_tokens": None,
        "model": model,
        "output": [dict(item) for item in output],
        "parallel_tool_calls": True,
        "previous_response_id": None,
        "reasoning": {"effort": None, "summary": None},
        "store": True,
        "temperature": 1.0,
        "text": {"format": {"type": "text"}},
        "tool_choice": "auto",
        "tools": [],
        "top_p": 1.0,
        "truncation": "disabled",
        "usage": dict(usage) if usage is not None else None,
        "user": None,
        "metadata": {},
    }
    out.update(extra)
    return out


def response_events(
    calls: Sequence[tuple[str, str, str]] = (),
    *,
    text: str | None = None,
    reasoning: str | None = None,
    pieces: int = 3,
    status: str = "completed",
    id: str = "resp_test",
    model: str = "test-model",
    usage: Mapping[str, Any] | None = _RESPONSE_USAGE,
    interleave: bool = False,
    custom: bool | Collection[str] = (),
    **extra: Any,
) -> list[dict[str, Any]]:
    """A realistic Responses API stream, as OpenAI sends it, for ``calls = [(call_id, name,
    arguments_text), ...]``.

    ``response.created`` and ``response.in_progress``; a ``reasoning`` item when ``reasoning`` is
    given (its summary text streamed); a ``message`` item when ``text`` is given (its text in
    ``pieces`` deltas); then per call a ``function_call`` item: ``response.output_item.added``
    (``arguments: ""``), its arguments in ``pieces`` deltas, ``function_call_arguments.done`` and
    ``response.output_item.done`` (``status: "completed"``); last ``response.completed`` with the
    whole output (``status="incomplete"``: ``response.incomplete`` with ``incomplete_details``,
    ``"failed"``: ``response.failed`` with an ``error``). Item ids are ``fc_<n>`` (calls),
    ``msg_<n>`` and ``rs_<n>``. ``interleave`` alternates the deltas of the calls (OpenAI streams
    items one after another; this is for hostile orders). ``extra`` goes into every response
    object. Every event carries its ``sequence_number``. ``custom`` (``True``, or a collection of
    call ids) streams those calls as a custom tool's ``custom_tool_call`` items instead: ``input``
    for ``arguments`` (the third member is the input text), ids ``ctc_<n>``, pieces in
    ``response.custom_tool_call_input.delta`` and ``.done`` events.
    """
    events: list[dict[str, Any]] = []

    def snapshot(state: str, items: Sequence[Mapping[str, Any]], **more: Any) -> dict[str, Any]:
        return response_object(status=state, output=items, id=id, model=model, **{**extra, **more})

    events = [
        {"type": "response.created", "response": snapshot("in_progress", [])},
        {"type": "response.in_progress", "response": snapshot("in_progress", [])},
    ]
    output: list[dict[str, Any]] = []
    if reasoning is not None:
        added, item = _reasoning_events(len(output), reasoning, pieces)
        events += added
        output.append(item)
    if text is not None:
        added, item = _message_events(len(output), text, pieces)
        events += added
        output.append(item)
    per_call: list[list[dict[str, Any]]] = []
    for call_id, name, arguments in calls:
        is_custom = custom is True or (not isinstance(custom, bool) and call_id in custom)
        added, item = _call_events(len(output), (call_id, name, arguments), pieces, is_custom)
        per_call.append(added)
        output.append(item)
    events += round_robin(per_call) if interleave else [event for added in per_call for event in added]
    events.append(_final_event(status, output, usage, snapshot))
    for number, event in enumerate(events):
        event["sequence_number"] = number
    return events


def _added(position: int, item: dict[str, Any]) -> dict[str, Any]:
    """``response.output_item.added``: the item at ``position`` opens (its text still empty)."""
    return {"type": "response.output_item.added", "output_index": position, "item": item}


def _done(position: int, item: dict[str, Any]) -> dict[str, Any]:
    """``response.output_item.done``: the item at ``position`` as it ended, whole."""
    return {"type": "response.output_item.done", "output_index": position, "item": item}


def _reasoning_events(
    position: int, summary: str, pieces: int
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """A ``reasoning`` item's events (its summary text streamed in ``pieces`` deltas) and the item."""
    rid = f"rs_{position}"
    events = [_added(position, {"id": rid, "type": "reasoning", "summary": []})]
    events += [
        {
            "type": "response.reasoning_summary_text.delta",
            "item_id": rid,
            "output_index": position,
            "summary_index": 0,
            "delta": piece,
        }
        for piece in split_evenly(summary, pieces)
    ]
    item = {"id": rid, "type": "reasoning", "summary": [{"type": "summary_text", "text": summary}]}
    events.append(_done(position, item))
    return events, item


def _message_events(position: int, text: str, pieces: int) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """A ``message`` item's events (one ``output_text`` part, its text in ``pieces`` deltas) and the
    item."""
    mid = f"msg_{position}"
    opened = {"id": mid, "type": "message", "status": "in_progress", "role": "assistant", "content": []}
    where = {"item_id": mid, "output_index": position, "content_index": 0}
    part = {"type": "output_text", "text": "", "annotations": []}
    done_part = {"type": "output_text", "text": text, "annotations": []}
    events = [_added(position, opened), {"type": "response.content_part.added", **where, "part": part}]
    events += [
        {"type": "response.output_text.delta", **where, "delta": piece, "logprobs": []}
        for piece in split_evenly(text, pieces)
    ]
    events.append({"type": "response.output_text.done", **where, "text": text, "logprobs": []})
    events.append({"type": "response.content_part.done", **where, "part": done_part})
    item = {**opened, "status": "completed", "content": [{**done_part, "logprobs": []}]}
    events.append(_done(position, item))
    return events, item


def _call_events(
    position: int, call: tuple[str, str, str], pieces: int, custom: bool
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """A ``function_call`` item's events (its arguments in ``pieces`` deltas, then ``.done``) and the
    item; ``custom``: a ``custom_tool_call`` item's, its ``input`` in their place."""
    call_id, name, arguments = call
    kind, key, prefix, stem = (
        ("custom_tool_call", "input", "ctc", "custom_tool_call_input")
        if custom
        else ("function_call", "arguments", "fc", "function_call_arguments")
    )
    fid = f"{prefix}_{position}"
    opened = {"id": fid, "type": kind, "status": "in_progress", key: "", "call_id": call_id, "name": name}
    events = [_added(position, opened)]
    events += [
        {"type": f"response.{stem}.delta", "item_id": fid, "output_index": position, "delta": piece}
        for piece in split_evenly(arguments, pieces)
    ]
    events.append({"type": f"response.{stem}.done", "item_id": fid, "output_index": position, key: arguments})
    item = {**opened, "status": "completed", key: arguments}
    events.append(_done(position, item))
    return events, item


def _final_event(
    status: str,
    output: Sequence[Mapping[str, Any]],
    usage: Mapping[str, Any] | None,
    snapshot: Callable[..., dict[str, Any]],
) -> dict[str, Any]:
    """The event that ends the stream, carrying the whole response: ``response.completed``,
    ``response.incomplete`` (with ``incomplete_details``) or ``response.failed`` (with an ``error``)."""
    if status == "completed":
        return {"type": "response.completed", "response": snapshot("completed", output, usage=usage)}
    if status == "incomplete":
        details = {"reason": "max_output_tokens"}
        final = snapshot("incomplete", output, usage=usage, incomplete_details=details)
        return {"type": "response.incomplete", "response": final}
    if status == "failed":
        error = {"code": "server_error", "message": "The model failed to generate a response."}
        return {"type": "response.failed", "response": snapshot("failed", output, error=error)}
    raise ValueError('status must be "completed", "incomplete" or "failed"')
