"""``toolstitch demo``: the main job, in one command.

A two-step tool conversation, streamed with the real ``openai`` client through :func:`wrap`:

1. the model answers with parallel tool calls whose fragments interleave and split inside JSON
   strings and UTF-8 characters (two ``get_weather`` calls, for Zürich and 東京, and a
   ``convert_currency`` call);
2. the tools run locally, the history is built with :func:`assistant_message` and
   :func:`tool_message`, and the model answers in text, using the results.

Each stream is recorded (in memory) and replayed, to print its fragment timeline. The command's
options are read in ``_demo_command``; this module is the conversation and its printing.
Without ``OPENAI_API_KEY`` the "model" is :class:`toolstitch.testing.LocalServer`, scripted in
``_demo_model``, over real HTTP on 127.0.0.1; with it (and optionally ``OPENAI_BASE_URL`` and
``--model``) the same loop runs against that endpoint, and the scripted model is not used at all.
"""

from __future__ import annotations

import io
import json
import os
import sys
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import openai

from ..client import wrap
from ..errors import IncompleteStreamError
from ..history import assistant_message, call_error_text, tool_message, validate_history
from ..recording import clip, render_latency, render_timeline, replay, report_data, wrap_text
from ._demo_model import LOCAL_MODEL, local_model
from ._output import SafeOutput, TextSink

_Answer = TypeVar("_Answer")

__all__ = ["QUESTION", "TOOLS", "converse", "local_model", "run_demo"]

_WIDTH = 80
REMOTE_MODEL = "gpt-4o-mini"
SYSTEM = "You are a concise travel assistant. Use the tools; answer in two sentences."
QUESTION = "What is the weather in Zürich and in Tokyo (東京) right now, and what are 100 EUR in JPY?"

# ------------------------------------------------------------------------------------ the tools

TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Current weather in a city.",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string", "description": "City name, in any script"},
                    "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                },
                "required": ["city"],
                "additionalProperties": False,
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "convert_currency",
            "description": "Convert an amount between currencies at today's rate.",
            "parameters": {
                "type": "object",
                "properties": {
                    "amount": {"type": "number"},
                    "from_currency": {"type": "string", "description": "ISO 4217 code"},
                    "to_currency": {"type": "string", "description": "ISO 4217 code"},
                },
                "required": ["amount", "from_currency", "to_currency"],
                "additionalProperties": False,
            },
        },
    },
]

# Fixed data, so the demo prints the same thing every time and needs no network for its tools.
_WEATHER = {
    "zürich": (14, "overcast"),
    "zurich": (14, "overcast"),
    "東京": (22, "sunny"),
    "tokyo": (22, "sunny"),
}
_PER_EUR = {"EUR": 1.0, "JPY": 162.5, "USD": 1.08, "CHF": 0.95, "GBP": 0.85}


def get_weather(city: str, unit: str = "celsius") -> dict[str, Any]:
    """Deterministic weather for the demo's cities (any other city gets a mild default)."""
    celsius, conditions = _WEATHER.get(city.strip().lower(), (18, "partly cloudy"))
    temperature = celsius if unit == "celsius" else round(celsius * 9 / 5 + 32)
    return {"city": city, "temperature": temperature, "unit": unit, "conditions": conditions}


def convert_currency(amount: float, from_currency: str, to_currency: str) -> dict[str, Any]:
    """Convert with a fixed rate table; an unknown currency is an error the model should see."""
    source, target = from_currency.upper(), to_currency.upper()
    if source not in _PER_EUR or target not in _PER_EUR:
        raise ValueError(f"unknown currency: {source if source not in _PER_EUR else target}")
    rate = _PER_EUR[target] / _PER_EUR[source]
    return {
        "amount": amount,
        "from": source,
        "to": target,
        "rate": round(rate, 4),
        "result": round(amount * rate, 2),
    }


FUNCTIONS: dict[str, Callable[..., Any]] = {"get_weather": get_weather, "convert_currency": convert_currency}

# ------------------------------------------------------------------------------- the loop


def run_tool(call: Any, answer: Callable[..., _Answer]) -> _Answer:
    """What the model reads back for one call, made by ``answer`` (``tool_message`` here,
    ``function_call_output`` for the Responses API): its result, or the reason it did not run (the
    model can retry). One function for both APIs: which tool runs, and what a failure says, is the
    demo's own decision, whatever the shape of the answer."""
    if not call.ready:
        return answer(call, error=call_error_text(call))
    function = FUNCTIONS.get(call.name or "")
    if function is None:
        return answer(call, error=f"Error: no tool named {call.name!r}")
    try:
        return answer(call, function(**call.parsed))
    except Exception as exc:  # a tool failure is a result the model should see, not a crash
        return answer(call, exc)


def converse(client: openai.OpenAI, model: str, *, max_steps: int = 4) -> dict[str, Any]:
    """Run the tool loop; returns what happened, step by step, as plain data."""
    stitched = wrap(client)
    messages: list[Any] = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": QUESTION}]
    steps: list[dict[str, Any]] = []
    answer: str | None = None
    for number in range(1, max_steps + 1):
        recording = io.StringIO()
        with stitched.chat.completions.create(
            model=model, messages=messages, tools=TOOLS, stream=True
        ) as stream:
            stream.record(recording)
            for _ in stream:
                pass
        replayed = replay(io.StringIO(recording.getvalue()))
        step: dict[str, Any] = {"step": number, "report": report_data(replayed), "replay": replayed}
        steps.append(step)
        try:
            completion = stream.get_final_completion()
        except IncompleteStreamError as exc:
            step["error"] = str(exc)
            break
        messages.append(assistant_message(completion))
        calls = stream.tool_calls
        if not calls:
            answer = completion.choices[0].message.content or ""
            break
        results = [run_tool(call, tool_message) for call in calls]
        step["results"] = results
        messages.extend(results)
    return {
        "model": model,
        "steps": steps,
        "answer": answer,
        "history": messages,
        "problems": [str(p) for p in validate_history(messages)],
    }


# ------------------------------------------------------------------------------- output


def _clip(text: str) -> str:
    return clip(text, _WIDTH)


def _rule(title: str) -> str:
    return f"── {title} " + "─" * max(0, _WIDTH - len(title) - 4)


def _message_line(i: int, message: Mapping[str, Any]) -> str:
    role = str(message.get("role"))
    if message.get("tool_calls"):
        calls = ", ".join(f"{c['function']['name']}({c['id']})" for c in message["tool_calls"])
        text = f"tool_calls: {calls}"
    elif role == "tool":
        text = f"{message.get('tool_call_id')} → {message.get('content')}"
    else:
        text = str(message.get("content"))
    return _clip(f"  [{i}] {role:<9} {text}")


def _print_text(result: dict[str, Any], where: str, out: TextSink) -> None:
    write = out.write
    write("toolstitch demo: a two-step tool conversation, streamed and stitched\n")
    write(_clip(f"server: {where}") + "\n")
    write(_clip(f"model:  {result['model']}") + "\n\n")
    for line in wrap_text(f"user: {QUESTION}", _WIDTH, "", 4):
        write(line + "\n")
    for step in result["steps"]:
        report, replayed = step["report"], step["replay"]
        timeline = replayed.timeline
        write("\n" + _rule(f"step {step['step']}") + "\n")
        took = f" in {timeline.end:.0f} ms" if timeline.unit == "ms" and timeline.end is not None else ""
        calls = report["calls"]
        write(
            f"streamed {report['chunks']} chunks{took}; "
            + (f"{len(calls)} tool calls\n" if calls else "answer:\n")
        )
        for call in calls:
            write(
                _clip(f"  #{call['index']} {call['name']:<16} {call['status']:<8} {call['arguments']}") + "\n"
            )
        for message in step.get("results") or []:
            write(_clip(f"  → {message['tool_call_id']}: {message['content']}") + "\n")
        if calls:
            write("\n" + render_timeline(timeline, _WIDTH) + "\n" + render_latency(timeline))
        else:
            for line in _wrap_answer(report["content"].get("0") or ""):
                write(line + "\n")
        if step.get("error"):
            write(_clip(f"  stream failed: {step['error']}") + "\n")
    history = result["history"]
    write("\n" + _rule(f"history ({len(history)} messages)") + "\n")
    for i, message in enumerate(history):
        write(_message_line(i, message) + "\n")
    problems = result["problems"]
    write("validate_history: " + ("no problems\n" if not problems else f"{len(problems)} problem(s)\n"))
    for problem in problems:
        write(_clip(f"  {problem}") + "\n")


def _wrap_answer(text: str) -> list[str]:
    return wrap_text(text, _WIDTH, "  ") if text else ["  (empty)"]


def _json_result(result: dict[str, Any], where: str, mode: str) -> dict[str, Any]:
    steps = []
    for step in result["steps"]:
        data = dict(step["report"])
        data["step"] = step["step"]
        data["results"] = step.get("results") or []
        if step.get("error"):
            data["stream_error"] = step["error"]
        steps.append(data)
    return {
        "mode": mode,
        "server": where,
        "model": result["model"],
        "question": QUESTION,
        "steps": steps,
        "answer": result["answer"],
        "history": result["history"],
        "history_problems": result["problems"],
    }


def run_demo(
    *,
    model: str | None = None,
    json_output: bool = False,
    local: bool | None = None,
    delay: float = 0.004,
    out: TextSink | None = None,
) -> int:
    """Run the demo and print it; returns the exit code.

    ``local=None`` picks the local server unless ``OPENAI_API_KEY`` is set. ``delay`` (seconds
    between chunks) applies to the local server only.
    """
    out = out or SafeOutput(sys.stdout)
    use_local = not os.environ.get("OPENAI_API_KEY") if local is None else local
    if use_local:
        from ..testing import LocalServer

        with LocalServer(handler=local_model(delay)) as server:
            where = f"{server.base_url} (embedded local server; no OPENAI_API_KEY)"
            with server.client() as client:
                result = converse(client, model or LOCAL_MODEL)
        mode = "local"
    else:
        result, where = _remote(model or REMOTE_MODEL)
        mode = "remote"
    if json_output:
        out.write(json.dumps(_json_result(result, where, mode), ensure_ascii=False, indent=2) + "\n")
    else:
        _print_text(result, where, out)
    return 0 if result["answer"] is not None and not result["problems"] else 1


def _remote(model: str) -> tuple[dict[str, Any], str]:
    """The same loop against a real endpoint (``OPENAI_API_KEY``, optional ``OPENAI_BASE_URL``)."""
    with openai.OpenAI() as client:
        return converse(client, model), str(client.base_url)
