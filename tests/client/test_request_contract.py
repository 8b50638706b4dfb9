"""The request is the contract (rule 10), over real HTTP with the real ``openai`` client.

A request that offers no tool (neither ``tools`` nor ``functions``, or empty lists) makes every
streamed call ``invalid`` (``UnknownTool``); legacy ``functions`` are offered tools like ``tools``.

``tools`` given as any iterable is read once: the SDK sends that list and the accumulator checks
every call against it. ``tool_choice`` and ``parallel_tool_calls`` reach the accumulator, so a
call the request forbade never comes out ``ready``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import toolstitch as ts
from tests.conftest import examples
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


def contract_stream(
    server: LocalServer, calls: list[tuple[str, str, str]], **request: Any
) -> list[ts.ToolCall]:
    server.enqueue(StreamScript(tool_call_chunks(calls)))
    client = ts.wrap(server.client())
    stream = client.chat.completions.create(model="m", messages=MESSAGES, stream=True, **request)
    with stream:
        calls_out = stream.until_done().tool_calls
    refusals = [c.index for c in calls_out if refused(c)]
    noted = sorted({a.call_index for a in stream.anomalies if a.code == "contract_violation"})
    assert noted == refusals  # every refusal is visible as an anomaly (rule 8), and only those
    return calls_out


def refused(call: ts.ToolCall) -> bool:
    return call.status == "invalid" and isinstance(call.error, ts.errors.ContractViolation)


def test_parallel_tool_calls_false_refuses_every_call_after_the_first(server: LocalServer) -> None:
    two = [("c1", "f", '{"x": 1}'), ("c2", "f", '{"x": 2}')]
    calls = contract_stream(server, two, tools=[F], parallel_tool_calls=False)
    assert calls[0].status == "ready"
    assert refused(calls[1])
    assert server.requests[-1]["parallel_tool_calls"] is False
    assert [c.status for c in contract_stream(server, two, tools=[F], parallel_tool_calls=True)] == [
        "ready",
        "ready",
    ]


def test_a_forced_tool_choice_refuses_calls_to_other_tools(server: LocalServer) -> None:
    forced = {"type": "function", "function": {"name": "f"}}
    calls = contract_stream(
        server, [("c1", "g", '{"x": 1}'), ("c2", "f", '{"x": 2}')], tools=[F, G], tool_choice=forced
    )
    assert refused(calls[0])
    assert calls[1].status == "ready"


def test_tool_choice_none_refuses_every_call(server: LocalServer) -> None:
    calls = contract_stream(server, [("c1", "f", '{"x": 1}')], tools=[F], tool_choice="none")
    assert refused(calls[0])


def test_tool_choice_auto_and_omitted_refuse_nothing(server: LocalServer) -> None:
    import openai

    for choice in ("auto", "required", openai.NOT_GIVEN):
        calls = contract_stream(server, [("c1", "f", '{"x": 1}')], tools=[F], tool_choice=choice)
        assert calls[0].status == "ready", choice


async def test_async_streams_enforce_the_contract_too(server: LocalServer) -> None:
    server.enqueue(StreamScript(tool_call_chunks([("c1", "f", '{"x": 1}'), ("c2", "f", '{"x": 2}')])))
    client = ts.wrap(server.async_client())
    stream = await client.chat.completions.create(
        model="m",
        messages=MESSAGES,
        stream=True,
        tools=(t for t in [F]),
        tool_choice={"type": "function", "function": {"name": "f"}},
        parallel_tool_calls=False,
    )
    async with stream:
        await stream.until_done()
    assert stream.tool_calls[0].status == "ready"
    assert refused(stream.tool_calls[1])


def test_generator_tools_with_a_forced_choice(server: LocalServer) -> None:
    calls = contract_stream(
        server,
        [("c1", "h", '{"x": 1}')],
        tools=(t for t in [F, G]),
        tool_choice={"type": "function", "function": {"name": "f"}},
    )
    assert calls[0].status == "invalid"  # h was never offered, and f was forced


NAMES = ["f", "g", "h"]


@settings(max_examples=examples(30))
@given(
    called=st.lists(st.sampled_from(NAMES), min_size=1, max_size=4),
    offered=st.lists(st.sampled_from(NAMES), unique=True, max_size=3),
    choice=st.sampled_from([None, "auto", "required", "none", *NAMES]),
    parallel=st.sampled_from([None, True, False]),
    shape=st.sampled_from(list(SHAPES)),
)
def test_no_call_the_request_forbade_is_ever_ready(
    called: list[str], offered: list[str], choice: str | None, parallel: bool | None, shape: str
) -> None:
    """Property, over real HTTP: whatever the model calls, a ``ready`` call names an offered tool,
    obeys ``tool_choice``, and is the first call when ``parallel_tool_calls=False``."""
    request: dict[str, Any] = {"tools": SHAPES[shape]([tool(n) for n in offered])} if offered else {}
    if choice in NAMES:
        request["tool_choice"] = {"type": "function", "function": {"name": choice}}
    elif choice is not None:
        request["tool_choice"] = choice
    if parallel is not None:
        request["parallel_tool_calls"] = parallel
    scripted = [(f"c{k}", name, '{"x": 1}') for k, name in enumerate(called)]
    with LocalServer() as server:
        calls = contract_stream(server, scripted, **request)
    for call in calls:
        if call.status != "ready":
            continue
        assert call.name in offered  # a request that offers no tool makes no call ready
        assert choice != "none"
        assert choice not in NAMES or call.name == choice
        assert parallel is not False or call.index == 0


def test_the_contract_is_what_extra_body_sends(server: LocalServer) -> None:
    calls = contract_stream(
        server,
        [("c1", "g", '{"x": 1}'), ("c2", "f", '{"x": 2}')],
        extra_body={"tools": [F], "parallel_tool_calls": False},
    )
    assert server.requests[-1]["tools"] == [F]
    assert calls[0].status == "invalid"  # g was not offered
    assert refused(calls[1])  # and only one call was allowed
    calls = contract_stream(
        server, [("c1", "f", '{"x": 1}')], tools=[G], extra_body={"tools": [F], "tool_choice": "auto"}
    )
    assert server.requests[-1]["tools"] == [F]  # extra_body wins in the SDK, so it does here
    assert calls[0].status == "ready"


# -- a request that offers no tool --------------------------------------------------------------

NO_TOOLS: dict[str, dict[str, Any]] = {
    "neither tools nor functions": {},
    "tools=[]": {"tools": []},
    "functions=[]": {"functions": []},
    "extra_body tools=[]": {"extra_body": {"tools": []}},
}


def unknown(call: ts.ToolCall) -> bool:
    return call.status == "invalid" and isinstance(call.error, ts.errors.UnknownTool)


@pytest.mark.parametrize("case", NO_TOOLS)
def test_a_request_offering_no_tool_makes_no_call_ready(server: LocalServer, case: str) -> None:
    calls = contract_stream(server, [("c1", "f", '{"x": 1}'), ("c2", "g", "{}")], **NO_TOOLS[case])
    assert [unknown(c) for c in calls] == [True, True]
    assert "offered: none" in str(calls[0].error)
    assert "tools" not in server.requests[-1] or server.requests[-1]["tools"] == []


@pytest.mark.parametrize("case", NO_TOOLS)
async def test_async_a_request_offering_no_tool_makes_no_call_ready(server: LocalServer, case: str) -> None:
    server.enqueue(StreamScript(tool_call_chunks([("c1", "f", '{"x": 1}')])))
    client = ts.wrap(server.async_client())
    stream = await client.chat.completions.create(model="m", messages=MESSAGES, stream=True, **NO_TOOLS[case])
    async with stream:
        await stream.until_done()
    assert [unknown(c) for c in stream.tool_calls] == [True]


def test_a_raw_response_stream_offering_no_tool_makes_no_call_ready(server: LocalServer) -> None:
    server.enqueue(StreamScript(tool_call_chunks([("c1", "f", '{"x": 1}')])))
    raw = ts.wrap(server.client()).chat.completions.with_raw_response.create(
        model="m", messages=MESSAGES, stream=True
    )
    stream = raw.parse()
    stream.until_done()
    assert [unknown(c) for c in stream.tool_calls] == [True]


def test_the_sans_io_core_without_tools_still_checks_no_names() -> None:
    """``Accumulator()`` does not see a request: tools not given are unknown, so names go unchecked
    (only the wrapper, which sees the request, knows none were offered); an empty list offers none."""
    for tools, ready in ((None, True), ([], False)):
        acc = ts.Accumulator(tools)
        for piece in tool_call_chunks([("c1", "f", '{"x": 1}')]):
            acc.feed(piece)
        acc.end()
        assert [c.ready for c in acc.tool_calls] == [ready]


LEGACY_F = {"name": "f", "parameters": F["function"]["parameters"]}


def test_legacy_functions_are_the_offered_tools(server: LocalServer) -> None:
    calls = contract_stream(
        server,
        [("c1", "f", '{"x": 1}'), ("c2", "g", '{"x": 1}'), ("c3", "f", '{"x": "1"}')],
        functions=[LEGACY_F],
    )
    assert server.requests[-1]["functions"] == [LEGACY_F]
    assert calls[0].status == "ready"
    assert unknown(calls[1])  # g was never offered
    assert isinstance(calls[2].error, ts.errors.SchemaViolation)  # checked against the function's schema


async def test_async_legacy_functions_are_the_offered_tools(server: LocalServer) -> None:
    server.enqueue(StreamScript(tool_call_chunks([("c1", "f", '{"x": 1}'), ("c2", "g", '{"x": 1}')])))
    client = ts.wrap(server.async_client())
    stream = await client.chat.completions.create(
        model="m", messages=MESSAGES, stream=True, tools=[G], functions=[LEGACY_F]
    )
    async with stream:
        await stream.until_done()
    assert [c.status for c in stream.tool_calls] == ["ready", "ready"]  # tools and functions both offer


def test_a_replay_refuses_what_a_request_offering_no_tool_refused(server: LocalServer, tmp_path: Any) -> None:
    server.enqueue(StreamScript(tool_call_chunks([("c1", "f", '{"x": 1}')])))
    client = ts.wrap(server.client(), record=tmp_path)
    with client.chat.completions.create(model="m", messages=MESSAGES, stream=True) as stream:
        stream.until_done()
    (path,) = tmp_path.glob("*.jsonl")
    replayed = ts.replay(path).until_done()
    assert [unknown(c) for c in replayed.tool_calls] == [unknown(c) for c in stream.tool_calls] == [True]


def test_a_legacy_function_call_is_the_tool_choice(server: LocalServer) -> None:
    two = [("c1", "g", '{"x": 1}'), ("c2", "f", '{"x": 2}')]
    legacy_g = {"name": "g", "parameters": G["function"]["parameters"]}
    calls = contract_stream(server, two, functions=[LEGACY_F, legacy_g], function_call={"name": "f"})
    assert server.requests[-1]["function_call"] == {"name": "f"}
    assert refused(calls[0]) and calls[1].status == "ready"  # f was forced
    calls = contract_stream(server, two, functions=[LEGACY_F, legacy_g], function_call="none")
    assert all(refused(c) for c in calls)
    calls = contract_stream(server, two, functions=[LEGACY_F, legacy_g], function_call="auto")
    assert [c.status for c in calls] == ["ready", "ready"]
    # tool_choice, when sent, is the one that counts
    calls = contract_stream(server, two, tools=[F, G], tool_choice="auto", function_call="none")
    assert [c.status for c in calls] == ["ready", "ready"]


@pytest.mark.parametrize(
    "request_",
    [
        {"tools": [F], "tool_choice": "none"},
        {"tools": [F], "parallel_tool_calls": False},
        {"tools": [F, G], "tool_choice": {"type": "function", "function": {"name": "g"}}},
        {"functions": [LEGACY_F], "function_call": "none"},
    ],
)
def test_a_replay_refuses_what_the_request_forbade(server: LocalServer, tmp_path: Any, request_: Any) -> None:
    server.enqueue(StreamScript(tool_call_chunks([("c1", "f", '{"x": 1}'), ("c2", "f", '{"x": 2}')])))
    client = ts.wrap(server.client(), record=tmp_path)
    with client.chat.completions.create(model="m", messages=MESSAGES, stream=True, **request_) as stream:
        stream.until_done()
    (path,) = tmp_path.glob("*.jsonl")
    replayed = ts.replay(path).until_done()
    assert any(refused(c) for c in stream.tool_calls)
    assert [(c.status, type(c.error)) for c in replayed.tool_calls] == [
        (c.status, type(c.error)) for c in stream.tool_calls
    ]
