"""Every event's JSON form (``event.to_dict()``, ``core/_json_form.py``), from real events.

The events come from a real stream and a real ``ts.run_events`` against the local server, over the
real ``openai`` client, with hostile values on the way (lone surrogates, NaN, integers too long to
print, a tool that returns all of them): each form is strict JSON (``allow_nan=False``, valid
UTF-8) and reads back equal to itself. Every event class ``toolstitch.events`` lists is among them.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import math
from typing import Any

import openai
import pytest

import toolstitch as ts
import toolstitch.events as events
from toolstitch.events import (
    AnomalyRecorded,
    StreamEnded,
    StreamEvent,
    ToolCallIncomplete,
)
from toolstitch.loop import RetryPolicy
from toolstitch.testing import LocalServer, StreamScript, chunk, tool_call_chunks

#: Every event class of ``toolstitch.events`` (``Event`` and ``RunEvent`` are unions, not classes).
EVENT_CLASSES = {
    obj for name in events.__all__ if inspect.isclass(obj := getattr(events, name)) and name[0].isupper()
}
BIG = "1" + "0" * 5000  # an integer Python refuses to print (over 4,300 digits)
SURROGATE = "\ud800"
HOSTILE_VALUE = {"nan": math.nan, "inf": -math.inf, "text": "a" + SURROGATE, "big": 10**5000, 3: (1, 2)}


@ts.tool(read_only=True)
def echo(n: int) -> Any:
    """Echo something awkward."""
    return HOSTILE_VALUE


@ts.tool(confirm=True)
def book(what: str) -> str:
    """Book something (needs a person's yes)."""
    return f"booked {what}"


def strict_json(form: Any) -> str:
    """``form`` as strict JSON text (no NaN, valid UTF-8), checked to read back equal."""
    text = json.dumps(form, allow_nan=False, ensure_ascii=False)
    text.encode("utf-8")  # a lone surrogate would not encode
    assert json.loads(text) == form
    return text


def snake(name: str) -> str:
    return "".join("_" + c.lower() if c.isupper() else c for c in name).lstrip("_")


def hostile_calls(malformed: bool = False) -> list[dict[str, Any]]:
    """Content, reasoning and a refusal with a lone surrogate, and calls: a lone surrogate escaped
    in the arguments, NaN, an integer too long to print, arguments sent as an object holding NaN (a
    quirk, recorded with the raw value), a good one with a 30-digit integer, one that needs a
    person's yes, and (``malformed``) one whose JSON breaks while it streams."""
    calls = [
        ("call_s", "echo", '{"n": "\\ud800"}'),
        ("call_nan", "echo", '{"n": NaN}'),
        ("call_big", "echo", '{"n": ' + BIG + "}"),
        ("call_ok", "echo", '{"n": 123456789012345678901234567890}'),
        ("call_book", "book", '{"what": "a table"}'),
        *([("call_bad", "echo", '{"n": ]}')] if malformed else []),
    ]
    chunks = tool_call_chunks(calls, usage={"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3})
    head = {
        "index": 5,
        "id": "call_obj",
        "type": "function",
        "function": {"name": "echo", "arguments": {"n": math.nan}},
    }
    extra = [
        chunk(delta={"content": "hi " + SURROGATE}),
        chunk(delta={"reasoning_content": "think " + SURROGATE}),
        chunk(delta={"refusal": "no " + SURROGATE}),
        chunk(delta={"tool_calls": [head]}),
    ]
    chunks[-1]["usage"]["cost"] = math.nan  # NaN in the usage an event carries
    return chunks[:1] + extra + chunks[1:]


def test_every_event_of_a_real_stream_has_a_strict_json_form(server: LocalServer) -> None:
    server.enqueue(
        StreamScript(hostile_calls(malformed=True)),
        StreamScript(tool_call_chunks([("c", "echo", '{"n": 1')]), cut_after=4),
    )
    client = ts.wrap(server.client())
    tools = [echo.definition(), book.definition()]
    seen: dict[type, list[dict[str, Any]]] = {}
    streams = []
    for _ in range(2):  # the second stream is cut: the SDK's error reaches the loop
        stream = client.chat.completions.create(model="m", messages=[], tools=tools, stream=True)
        streams.append(stream)
        with contextlib.suppress(openai.APIConnectionError):
            for event in stream.events():
                form = event.to_dict()  # as the event stood when it happened
                strict_json(form)
                assert form["type"] == snake(type(event).__name__)
                seen.setdefault(type(event), []).append(form)
    stream_events = {c for c in EVENT_CLASSES if c.__module__.startswith("toolstitch.core")}
    assert stream_events <= set(seen), stream_events - set(seen)
    calls = {c.id: c.to_dict() for c in streams[0].tool_calls}  # the calls as they ended
    strict_json(calls)
    assert calls["call_s"]["status"] == "invalid" and calls["call_s"]["arguments"] == '{"n": "\\ud800"}'
    assert calls["call_nan"]["error"]["code"] == "malformed_arguments"
    assert calls["call_big"]["arguments"] == '{"n": ' + BIG + "}"
    assert calls["call_ok"]["status"] == "ready"
    assert calls["call_ok"]["parsed"] == {"n": 123456789012345678901234567890}
    raws = [f["anomaly"]["raw"] for f in seen[AnomalyRecorded]]
    assert any("NaN" in json.dumps(raw) for raw in raws), raws
    ended = seen[StreamEnded]
    assert ended[0]["usage"]["cost"] == "NaN" and ended[0]["error"] is None
    assert ended[1]["error"]["type"] == "APIConnectionError"
    [incomplete] = seen[ToolCallIncomplete]
    assert incomplete["call"]["status"] == "incomplete"


def run_forms(server: LocalServer, replies: list[StreamScript], **options: Any) -> list[Any]:
    """``(event, its form)`` for every event of a real ``run_events``, each form taken as the event
    was handed over and checked to be strict JSON."""
    server.enqueue(*replies)
    out = []
    with ts.Toolbox([echo, book]) as box:
        for event in ts.run_events(
            server.client(), model="m", messages=[{"role": "user", "content": "go"}], toolbox=box, **options
        ):
            form = event.to_dict()
            strict_json(form)
            if isinstance(event, StreamEvent):  # the stream event's own form, with its step
                assert form == {"type": form["type"], "step": event.step, **event.event.to_dict()}
            out.append((event, form))
    return out


def test_every_run_event_of_a_real_run_has_a_strict_json_form(server: LocalServer) -> None:
    cut = StreamScript(tool_call_chunks([("c", "echo", '{"n": 1')]), cut_after=3)  # retried
    broken = StreamScript(  # refused while it streams: abandoned (fail_fast)
        tool_call_chunks([("call_x", "echo", '{"n": ]' + " " * 200 + "}")], pieces=40), delay=0.005
    )
    answer = StreamScript([chunk(delta={"content": "Done."}), chunk(delta={}, finish_reason="stop")])
    first = run_forms(server, [cut, broken, answer], fail_fast=True, retry=RetryPolicy(initial=0, jitter=0))
    second = run_forms(server, [StreamScript(hostile_calls())])  # ends awaiting a person's yes
    kinds: set[type] = set()
    by_type: dict[str, list[dict[str, Any]]] = {}
    for event, form in first + second:
        kinds.add(type(event))
        by_type.setdefault(form["type"], []).append(form)
        if isinstance(event, StreamEvent):
            kinds.add(type(event.event))
        else:
            assert form["type"] == snake(type(event).__name__)
    assert kinds >= EVENT_CLASSES, EVENT_CLASSES - kinds
    assert by_type["request_retried"][0]["error"]["type"] == "APIConnectionError"
    assert by_type["stream_abandoned"][0]["call"]["id"] == "call_x"
    [ok] = [f for f in by_type["call_finished"] if f["result"]["call"]["id"] == "call_ok"]
    assert ok["result"]["value"] == {
        "nan": "NaN",
        "inf": "-Infinity",
        "text": "a\ufffd",
        "big": "[integer of 16610 bits]",
        "3": [1, 2],
    }
    [waiting] = by_type["call_awaiting_approval"]
    assert waiting["call"]["name"] == "book" and waiting["step"] == 0
    assert all(isinstance(f["step"], int) for f in by_type["step_finished"])
    done, waits = by_type["run_finished"]
    assert done["result"]["stop_reason"] == "done" and waits["result"]["stop_reason"] == "awaiting_approval"
    assert waits["result"]["messages"][0] == {"role": "user", "content": "go"}
    assert [c["id"] for c in waits["result"]["pending"]] == ["call_book"]


@pytest.mark.parametrize(
    ("value", "form"),
    [
        (math.nan, "NaN"),
        (math.inf, "Infinity"),
        ("x" + SURROGATE, "x\ufffd"),
        (10**5000, "[integer of 16610 bits]"),
        ({SURROGATE: 1}, {"\ufffd": 1}),
        (ValueError("bad"), {"type": "ValueError", "message": "bad"}),
    ],
    ids=["nan", "infinity", "surrogate", "big-int", "surrogate-key", "exception"],
)
def test_hostile_values_have_a_form(value: Any, form: Any) -> None:
    from toolstitch.core import json_form

    assert json_form(value) == form
    strict_json(json_form(value))


def test_an_object_that_cannot_be_read_becomes_a_marker() -> None:
    from toolstitch.core import json_form

    class Hostile:
        def __repr__(self) -> str:
            raise RuntimeError("no")

    deep: list[Any] = []
    for _ in range(500):
        deep = [deep]
    assert json_form(Hostile()) == "<Hostile>"
    strict_json(json_form(deep))
