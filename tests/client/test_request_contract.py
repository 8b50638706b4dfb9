"""The request is the contract (rule 10), over real HTTP with the real ``openai`` client.

``tools`` given as any iterable is read once: the SDK sends that list and the accumulator checks
every call against it. ``tool_choice`` and ``parallel_tool_calls`` reach the accumulator, so a
call the request forbade never comes out ``ready``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import pytest

import toolstitch as ts
from toolstitch.testing import LocalServer, StreamScript, tool_call_chunks

MESSAGES = [{"role": "user", "content": "hi"}]


def tool(name: str) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "parameters": {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]},
        },
    }


F, G = tool("f"), tool("g")
SHAPES: dict[str, Callable[[list[dict[str, Any]]], Iterable[Any]]] = {
    "generator": lambda tools: (t for t in tools),
    "dict.values()": lambda tools: {t["function"]["name"]: t for t in tools}.values(),
    "map": lambda tools: map(dict, tools),
    "tuple": tuple,
    "iterator": iter,
}


@pytest.mark.parametrize("shape", SHAPES)
def test_tools_from_any_iterable_are_read_once_sent_and_checked(server: LocalServer, shape: str) -> None:
    server.enqueue(StreamScript(tool_call_chunks([("c1", "f", '{"x": 1}'), ("c2", "g", '{"x": 2}')])))
    client = ts.wrap(server.client())
    tools = SHAPES[shape]([F])
    with client.chat.completions.create(model="m", messages=MESSAGES, tools=tools, stream=True) as stream:
        calls = stream.until_done().tool_calls
    assert server.requests[-1]["tools"] == [F]  # the SDK sent the tools, all of them
    assert [c.status for c in calls] == ["ready", "invalid"]  # g was never offered
    assert isinstance(calls[1].error, ts.errors.UnknownTool)


@pytest.mark.parametrize("shape", SHAPES)
async def test_async_tools_from_any_iterable_are_read_once(server: LocalServer, shape: str) -> None:
    server.enqueue(StreamScript(tool_call_chunks([("c1", "g", '{"x": 1}')])))
    client = ts.wrap(server.async_client())
    tools = SHAPES[shape]([F])
    stream = await client.chat.completions.create(model="m", messages=MESSAGES, tools=tools, stream=True)
    async with stream:
        await stream.until_done()
    assert server.requests[-1]["tools"] == [F]
    assert [c.status for c in stream.tool_calls] == ["invalid"]


def test_raw_response_streams_read_tools_once_too(server: LocalServer) -> None:
    server.enqueue(StreamScript(tool_call_chunks([("c1", "g", '{"x": 1}')])))
    client = ts.wrap(server.client())
    raw = client.chat.completions.with_raw_response.create(
        model="m", messages=MESSAGES, tools=(t for t in [F]), stream=True
    )
    stream = raw.parse()
    stream.until_done()
    assert server.requests[-1]["tools"] == [F]
    assert [c.status for c in stream.tool_calls] == ["invalid"]


def test_the_callers_kwargs_are_not_changed(server: LocalServer) -> None:
    server.enqueue(StreamScript(tool_call_chunks([("c1", "f", '{"x": 1}')])))
    client = ts.wrap(server.client())
    kwargs: dict[str, Any] = {"model": "m", "messages": MESSAGES, "tools": (F,), "stream": True}
    client.chat.completions.create(**kwargs).until_done()
    assert kwargs["tools"] == (F,)
