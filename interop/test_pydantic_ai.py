"""pydantic-ai: ``OpenAIProvider(openai_client=ts.wrap(AsyncOpenAI()))``, with ``run_stream`` and
``run_stream_events``, and structured output (``output_type``), plain and wrapped; guarded, an
unsafe stream runs no tool and the run fails with pydantic-ai's ``ModelAPIError`` raised from
``UnsafeToolCallError``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel
from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

import toolstitch as ts
from conftest import (
    CALL,
    MODEL,
    QUESTION,
    STRUCTURED,
    UNSAFE,
    Conversation,
    Tools,
    assert_refused,
    assert_same_and_stitched,
    enqueue_conversation,
    structured_call,
)
from toolstitch.testing import LocalServer, StreamScript


def agent(client: Any, tools: Tools) -> Agent[None, str]:
    made = Agent(OpenAIChatModel(MODEL, provider=OpenAIProvider(openai_client=client)))
    made.tool_plain(tools.get_weather)
    made.tool_plain(tools.add)
    return made


async def run_stream(client: Any, tools: Tools) -> Any:
    async with agent(client, tools).run_stream(QUESTION) as result:
        return await result.get_output()


async def run_stream_events(client: Any, tools: Tools) -> Any:
    output = None
    async with agent(client, tools).run_stream_events(QUESTION) as events:
        async for event in events:
            if type(event).__name__ == "AgentRunResultEvent":
                output = event.result.output  # type: ignore[union-attr]
    return output


RUNS = {"run_stream": run_stream, "run_stream_events": run_stream_events}


async def converse(server: LocalServer, how: str, folder: Path | None) -> Conversation:
    sent = enqueue_conversation(server)
    tools = Tools()
    client = server.async_client() if folder is None else ts.wrap(server.async_client(), record=folder)
    output = await RUNS[how](client, tools)
    return Conversation(server.requests[sent:], tools.runs, output, folder)


@pytest.mark.parametrize("how", sorted(RUNS))
async def test_the_conversation_is_the_same_and_every_stream_stitched(
    server: LocalServer, tmp_path: Path, how: str
) -> None:
    plain = await converse(server, how, None)
    wrapped = await converse(server, how, tmp_path)
    assert plain.output == "It is sunny in Paris."
    assert_same_and_stitched(plain, wrapped)


@pytest.mark.parametrize("case", sorted(UNSAFE))
@pytest.mark.parametrize("how", sorted(RUNS))
async def test_guarded_an_unsafe_stream_runs_nothing_and_fails_the_run(
    server: LocalServer, how: str, case: str
) -> None:
    sent = len(server.requests)
    server.enqueue(StreamScript(UNSAFE[case]))
    tools = Tools()
    with pytest.raises(Exception) as caught:
        await RUNS[how](ts.wrap(server.async_client(), guard=True), tools)
    assert type(caught.value).__name__ == "ModelAPIError"  # pydantic-ai's own error for an APIError
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
        server.enqueue(StreamScript(CALL), StreamScript(structured_call("final_result")))
        tools = Tools()
        client = server.async_client() if folder is None else ts.wrap(server.async_client(), record=folder)
        made = Agent(
            OpenAIChatModel(MODEL, provider=OpenAIProvider(openai_client=client)), output_type=Weather
        )
        made.tool_plain(tools.get_weather)
        async with made.run_stream(QUESTION) as result:
            output = await result.get_output()
        runs.append(Conversation(server.requests[sent:], tools.runs, output, folder))
    assert runs[0].output == Weather(**STRUCTURED)
    calls = [("get_weather", "ready", {"city": "Paris"}), ("final_result", "ready", STRUCTURED)]
    assert_same_and_stitched(*runs, calls=calls)
