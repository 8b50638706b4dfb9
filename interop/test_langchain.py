"""langchain-openai: ``ChatOpenAI(root_client=wrapped, client=wrapped.chat.completions, ...)`` (and
the async twins), ``bind_tools(...).stream()`` / ``.astream()`` in a tool loop written as the
langchain docs write it, and ``with_structured_output(...).stream()`` (its JSON-schema method reads
through the SDK's ``chat.completions.stream`` helper), plain and wrapped; guarded, an unsafe stream
runs no tool and ``UnsafeToolCallError`` itself comes out of ``stream()``. LangChain's own agent
(``langchain.agents.create_agent``, streamed with ``stream_mode="messages"``) over the same model,
plain and wrapped, and guarded."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessageChunk, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import StructuredTool
from langchain_openai import ChatOpenAI
from pydantic import BaseModel

import toolstitch as ts
from conftest import (
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
    structured_call,
)
from toolstitch.errors import UnsafeToolCallError
from toolstitch.testing import LocalServer, StreamScript


def chat_model(sync: Any, asynchronous: Any) -> Any:
    return ChatOpenAI(
        model=MODEL,
        api_key="test",
        root_client=sync,
        client=sync.chat.completions,
        root_async_client=asynchronous,
        async_client=asynchronous.chat.completions,
    )


def tool_list(tools: Tools) -> list[Any]:
    return [StructuredTool.from_function(tools.get_weather), StructuredTool.from_function(tools.add)]


def model(sync: Any, asynchronous: Any, tools: Tools) -> Any:
    return chat_model(sync, asynchronous).bind_tools(tool_list(tools))


def agent_run(sync: Any, asynchronous: Any, tools: Tools) -> str:
    """``create_agent`` streamed as its docs stream it: ``stream_mode="messages"``, the answer's text."""
    agent = create_agent(chat_model(sync, asynchronous), tools=tool_list(tools))
    answer = ""
    for message, _metadata in agent.stream({"messages": [HumanMessage(QUESTION)]}, stream_mode="messages"):
        if isinstance(message, AIMessageChunk):
            answer += message.text
    return answer


def loop(llm: Any, tools: Tools) -> Any:
    messages: list[BaseMessage] = [HumanMessage(QUESTION)]
    while True:
        message = None
        for piece in llm.stream(messages):
            message = piece if message is None else message + piece
        messages.append(message)
        if not message.tool_calls:
            return message.content
        for call in message.tool_calls:
            messages.append(ToolMessage(str(tools.run(call["name"], call["args"])), tool_call_id=call["id"]))


async def aloop(llm: Any, tools: Tools) -> Any:
    messages: list[BaseMessage] = [HumanMessage(QUESTION)]
    while True:
        message = None
        async for piece in llm.astream(messages):
            message = piece if message is None else message + piece
        messages.append(message)
        if not message.tool_calls:
            return message.content
        for call in message.tool_calls:
            messages.append(ToolMessage(str(tools.run(call["name"], call["args"])), tool_call_id=call["id"]))


def clients(server: LocalServer, **options: Any) -> tuple[Any, Any]:
    if not options:
        return server.client(), server.async_client()
    return ts.wrap(server.client(), **options), ts.wrap(server.async_client(), **options)


def test_the_conversation_is_the_same_and_every_stream_stitched(server: LocalServer, tmp_path: Path) -> None:
    runs = []
    for folder in (None, tmp_path):
        sent = enqueue_conversation(server)
        tools = Tools()
        options = {} if folder is None else {"record": folder}
        output = loop(model(*clients(server, **options), tools), tools)
        runs.append(Conversation(server.requests[sent:], tools.runs, output, folder))
    assert runs[0].output == "It is sunny in Paris."
    assert_same_and_stitched(*runs)


async def test_the_async_conversation_is_the_same_and_every_stream_stitched(
    server: LocalServer, tmp_path: Path
) -> None:
    runs = []
    for folder in (None, tmp_path):
        sent = enqueue_conversation(server)
        tools = Tools()
        options = {} if folder is None else {"record": folder}
        output = await aloop(model(*clients(server, **options), tools), tools)
        runs.append(Conversation(server.requests[sent:], tools.runs, output, folder))
    assert_same_and_stitched(*runs)


@pytest.mark.parametrize("case", sorted(UNSAFE))
def test_guarded_an_unsafe_stream_runs_nothing_and_fails_the_loop(server: LocalServer, case: str) -> None:
    sent = len(server.requests)
    server.enqueue(StreamScript(UNSAFE[case]))
    tools = Tools()
    with pytest.raises(UnsafeToolCallError) as caught:
        loop(model(*clients(server, guard=True), tools), tools)
    assert_refused(caught.value, case, tools, server, sent)


@pytest.mark.parametrize("case", sorted(UNSAFE))
async def test_guarded_an_unsafe_async_stream_runs_nothing(server: LocalServer, case: str) -> None:
    sent = len(server.requests)
    server.enqueue(StreamScript(UNSAFE[case]))
    tools = Tools()
    with pytest.raises(UnsafeToolCallError) as caught:
        await aloop(model(*clients(server, guard=True), tools), tools)
    assert_refused(caught.value, case, tools, server, sent)


class Weather(BaseModel):
    city: str
    sky: str


@pytest.mark.parametrize("method", ["json_schema", "function_calling"])
def test_structured_output_is_the_same_and_every_stream_stitched(
    server: LocalServer, tmp_path: Path, method: str
) -> None:
    runs = []
    for folder in (None, tmp_path):
        sent = len(server.requests)
        server.enqueue(
            StreamScript(STRUCTURED_TEXT if method == "json_schema" else structured_call("Weather"))
        )
        sync, asynchronous = clients(server) if folder is None else clients(server, record=folder)
        llm = ChatOpenAI(
            model=MODEL,
            api_key="test",
            root_client=sync,
            client=sync.chat.completions,
            root_async_client=asynchronous,
            async_client=asynchronous.chat.completions,
        )
        with warnings.catch_warnings():  # langchain's own, with or without toolstitch
            warnings.filterwarnings("ignore", "Pydantic serializer warnings", UserWarning)
            output = list(llm.with_structured_output(Weather, method=method).stream(QUESTION))
        runs.append(Conversation(server.requests[sent:], [], output[-1], folder))
    assert runs[0].output == Weather(**STRUCTURED)
    calls = [] if method == "json_schema" else [("Weather", "ready", STRUCTURED)]
    assert_same_and_stitched(*runs, runs=[], calls=calls)


def test_create_agent_makes_the_same_conversation_and_every_stream_is_stitched(
    server: LocalServer, tmp_path: Path
) -> None:
    runs = []
    for folder in (None, tmp_path):
        sent = enqueue_conversation(server)
        tools = Tools()
        options = {} if folder is None else {"record": folder}
        output = agent_run(*clients(server, **options), tools)
        runs.append(Conversation(server.requests[sent:], tools.runs, output, folder))
    assert runs[0].output == "It is sunny in Paris."
    assert all(r.get("stream") is True for r in runs[0].requests)
    assert_same_and_stitched(*runs)


@pytest.mark.parametrize("case", sorted(UNSAFE))
def test_create_agent_guarded_runs_nothing_on_an_unsafe_stream(server: LocalServer, case: str) -> None:
    sent = len(server.requests)
    server.enqueue(StreamScript(UNSAFE[case]))
    tools = Tools()
    with pytest.raises(UnsafeToolCallError) as caught:
        agent_run(*clients(server, guard=True), tools)
    assert_refused(caught.value, case, tools, server, sent)
