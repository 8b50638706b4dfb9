"""``toolstitch demo --api responses``: the demo's conversation over the Responses API.

The same two steps as the chat demo (``_demo``), through ``client.responses.create(stream=True)``
on a wrapped client: the model answers with three ``function_call`` items whose argument deltas are
cut finer than any real server cuts them (3 characters, splitting JSON strings and UTF-8
characters); the tools run locally; the next request's ``input`` is built with
``response_items`` and ``function_call_outputs`` and checked with ``validate_input``; the model
answers in text from the results. Without ``OPENAI_API_KEY`` the model is the embedded local server
(:func:`local_responses_model`); with it, the endpoint it names.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import openai

from ..client import wrap
from ..errors import IncompleteStreamError
from ..history import function_call_output, response_items, validate_input
from ..recording import clip, wrap_text
from ._demo import QUESTION, REMOTE_MODEL, SYSTEM, TOOLS, run_tool
from ._demo_model import LOCAL_MODEL
from ._output import TextSink

__all__ = [
    "FLAT_TOOLS",
    "converse_responses",
    "local_responses_model",
    "print_responses",
    "run_responses_demo",
]

#: The demo's tools in the Responses API's flat shape.
FLAT_TOOLS: list[dict[str, Any]] = [{"type": "function", **tool["function"]} for tool in TOOLS]
_CALLS = [
    ("call_demo_weather_zrh", "get_weather", '{"city": "Zürich", "unit": "celsius"}'),
    ("call_demo_weather_tyo", "get_weather", '{"city": "東京", "unit": "celsius"}'),
    (
        "call_demo_fx_eur_jpy",
        "convert_currency",
        '{"amount": 100, "from_currency": "EUR", "to_currency": "JPY"}',
    ),
]


def _answer(items: Sequence[Mapping[str, Any]]) -> str:
    """The answer, written from the outputs the request carries (a wrong input, a wrong answer)."""
    names = {i.get("call_id"): i.get("name") for i in items if i.get("type") == "function_call"}
    parts: list[str] = []
    for item in items:
        if item.get("type") != "function_call_output":
            continue
        try:
            result = json.loads(item.get("output") or "")
        except ValueError:
            result = None
        name = names.get(item.get("call_id"))
        if name == "get_weather" and isinstance(result, dict):
            parts.append(
                f"{result.get('city')} has {result.get('temperature')} °C and {result.get('conditions')}"
            )
        elif name == "convert_currency" and isinstance(result, dict):
            amount, converted = result.get("amount"), result.get("result")
            parts.append(f"{amount:g} {result.get('from')} is {converted:,.2f} {result.get('to')}")
        else:
            parts.append(f"one tool failed ({str(item.get('output'))[:60]})")
    return ("Right now " + "; ".join(parts) + ".") if parts else "I could not use the tools."


def local_responses_model(delay: float = 0.004, *, drop: bool = False) -> Callable[[dict[str, Any]], Any]:
    """The handler for :class:`~toolstitch.testing.LocalServer` on ``/v1/responses``: three
    function calls first, then, once the input carries their outputs, the answer. ``drop``: the
    first stream's connection drops in the middle of the second call's arguments (the server keeps
    the background response, so the stream can be resumed)."""
    from ..testing import StreamScript, response_events, sse_body

    def handle(body: dict[str, Any]) -> Any:
        items = [i for i in body.get("input") or [] if isinstance(i, dict)]
        background = body.get("background") is True
        if any(i.get("type") == "function_call_output" for i in items):
            events = response_events(text=_answer(items), id="resp_demo_2", background=background)
            return StreamScript.responses(events, delay=delay)
        # About 3 characters per delta: pieces split JSON strings and UTF-8 characters.
        events = response_events(
            _CALLS, pieces=20, id="resp_demo_1", reasoning="Three lookups.", background=background
        )
        if not drop:
            return StreamScript.responses(events, delay=delay)
        second = next(n for n, e in enumerate(events) if e.get("item", {}).get("call_id") == _CALLS[1][0])
        where = len(sse_body(events[: second + 6], done=False)) + 9  # inside a delta of the 2nd call
        return StreamScript.responses(events, delay=delay, cut_after_bytes=where)

    return handle


def converse_responses(
    client: openai.OpenAI, model: str, *, max_steps: int = 4, background: bool = False
) -> dict[str, Any]:
    """Run the tool loop over the Responses API; returns what happened as plain data.
    ``background``: each response is created in background mode, so a dropped connection is
    resumed (``responses.retrieve(id, stream=True, starting_after=N)``) instead of lost."""
    stitched: Any = wrap(client)  # its responses.create(stream=True) is a StitchedResponseStream
    history: list[Any] = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": QUESTION}]
    steps: list[dict[str, Any]] = []
    answer: str | None = None
    for number in range(1, max_steps + 1):
        extra = {"background": True} if background else {}
        stream = stitched.responses.create(model=model, input=history, tools=FLAT_TOOLS, stream=True, **extra)
        try:
            with stream:
                events = sum(1 for _ in stream)
        except openai.APIConnectionError:  # every resume failed: the calls are incomplete
            events = stream.accumulator.metrics.chunks
        calls = stream.tool_calls
        step: dict[str, Any] = {
            "step": number,
            "events": events,
            "calls": [
                {"id": c.id, "name": c.name, "status": c.status, "arguments": c.arguments} for c in calls
            ],
            "anomalies": [a.code for a in stream.anomalies],
            "resumes": [
                {
                    "after": r.after,
                    "requests": r.requests,
                    "resumed": r.resumed,
                    "error": type(r.error).__name__,
                }
                for r in stream.resumes
            ],
        }
        steps.append(step)
        try:
            response = stream.get_final_response()
        except IncompleteStreamError as exc:
            step["error"] = str(exc)
            break
        history += response_items(response)
        if not calls:
            answer = response.output_text
            break
        outputs = [run_tool(call, function_call_output) for call in calls]
        step["results"] = outputs
        history += outputs
    return {
        "model": model,
        "steps": steps,
        "answer": answer,
        "history": history,
        "problems": [str(p) for p in validate_input(history)],
    }


def print_responses(result: dict[str, Any], where: str, out: TextSink) -> None:
    """The conversation as text, in 80 columns."""

    def line(text: str) -> None:
        out.write(clip(text, 80) + "\n")

    line("toolstitch demo --api responses: a tool conversation over the Responses API")
    line(f"server: {where}")
    line(f"model:  {result['model']}")
    out.write("\n")
    for text in wrap_text(f"user: {QUESTION}", 80, "", 4):
        line(text)
    for step in result["steps"]:
        out.write("\n")
        line(f"── step {step['step']}: streamed {step['events']} events")
        for resume in step.get("resumes") or []:
            done = "resumed" if resume["resumed"] else "not resumed"
            line(
                f"  ✂ dropped after event {resume['after']} ({resume['error']}); {done}, "
                f"{resume['requests']} retrieve"
            )
        for call in step["calls"]:
            line(f"  {call['name']:<16} {call['status']:<8} {call['arguments']}")
        for item in step.get("results") or []:
            line(f"  → {item['call_id']}: {item['output']}")
        if step.get("error"):
            line(f"  stream failed: {step['error']}")
    if result["answer"] is not None:
        out.write("\n")
        for text in wrap_text(f"answer: {result['answer']}", 80, "", 4):
            line(text)
    history = result["history"]
    out.write("\n")
    line(f"── input for the next request ({len(history)} items)")
    for i, item in enumerate(history):
        line(f"  [{i}] {item.get('type') or item.get('role')} {item.get('call_id') or ''}".rstrip())
    requests = result.get("requests")
    if requests is not None:
        line(f"requests: {requests['create']} create, {requests['retrieve']} retrieve")
    problems = result["problems"]
    line("validate_input: " + ("no problems" if not problems else f"{len(problems)} problem(s)"))
    for problem in problems:
        line(f"  {problem}")


def run_responses_demo(
    *,
    model: str | None = None,
    json_output: bool = False,
    local: bool | None = None,
    out: TextSink,
    drop: bool = False,
) -> int:
    """``toolstitch demo --api responses``: the embedded local server unless ``OPENAI_API_KEY`` is
    set (or ``local`` says so); exit 0 when the conversation completed with a valid input.
    ``drop`` (``--drop``, the embedded server only): background responses, and the first stream's
    connection drops mid-call, to show the stream resume."""
    use_local = drop or (not os.environ.get("OPENAI_API_KEY") if local is None else local)
    if use_local:
        from ..testing import LocalServer

        with LocalServer(handler=local_responses_model(drop=drop), check_history=True) as server:
            where = f"{server.base_url} (embedded local server; no OPENAI_API_KEY)"
            with server.client() as client:
                result = converse_responses(client, model or LOCAL_MODEL, background=drop)
            result["requests"] = {"create": len(server.requests), "retrieve": len(server.retrieves)}
    else:
        with openai.OpenAI() as client:
            result = converse_responses(client, model or REMOTE_MODEL)
            where = str(client.base_url)
    if json_output:
        data = {"api": "responses", "mode": "local" if use_local else "remote", "server": where, **result}
        out.write(json.dumps(data, ensure_ascii=False, indent=2, default=str) + "\n")
    else:
        print_responses(result, where, out)
    return 0 if result["answer"] is not None and not result["problems"] else 1
