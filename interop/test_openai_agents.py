"""openai-agents: ``OpenAIChatCompletionsModel(openai_client=ts.wrap(AsyncOpenAI()))`` with
``Runner.run_streamed``, and structured output (``output_type``), plain and wrapped; guarded, an
unsafe stream runs no tool and ``UnsafeToolCallError`` itself comes out of ``stream_events()``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from agents import Agent, OpenAIChatCompletionsModel, Runner, function_tool, set_tracing_disabled
from pydantic import BaseModel

import toolstitch as ts
from conftest import (
    CALL,
    MODEL,
    QUESTION,
    STRUCTURED,
    STRUCTURED_TEXT,
    UNSAFE,
    Conversation,
    Tools,
    assert_refused,
    assert_same_and_stitched,
    enqueue_conversation,
)
from toolstitch.errors import UnsafeToolCallError
from toolstitch.testing import LocalServer, StreamScript

set_tracing_disabled(True)


async def run_streamed(client: Any, tools: Tools) -> Any:
    agent = Agent(
        name="weather",
        instructions="Answer briefly.",
        model=OpenAIChatCompletionsModel(model=MODEL, openai_client=client),
        tools=[function_tool(tools.get_weather), function_tool(tools.add)],
    )
    result = Runner.run_streamed(agent, QUESTION)
    async for _ in result.stream_events():
        pass
    return result.final_output


async def converse(server: LocalServer, folder: Path | None) -> Conversation:
    sent = enqueue_conversation(server)
    tools = Tools()
    client = server.async_client() if folder is None else ts.wrap(server.async_client(), record=folder)
    output = await run_streamed(client, tools)
    return Conversation(server.requests[sent:], tools.runs, output, folder)


async def test_the_conversation_is_the_same_and_every_stream_stitched(
    server: LocalServer, tmp_path: Path
) -> None:
    plain = await converse(server, None)
    wrapped = await converse(server, tmp_path)
    assert plain.output == "It is sunny in Paris."
    assert_same_and_stitched(plain, wrapped)


@pytest.mark.parametrize("case", sorted(UNSAFE))
async def test_guarded_an_unsafe_stream_runs_nothing_and_fails_the_run(
    server: LocalServer, case: str
) -> None:
    sent = len(server.requests)
    server.enqueue(StreamScript(UNSAFE[case]))
    tools = Tools()
    with pytest.raises(UnsafeToolCallError) as caught:
        await run_streamed(ts.wrap(server.async_client(), guard=True), tools)
    assert_refused(caught.value, case, tools, server, sent)


class Weather(BaseModel):
    city: str
    sky: str


async def test_structured_output_is_the_same_and_every_stream_stitched(
    server: LocalServer, tmp_path: Path
) -> None:
    runs = []
    for folder in (None, tmp_path):
        sent = len(server.requests)
        server.enqueue(StreamScript(CALL), StreamScript(STRUCTURED_TEXT))
        tools = Tools()
        client = server.async_client() if folder is None else ts.wrap(server.async_client(), record=folder)
        agent = Agent(
            name="weather",
            model=OpenAIChatCompletionsModel(model=MODEL, openai_client=client),
            tools=[function_tool(tools.get_weather)],
            output_type=Weather,
        )
        result = Runner.run_streamed(agent, QUESTION)
        async for _ in result.stream_events():
            pass
        runs.append(Conversation(server.requests[sent:], tools.runs, result.final_output, folder))
    assert runs[0].output == Weather(**STRUCTURED)
    assert_same_and_stitched(*runs)
