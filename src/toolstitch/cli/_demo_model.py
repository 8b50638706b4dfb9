"""The demo's scripted model: what :class:`toolstitch.testing.LocalServer` answers in ``toolstitch demo``.

Step 1 streams three parallel tool calls, cut finer than any real provider does (3-character
argument pieces that split JSON strings and UTF-8 characters, the calls interleaved); step 2,
once the request carries tool results, streams an answer written from those results, so a wrong
history shows up as a wrong answer. Used only without ``OPENAI_API_KEY`` (or with ``--local``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

__all__ = ["LOCAL_MODEL", "local_model"]

LOCAL_MODEL = "toolstitch-demo"


def _pieces(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def _chunk(delta: Mapping[str, Any], finish_reason: str | None = None, **extra: Any) -> dict[str, Any]:
    choice = {"index": 0, "delta": dict(delta), "logprobs": None, "finish_reason": finish_reason}
    return {
        "id": extra.pop("id", "chatcmpl-demo"),
        "object": "chat.completion.chunk",
        "created": 1735689600,
        "model": LOCAL_MODEL,
        "system_fingerprint": "fp_demo",
        "choices": [choice],
        **extra,
    }


def _usage_chunk(prompt: int, completion: int, chunk_id: str) -> dict[str, Any]:
    usage = {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
    data = _chunk({}, id=chunk_id, usage=usage)
    data["choices"] = []
    return data


def _tool_call_step() -> list[dict[str, Any]]:
    """Step 1, shaped like OpenAI's parallel calls but cut finer: each call opens with a header
    fragment (index, id, name, ``""`` arguments), then its arguments come in 3-character pieces
    that split JSON strings and non-ASCII characters; the three calls are staggered round-robin,
    so all three are open at once and their fragments interleave."""
    calls = [
        ("call_demo_weather_zrh", "get_weather", '{"city": "Zürich", "unit": "celsius"}'),
        ("call_demo_weather_tyo", "get_weather", '{"city": "東京", "unit": "celsius"}'),
        (
            "call_demo_fx_eur_jpy",
            "convert_currency",
            '{"amount": 100, "from_currency": "EUR", "to_currency": "JPY"}',
        ),
    ]
    cid = "chatcmpl-demo-1"
    lanes: list[list[dict[str, Any]]] = []
    for index, (call_id, name, arguments) in enumerate(calls):
        header = {
            "index": index,
            "id": call_id,
            "type": "function",
            "function": {"name": name, "arguments": ""},
        }
        lanes.append(
            [header, *({"index": index, "function": {"arguments": p}} for p in _pieces(arguments, 3))]
        )
    out = [_chunk({"role": "assistant", "content": None, "refusal": None}, id=cid)]
    # Staggered round-robin: call k starts k steps later, so all three are open at once.
    for step in range(max(len(lane) + k for k, lane in enumerate(lanes))):
        for k, lane in enumerate(lanes):
            if 0 <= step - k < len(lane):
                out.append(_chunk({"tool_calls": [lane[step - k]]}, id=cid))
    out.append(_chunk({}, "tool_calls", id=cid))
    out.append(_usage_chunk(118, 71, cid))
    return out


def _answer_text(messages: Sequence[Mapping[str, Any]]) -> str:
    """The final answer, written from the tool results the request carries (never from memory:
    a wrong history shows up as a wrong answer)."""
    names: dict[str, str] = {}
    for message in messages:
        for call in message.get("tool_calls") or []:
            names[call.get("id", "")] = (call.get("function") or {}).get("name", "")
    weather: list[str] = []
    money: list[str] = []
    for message in messages:
        if message.get("role") != "tool":
            continue
        try:
            result = json.loads(message.get("content") or "")
        except ValueError:
            result = None
        name = names.get(message.get("tool_call_id", ""), "")
        if name == "get_weather" and isinstance(result, dict):
            unit = "°C" if result.get("unit") == "celsius" else "°F"
            weather.append(
                f"{result.get('city')} has {result.get('temperature')} {unit} and {result.get('conditions')}"
            )
        elif name == "convert_currency" and isinstance(result, dict):
            amount, converted = result.get("amount"), result.get("result")
            money.append(
                f"{amount:g} {result.get('from')} is {converted:,.2f} {result.get('to')}"
                f" (rate {result.get('rate')})"
            )
        else:
            money.append(f"one tool failed ({str(message.get('content'))[:60]})")
    first = "Right now " + " and ".join(weather) + "." if weather else "I could not get the weather."
    second = " ".join(s[0].upper() + s[1:] + "." for s in money)
    return f"{first} {second}".strip()


def _answer_step(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    cid = "chatcmpl-demo-2"
    text = _answer_text(messages)
    out = [_chunk({"role": "assistant", "content": ""}, id=cid)]
    out += [_chunk({"content": piece}, id=cid) for piece in _pieces(text, 4)]
    out.append(_chunk({}, "stop", id=cid))
    out.append(_usage_chunk(246, math.ceil(len(text) / 4), cid))
    return out


def local_model(delay: float = 0.004) -> Callable[[dict[str, Any]], Any]:
    """The handler for :class:`~toolstitch.testing.LocalServer`: tool calls first, then, once the
    request carries tool results, the answer. ``delay`` is the pause between chunks (seconds)."""
    from ..testing import StreamScript

    def handle(body: dict[str, Any]) -> Any:
        messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
        if any(m.get("role") == "tool" for m in messages):
            return StreamScript(_answer_step(messages), delay=delay)
        return StreamScript(_tool_call_step(), delay=delay)

    return handle
