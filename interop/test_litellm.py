"""LiteLLM, with its real classes: ``ts.stitch(litellm.completion(..., stream=True), tools=...)``
(its ``CustomStreamWrapper`` iterates both ways; its chunk classes keep their fields among
pydantic's extras) sync and async, ``litellm.completion(..., client=ts.wrap(OpenAI()))`` (LiteLLM
posts asking for the raw response), and ``ts.calls_of`` of a non-streamed ``ModelResponse``.

The tool loop is the user's own here (LiteLLM runs no tools): plain, it reads the calls with
``litellm.stream_chunk_builder``; stitched, with ``stream.tool_calls``. Both build the next request
from the calls the same way, so the requests must be equal."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import litellm
import pytest

import toolstitch as ts
from conftest import (
    MODEL,
    QUESTION,
    TOOLS,
    UNSAFE,
    Conversation,
    Tools,
    assert_refused,
    assert_same_and_stitched,
    enqueue_conversation,
)
from toolstitch.errors import UnsafeToolCallError
from toolstitch.testing import LocalServer, StreamScript

litellm.telemetry = False


def request(server: LocalServer, messages: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {
        "model": f"openai/{MODEL}",
        "api_base": server.base_url,
        "api_key": "test",
        "messages": messages,
        "tools": TOOLS,
        "stream": True,
        **extra,
    }


def assistant_turn(content: Any, calls: list[tuple[str, str, str]]) -> dict[str, Any]:
    """The assistant turn of the history, built the same way from (id, name, arguments) in both runs."""
    turn: dict[str, Any] = {"role": "assistant", "content": content or None}
    if calls:
        turn["tool_calls"] = [
            {"id": i, "type": "function", "function": {"name": n, "arguments": a}} for i, n, a in calls
        ]
    return turn


def plain_step(chunks: list[Any], messages: list[dict[str, Any]]) -> tuple[Any, list[tuple[str, str, str]]]:
    """LiteLLM's own way: the chunks built into a response by ``stream_chunk_builder``."""
    message = litellm.stream_chunk_builder(chunks, messages=messages).choices[0].message
    calls = [(c.id, c.function.name, c.function.arguments) for c in message.tool_calls or []]
    return message.content, calls


def stitched_step(stream: Any) -> tuple[Any, list[tuple[str, str, str]]]:
    """toolstitch's way: the ready calls of the stitched stream."""
    message = stream.get_final_completion().choices[0].message
    calls = [(c.id, c.name, c.arguments) for c in stream.tool_calls if c.status == "ready"]
    return message.content, calls


def loop(step: Any, tools: Tools) -> Any:
    """The user's tool loop: ask, run the calls, send their results, until the model answers."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": QUESTION}]
    while True:
        content, calls = step(messages)
        messages.append(assistant_turn(content, calls))
        if not calls:
            return content
        for call_id, name, arguments in calls:
            result = tools.run(name, json.loads(arguments))
            messages.append({"role": "tool", "tool_call_id": call_id, "content": str(result)})


async def aloop(step: Any, tools: Tools) -> Any:
    messages: list[dict[str, Any]] = [{"role": "user", "content": QUESTION}]
    while True:
        content, calls = await step(messages)
        messages.append(assistant_turn(content, calls))
        if not calls:
            return content
        for call_id, name, arguments in calls:
            result = tools.run(name, json.loads(arguments))
            messages.append({"role": "tool", "tool_call_id": call_id, "content": str(result)})


def converse(server: LocalServer, folder: Path | None, make_step: Any) -> Conversation:
    sent = enqueue_conversation(server)
    tools = Tools()
    output = loop(make_step(server, folder), tools)
    return Conversation(server.requests[sent:], tools.runs, output, folder)


async def aconverse(server: LocalServer, folder: Path | None, make_step: Any) -> Conversation:
    sent = enqueue_conversation(server)
    tools = Tools()
    output = await aloop(make_step(server, folder), tools)
    return Conversation(server.requests[sent:], tools.runs, output, folder)


# ------------------------------------------------------------------------- ts.stitch(litellm.completion(...))


def stitch_steps(server: LocalServer, folder: Path | None) -> Any:
    def step(messages: list[dict[str, Any]]) -> Any:
        response = litellm.completion(**request(server, messages))
        if folder is None:
            return plain_step(list(response), messages)
        stream = ts.stitch(response, tools=TOOLS)
        assert isinstance(stream, ts.StitchedStream)  # no event loop runs here: read with for
        stream.record(folder / f"{len(list(folder.iterdir()))}.jsonl")
        chunks = list(stream)
        assert {type(c).__name__ for c in chunks} == {"ModelResponseStream"}  # LiteLLM's, unchanged
        return stitched_step(stream)

    return step


def astitch_steps(server: LocalServer, folder: Path | None) -> Any:
    async def step(messages: list[dict[str, Any]]) -> Any:
        response = await litellm.acompletion(**request(server, messages))
        if folder is None:
            return plain_step([c async for c in response], messages)
        stream = ts.stitch(response, tools=TOOLS)
        assert isinstance(stream, ts.AsyncStitchedStream)  # inside the event loop: read with async for
        stream.record(folder / f"{len(list(folder.iterdir()))}.jsonl")
        chunks = [c async for c in stream]
        assert {type(c).__name__ for c in chunks} == {"ModelResponseStream"}
        message = (await stream.get_final_completion()).choices[0].message
        return message.content, [
            (c.id, c.name, c.arguments) for c in stream.tool_calls if c.status == "ready"
        ]

    return step


def test_stitch_of_completion_is_the_same_and_every_stream_stitched(
    server: LocalServer, tmp_path: Path
) -> None:
    plain = converse(server, None, stitch_steps)
    wrapped = converse(server, tmp_path, stitch_steps)
    assert plain.output == "It is sunny in Paris."
    assert_same_and_stitched(plain, wrapped)


async def test_stitch_of_acompletion_is_the_same_and_every_stream_stitched(
    server: LocalServer, tmp_path: Path
) -> None:
    plain = await aconverse(server, None, astitch_steps)
    wrapped = await aconverse(server, tmp_path, astitch_steps)
    assert plain.output == "It is sunny in Paris."
    assert_same_and_stitched(plain, wrapped)


# ------------------------------------------------------------------- litellm.completion(client=ts.wrap(...))


def client_steps(server: LocalServer, folder: Path | None) -> Any:
    client = server.client() if folder is None else ts.wrap(server.client(), record=folder)

    def step(messages: list[dict[str, Any]]) -> Any:
        return plain_step(list(litellm.completion(**request(server, messages, client=client))), messages)

    return step


def aclient_steps(server: LocalServer, folder: Path | None) -> Any:
    client = server.async_client() if folder is None else ts.wrap(server.async_client(), record=folder)

    async def step(messages: list[dict[str, Any]]) -> Any:
        response = await litellm.acompletion(**request(server, messages, client=client))
        return plain_step([c async for c in response], messages)

    return step


def test_a_wrapped_client_given_to_completion_stitches_every_stream(
    server: LocalServer, tmp_path: Path
) -> None:
    plain = converse(server, None, client_steps)
    wrapped = converse(server, tmp_path, client_steps)
    assert_same_and_stitched(plain, wrapped)


async def test_a_wrapped_client_given_to_acompletion_stitches_every_stream(
    server: LocalServer, tmp_path: Path
) -> None:
    plain = await aconverse(server, None, aclient_steps)
    wrapped = await aconverse(server, tmp_path, aclient_steps)
    assert_same_and_stitched(plain, wrapped)


# ------------------------------------------------------------------------- not streamed


def test_tool_calls_of_a_model_response(server: LocalServer) -> None:
    server.enqueue(StreamScript(UNSAFE["truncated"]), StreamScript(UNSAFE["schema-breaking"]))
    enqueue_conversation(server)
    messages = [{"role": "user", "content": QUESTION}]
    statuses = []
    for _ in range(3):
        response = litellm.completion(**request(server, messages, stream=False))
        assert type(response).__name__ == "ModelResponse"
        statuses.append([(c.name, c.status) for c in ts.calls_of(response, tools=TOOLS)])
    assert statuses == [[("get_weather", "invalid")], [("add", "invalid")], [("get_weather", "ready")]]


# ------------------------------------------------------------------------- guard=True


@pytest.mark.parametrize("case", sorted(UNSAFE))
def test_a_guarded_stitch_runs_nothing(server: LocalServer, case: str) -> None:
    sent = len(server.requests)
    server.enqueue(StreamScript(UNSAFE[case]))
    tools = Tools()

    def step(messages: list[dict[str, Any]]) -> Any:
        stream = ts.stitch(litellm.completion(**request(server, messages)), tools=TOOLS, guard=True)
        return stitched_step(stream)

    with pytest.raises(UnsafeToolCallError) as caught:
        loop(step, tools)
    assert_refused(caught.value, case, tools, server, sent)


@pytest.mark.parametrize("case", sorted(UNSAFE))
async def test_a_guarded_async_stitch_runs_nothing(server: LocalServer, case: str) -> None:
    sent = len(server.requests)
    server.enqueue(StreamScript(UNSAFE[case]))
    tools = Tools()

    async def step(messages: list[dict[str, Any]]) -> Any:
        response = await litellm.acompletion(**request(server, messages))
        stream = ts.stitch(response, tools=TOOLS, guard=True)
        await stream.get_final_completion()
        return None, []

    with pytest.raises(UnsafeToolCallError) as caught:
        await aloop(step, tools)
    assert_refused(caught.value, case, tools, server, sent)


@pytest.mark.parametrize("case", sorted(UNSAFE))
def test_a_guarded_client_makes_litellm_raise(server: LocalServer, case: str) -> None:
    sent = len(server.requests)
    server.enqueue(StreamScript(UNSAFE[case]))
    tools = Tools()
    client = ts.wrap(server.client(), guard=True)

    def step(messages: list[dict[str, Any]]) -> Any:
        return plain_step(list(litellm.completion(**request(server, messages, client=client))), messages)

    with pytest.raises(Exception) as caught:
        loop(step, tools)
    assert_refused(caught.value, case, tools, server, sent)
    assert type(caught.value).__name__ == "MidStreamFallbackError"  # a Router falls back on it
    assert "toolstitch guard" in str(caught.value)


@pytest.mark.parametrize("case", sorted(UNSAFE))
async def test_a_guarded_async_client_makes_litellm_raise(server: LocalServer, case: str) -> None:
    sent = len(server.requests)
    server.enqueue(StreamScript(UNSAFE[case]))
    tools = Tools()
    client = ts.wrap(server.async_client(), guard=True)

    async def step(messages: list[dict[str, Any]]) -> Any:
        response = await litellm.acompletion(**request(server, messages, client=client))
        return plain_step([c async for c in response], messages)

    with pytest.raises(Exception) as caught:
        await aloop(step, tools)
    assert_refused(caught.value, case, tools, server, sent)
    assert type(caught.value).__name__ == "MidStreamFallbackError"
