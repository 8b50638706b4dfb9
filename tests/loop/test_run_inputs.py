"""What ``ts.run`` takes in, as people write it: ``toolbox=`` a plain list of tools, and a history
holding the SDK's own objects (``messages.append(completion.choices[0].message)``), with the real
SDK over real HTTP (``LocalServer``).

A list of tools is made a ``Toolbox`` as ``ts.Toolbox([...])`` makes it; anything else that is not
a toolbox is a ``TypeError`` naming ``toolbox=`` and the fix, before anything is sent. The history
a run returns is plain JSON whatever the caller's history held (docs/production.md stores it).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

import toolstitch as ts
from tests.tools._support import Recorder, calls_reply, text_reply
from toolstitch.events import RunFinished
from toolstitch.testing import LocalServer, StreamScript, response_events

ran = Recorder()


def get_weather(city: str) -> str:
    """Current weather for a city."""
    ran.add("get_weather", city)
    return f"sunny in {city}"


@ts.tool(read_only=True)
def get_time(tz: str) -> str:
    """The time in a time zone."""
    ran.add("get_time", tz)
    return "12:00"


CALLS = [("call_1", "get_weather", '{"city": "Paris"}'), ("call_2", "get_time", '{"tz": "CET"}')]
USER = [{"role": "user", "content": "Weather and time in Paris?"}]


def model(body: dict[str, Any]) -> Any:
    """Calls first; once the request carries their results, the answer."""
    if any(m.get("role") == "tool" for m in body.get("messages") or []):
        return text_reply("Sunny, noon.")
    return calls_reply(CALLS)


@pytest.fixture(autouse=True)
def _reset() -> None:
    ran.calls.clear()


# ----------------------------------------------------------------------------- toolbox= a list


@pytest.mark.parametrize("tools", [[get_weather, get_time], (get_weather, get_time)])
def test_a_list_of_tools_is_a_toolbox(server: LocalServer, tools: Any) -> None:
    """A plain function and a ``ts.tool`` in a list (or a tuple) run as in ``ts.Toolbox([...])``
    (it raised ``AttributeError: 'list' object has no attribute ...``)."""
    server.handler = model
    result = ts.run(server.client(), model="m", messages=USER, toolbox=tools)
    assert result.stop_reason == "done"
    assert sorted(ran.names()) == ["get_time", "get_weather"]
    assert server.requests[0]["tools"] == ts.Toolbox([get_weather, get_time]).definitions()


async def test_a_list_of_tools_is_a_toolbox_async(server: LocalServer) -> None:
    server.handler = model
    result = await ts.arun(server.async_client(), model="m", messages=USER, toolbox=[get_weather, get_time])
    assert result.stop_reason == "done"
    assert sorted(ran.names()) == ["get_time", "get_weather"]


def test_a_list_of_tools_for_the_event_iterators(server: LocalServer) -> None:
    server.handler = model
    events = list(ts.run_events(server.client(), model="m", messages=USER, toolbox=[get_weather, get_time]))
    assert isinstance(events[-1], RunFinished) and events[-1].result.stop_reason == "done"
    assert sorted(ran.names()) == ["get_time", "get_weather"]


async def test_a_list_of_tools_for_the_async_event_iterator(server: LocalServer) -> None:
    server.handler = model
    client = server.async_client()
    events = [e async for e in ts.arun_events(client, model="m", messages=USER, toolbox=[get_weather])]
    assert isinstance(events[-1], RunFinished)
    assert ran.names() == ["get_weather"]


@pytest.mark.parametrize(
    ("toolbox", "fix"),
    [
        (get_weather, "toolbox=ts.Toolbox([get_weather]) or toolbox=[get_weather]"),
        (get_time, "toolbox=ts.Toolbox([get_time]) or toolbox=[get_time]"),
        ({"get_weather": get_weather}, "toolbox=ts.Toolbox([fn, ...]) or toolbox=[fn, ...]"),
        (None, "toolbox=ts.Toolbox([fn, ...])"),
        ("get_weather", "toolbox=[fn, ...]"),
    ],
)
async def test_anything_else_is_a_type_error_that_names_the_fix(
    server: LocalServer, toolbox: Any, fix: str
) -> None:
    for attempt in (
        lambda: ts.run(server.client(), model="m", messages=USER, toolbox=toolbox),
        lambda: list(ts.run_events(server.client(), model="m", messages=USER, toolbox=toolbox)),
    ):
        with pytest.raises(TypeError, match=r"toolbox= takes a ts\.Toolbox or a list of tools") as info:
            attempt()
        assert fix in str(info.value)
    with pytest.raises(TypeError, match="toolbox= takes") as info:
        await ts.arun(server.async_client(), model="m", messages=USER, toolbox=toolbox)
    assert fix in str(info.value)
    assert server.requests == []  # refused before anything was sent


# ----------------------------------------------------------------------------- SDK objects in messages


def test_sdk_objects_in_messages_come_back_as_plain_json(server: LocalServer) -> None:
    """``messages.append(completion.choices[0].message)`` (a ``ChatCompletionMessage``) and the
    SDK's tool calls: ``result.messages`` is plain JSON (``json.dumps`` works), the objects read
    as the SDK sends them, and the next run takes the stored history."""
    server.enqueue(calls_reply(CALLS[:1]))
    client = server.client()
    completion = client.chat.completions.create(model="m", messages=USER, tools=[_weather_tool()])
    message = completion.choices[0].message  # the SDK's model, as people append it
    assert type(message).__name__ == "ChatCompletionMessage"
    messages: list[Any] = [*USER, message]
    messages.append({"role": "tool", "tool_call_id": "call_1", "content": "sunny in Paris"})
    messages.append({"role": "user", "content": "And the time?"})
    server.enqueue(calls_reply(CALLS[1:]), text_reply("Noon."))
    result = ts.run(client, model="m", messages=messages, toolbox=[get_weather, get_time])
    assert result.stop_reason == "done"
    stored = json.loads(json.dumps(result.messages))
    assert stored == result.messages
    assert stored[1] == message.model_dump(mode="json", exclude_unset=True)
    assert server.requests[1]["messages"][1] == stored[1]  # what the SDK sent for the object

    server.enqueue(text_reply("Anything else?"))
    again = ts.run(client, model="m", messages=[*stored, {"role": "user", "content": "thanks"}], toolbox=[])
    assert again.stop_reason == "done" and json.dumps(again.messages)


def test_sdk_items_in_a_responses_input_come_back_as_plain_json(server: LocalServer) -> None:
    """``api="responses"``: an input holding the SDK's output items (``ResponseFunctionToolCall``,
    ``ResponseReasoningItem``), as ``input += response.output`` makes it, comes back plain, and the
    next run takes the stored input."""
    pytest.importorskip("openai.types.responses", reason="this openai release has no Responses API")
    server.check_history = True
    first = response_events(CALLS[:1], reasoning="Weather first.")
    server.enqueue(StreamScript.responses(first))
    client = server.client()
    with client.responses.create(model="m", input="Weather in Paris?", stream=True) as stream:
        response = next(e.response for e in stream if e.type == "response.completed")
    kinds = [type(item).__name__ for item in response.output]
    assert kinds == ["ResponseReasoningItem", "ResponseFunctionToolCall"]
    given: list[Any] = [{"role": "user", "content": "Weather in Paris?"}, *response.output]
    given.append({"type": "function_call_output", "call_id": "call_1", "output": "sunny in Paris"})
    given.append({"role": "user", "content": "And the time?"})
    server.enqueue(
        StreamScript.responses(response_events(CALLS[1:], id="resp_2")),
        StreamScript.responses(response_events(text="Noon.", id="resp_3")),
    )
    result = ts.run(client, model="m", input=given, toolbox=[get_weather, get_time], api="responses")
    assert result.stop_reason == "done" and result.output_text == "Noon."
    stored = json.loads(json.dumps(result.input))
    assert stored == result.input
    assert stored[1:3] == [item.model_dump(mode="json", exclude_unset=True) for item in response.output]
    assert server.requests[1]["input"][1:3] == stored[1:3]  # what the SDK sent for the objects

    server.enqueue(StreamScript.responses(response_events(text="Anything else?", id="resp_4")))
    again = ts.run(
        client, model="m", input=[*stored, {"role": "user", "content": "thanks"}], toolbox=[], api="responses"
    )
    assert again.stop_reason == "done" and json.dumps(again.input)


def _weather_tool() -> dict[str, Any]:
    return ts.Toolbox([get_weather]).definitions()[0]
