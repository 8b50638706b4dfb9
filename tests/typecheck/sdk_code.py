"""Typed user code written against the plain ``openai`` SDK, as ``mypy --strict`` and pyright accept
it. tests/test_typing.py checks it twice: as it is, and with each client line marked ``# CLIENT``
replaced by the same client under ``ts.wrap(...)``. A wrapped client must type-check wherever the
plain one does."""

from __future__ import annotations

import openai
from openai import AsyncStream, Stream
from openai.types.chat import (
    ChatCompletion,
    ChatCompletionChunk,
    ChatCompletionMessageParam,
    ChatCompletionToolParam,
)
from openai.types.responses import Response, ResponseInputParam, ResponseStreamEvent

TOOLS: list[ChatCompletionToolParam] = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
]


# The clients are used below by name, so their inferred types (a wrapped one's included) are checked.
client = openai.OpenAI(api_key="sk-test", base_url="http://127.0.0.1:9/v1")  # CLIENT
aclient = openai.AsyncOpenAI(api_key="sk-test", base_url="http://127.0.0.1:9/v1")  # CLIENT


def chat_stream(messages: list[ChatCompletionMessageParam]) -> str:
    stream = client.chat.completions.create(model="gpt-4o", messages=messages, tools=TOOLS, stream=True)
    text = ""
    for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            text += chunk.choices[0].delta.content
    return text


def keep_stream(messages: list[ChatCompletionMessageParam]) -> Stream[ChatCompletionChunk]:
    return client.chat.completions.create(model="gpt-4o", messages=messages, stream=True)


def chat_plain(messages: list[ChatCompletionMessageParam]) -> ChatCompletion:
    completion = client.chat.completions.create(model="gpt-4o", messages=messages)
    messages.append({"role": "assistant", "content": completion.choices[0].message.content})
    return completion


def responses_stream(items: ResponseInputParam) -> str:
    text = ""
    for event in client.responses.create(model="gpt-4o", input=items, stream=True):
        if event.type == "response.output_text.delta":
            text += event.delta
    return text


def keep_responses() -> Stream[ResponseStreamEvent]:
    return client.responses.create(model="gpt-4o", input="hi", stream=True)


def responses_plain() -> Response:
    return client.responses.create(model="gpt-4o", input="hi")


def helper_stream(messages: list[ChatCompletionMessageParam]) -> ChatCompletion:
    with client.chat.completions.stream(model="gpt-4o", messages=messages) as stream:
        for event in stream:
            if event.type == "content.delta":
                print(event.delta)
        return stream.get_final_completion()


async def achat_stream(messages: list[ChatCompletionMessageParam]) -> str:
    stream = await aclient.chat.completions.create(model="gpt-4o", messages=messages, stream=True)
    text = ""
    async for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            text += chunk.choices[0].delta.content
    return text


async def akeep() -> AsyncStream[ResponseStreamEvent]:
    return await aclient.responses.create(model="gpt-4o", input="hi", stream=True)


async def aresponses_stream() -> str:
    text = ""
    async for event in await aclient.responses.create(model="gpt-4o", input="hi", stream=True):
        if event.type == "response.output_text.delta":
            text += event.delta
    return text
