"""What ``ts.run`` takes in, as people write it: ``toolbox=`` a plain list of tools, and a history
holding the SDK's own objects (``messages.append(completion.choices[0].message)``), with the real
SDK over real HTTP (``LocalServer``).

A list of tools is made a ``Toolbox`` as ``ts.Toolbox([...])`` makes it; anything else that is not
a toolbox is a ``TypeError`` naming ``toolbox=`` and the fix, before anything is sent. The history
a run returns is plain JSON whatever the caller's history held (docs/production.md stores it).
"""

from __future__ import annotations

from typing import Any

import pytest

import toolstitch as ts
from tests.tools._support import Recorder, calls_reply, text_reply
from toolstitch.events import RunFinished
from toolstitch.testing import LocalServer

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
