"""Typed user code of toolstitch's own API, as ``mypy --strict`` and pyright must accept it
(tests/test_typing.py). Each function is also run against the local server there, so the code is
real, not only well typed."""

from __future__ import annotations

import openai
from openai.types.chat import ChatCompletionMessageParam
from openai.types.responses import FunctionToolParam, ResponseInputParam

import toolstitch as ts


@ts.tool(read_only=True)
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


@ts.tool
async def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def direct_calls() -> str:
    """A decorated function keeps its signature."""
    text: str = get_weather("Paris")
    return text


async def direct_async_call() -> int:
    total: int = await add(2, 3)
    return total


def turn(
    client: openai.OpenAI, messages: list[ChatCompletionMessageParam]
) -> list[ChatCompletionMessageParam]:
    """One turn by hand: stream, stitch, answer, extend the SDK-typed history."""
    wrapped = ts.wrap(client)
    stream = wrapped.chat.completions.create(
        model="gpt-4o", messages=messages, tools=[get_weather.definition()], stream=True
    )
    for _chunk in stream:
        pass
    messages.append(ts.assistant_message(stream.get_final_completion()))
    for call in stream.tool_calls:
        if call.ready:
            messages.append(ts.tool_message(call, get_weather(**call.parsed)))
        else:
            messages.append(ts.tool_message(call, error=ts.call_error_text(call)))
    return messages


def turn_with_results(client: openai.OpenAI, messages: list[ChatCompletionMessageParam]) -> None:
    box = ts.Toolbox([get_weather])
    wrapped = ts.wrap(client)
    stream = wrapped.chat.completions.create(
        model="gpt-4o", messages=messages, tools=box.definitions(), stream=True
    )
    completion = stream.get_final_completion()
    messages.append(ts.assistant_message(completion))
    messages.extend(ts.tool_messages(box.execute(stream.tool_calls)))


def responses_turn(client: openai.OpenAI, items: ResponseInputParam) -> ResponseInputParam:
    wrapped = ts.wrap(client)
    weather: FunctionToolParam = {
        "type": "function",
        "name": "get_weather",
        "parameters": get_weather.parameters,
        "strict": False,
    }
    stream = wrapped.responses.create(model="gpt-4o", input=items, tools=[weather], stream=True)
    text = ""
    for event in stream:
        if event.type == "response.output_text.delta":
            text += event.delta
    items.extend(ts.response_items(stream.get_final_response()))
    items.extend(ts.function_call_outputs((call, get_weather(**call.parsed)) for call in stream.tool_calls))
    return items


def run_chat(client: openai.OpenAI) -> list[ChatCompletionMessageParam]:
    history: list[ChatCompletionMessageParam] = [{"role": "user", "content": "weather in Paris?"}]
    result = ts.run(
        client,
        model="gpt-4o",
        messages=history,
        toolbox=ts.Toolbox([get_weather]),
        max_steps=3,
        temperature=0,
    )
    again = ts.run(client, model="gpt-4o", messages=result.messages, toolbox=[get_weather], eager=False)
    return again.messages


def run_responses(client: openai.OpenAI) -> ResponseInputParam:
    result = ts.run(
        client, api="responses", model="gpt-4o", input="weather?", toolbox=[get_weather], store=False
    )
    return result.input


async def arun_chat(client: openai.AsyncOpenAI) -> str | None:
    result = await ts.arun(
        client,
        model="gpt-4o",
        messages=[{"role": "user", "content": "hi"}],
        toolbox=[get_weather],
        max_steps=2,
    )
    return result.output_text


def events(client: openai.OpenAI) -> int:
    count = 0
    for _event in ts.run_events(
        client, model="gpt-4o", messages=[{"role": "user", "content": "hi"}], toolbox=[get_weather]
    ):
        count += 1
    return count


async def aevents(client: openai.AsyncOpenAI) -> int:
    count = 0
    async for _event in ts.arun_events(
        client, api="responses", model="gpt-4o", input="hi", toolbox=[get_weather], max_steps=2
    ):
        count += 1
    return count


def websocket_turn(client: openai.OpenAI, tools: list[FunctionToolParam]) -> list[ts.ToolCall]:
    """The low-level WebSocket path: ``connection.create`` gives one response's stitched stream."""
    with ts.wrap(client).responses.connect() as connection:
        stream: ts.StitchedResponseStream = connection.create(model="gpt-5", input="hi", tools=tools)
        stream.get_final_response()
        return stream.tool_calls


async def awebsocket_turn(client: openai.AsyncOpenAI) -> list[ts.ToolCall]:
    async with ts.wrap(client).responses.connect() as connection:
        stream: ts.AsyncStitchedResponseStream = await connection.create(model="gpt-5", input="hi")
        await stream.get_final_response()
        return stream.tool_calls


def run_over_websocket(client: openai.OpenAI) -> str | None:
    result = ts.run(
        client, api="responses", model="gpt-5", input="hi", toolbox=[get_weather], transport="websocket"
    )
    return result.output_text
