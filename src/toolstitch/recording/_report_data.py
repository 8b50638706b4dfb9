"""The replay report as plain JSON data: what ``toolstitch replay --json`` prints, and what the text
and HTML reports are written from.

Everything in it went through :func:`~._plain.plain` with ``finite=True``: however deep or odd the
recorded values (a field nested 900 deep, a NaN in usage), the report is data ``json.dumps``
accepts and that a strict JSON reader reads back.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..core import Accumulator, ToolCall
from ..errors import IncompleteStreamError
from ._plain import plain
from ._timeline import CallTrack

if TYPE_CHECKING:
    from ._replay import Replay

__all__ = ["report_data", "request_summary"]


def _completion_data(replay: Replay) -> dict[str, Any]:
    """The finished (or partial) completion as plain data, for the model, content and usage."""
    try:
        accumulator = replay.accumulator
        if not isinstance(accumulator, Accumulator):
            return {}  # a Responses recording: its calls are what the report shows
        completion = accumulator.get_final_completion()
    except IncompleteStreamError as exc:
        completion = exc.partial
    except Exception:  # fail closed: a completion that cannot be built still leaves the calls to show
        return {}
    data = plain(completion, finite=True)
    return data if isinstance(data, dict) else {}


def _content(completion: dict[str, Any]) -> dict[str, str | None]:
    """Each choice's text content (``None`` when it sent none)."""
    out: dict[str, str | None] = {}
    choices = completion.get("choices")
    for choice in choices if isinstance(choices, list) else []:
        if not isinstance(choice, dict):
            continue
        message = choice.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        if content is not None and not isinstance(content, str):
            content = str(content)
        out[str(choice.get("index"))] = content
    return out


def _call_data(track: CallTrack | None, call: ToolCall) -> dict[str, Any]:
    error = call.error
    data: dict[str, Any] = {
        "choice": call.choice,
        "index": call.index,
        "id": call.id,
        "name": call.name,
        "status": call.status,
        "arguments": call.arguments,
        "parsed": call.parsed if call.status == "ready" else None,
        "error": None if error is None else {"code": error.code, "message": str(error)},
        "anomalies": [{"code": a.code, "message": a.message} for a in call.anomalies],
        "fragments": call.metrics.fragments,
        "bytes": call.metrics.bytes,
    }
    if track is not None:
        data["timeline"] = {
            "opened": track.opened,
            "first_argument": track.first_argument,
            "complete": track.complete,
            "sealed": track.sealed,
            "ended": track.ended,
            # [position, fragments, bytes, text (bounded), text cut?]
            "fragments": [[f.at, f.count, f.bytes, f.text, f.cut] for f in track.fragments],
        }
    return data


def request_summary(request: dict[str, Any]) -> tuple[str, str | None]:
    """One line about a recorded request (model, messages, tools offered, tool_choice) and the
    text of its last user message (``None`` when it has none), for the text and HTML reports."""
    facts: list[str] = []
    model = request.get("model")
    if model is not None:
        facts.append(f"model {model}")
    messages = request.get("messages")
    messages = messages if isinstance(messages, list) else []
    facts.append(f"{len(messages)} message{'' if len(messages) == 1 else 's'}")
    names: list[str] = []
    for tool in [*(request.get("tools") or []), *(request.get("functions") or [])][:50]:
        if isinstance(tool, dict):
            function = tool.get("function")
            named = function if isinstance(function, dict) else tool
            names.append(str(named.get("name", "?")))
    if names:
        facts.append("tools " + ", ".join(names))
    elif "tools" in request or "functions" in request:
        facts.append("no tools")
    for key in ("tool_choice", "parallel_tool_calls"):
        if key in request:
            value = request[key]
            facts.append(f"{key} {value if isinstance(value, (str, bool)) else 'set'}")
    last_user: str | None = None
    for message in reversed(messages):
        if isinstance(message, dict) and message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, list):  # content parts: their text
                content = " ".join(
                    str(part.get("text", "")) for part in content[:20] if isinstance(part, dict)
                )
            last_user = content if isinstance(content, str) else None
            break
    return " · ".join(facts), last_user


def report_data(replay: Replay) -> dict[str, Any]:
    """Everything ``toolstitch replay --json`` prints: calls, content, anomalies, timeline."""
    replay.until_done()
    timeline = replay.timeline
    tracks = {id(t.call): t for t in timeline.calls}
    completion = _completion_data(replay)
    acc = replay.accumulator
    model = completion.get("model") or replay.request.get("model")
    report = {
        "source": replay.source,
        "format": replay.format,
        "model": model if model is None or isinstance(model, str) else str(model),
        "outcome": replay.outcome,
        "error": None if replay.error is None else replay.error.data(),
        "unit": timeline.unit,
        "chunks": len(timeline.chunks),
        "first_chunk": timeline.first_chunk,
        "first_tool_call": timeline.first_tool_call,
        "end": timeline.end,
        "finish_reasons": {str(k): v for k, v in acc.finish_reasons.items()},
        "content": _content(completion),
        "calls": [_call_data(tracks.get(id(c)), c) for c in acc.calls()],
        "anomalies": [
            {"code": a.code, "message": a.message, "choice": a.choice, "call_index": a.call_index}
            for a in acc.anomalies
        ],
        "usage": completion.get("usage"),
        # As the recording holds it: credentials were masked when it was written (see _secrets).
        "request": replay.request,
    }
    result = plain(report, finite=True)
    assert isinstance(result, dict)
    return result
