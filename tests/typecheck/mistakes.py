"""Mistakes a type checker must catch on toolstitch's API (tests/test_typing.py): each line that
ends with ``# error`` must be reported by both ``mypy --strict`` and pyright, and no other line."""

from __future__ import annotations

import openai
from openai.types.chat import ChatCompletionMessageParam

import toolstitch as ts


@ts.tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return city


client = openai.OpenAI(api_key="sk-test")
history: list[ChatCompletionMessageParam] = [{"role": "user", "content": "hi"}]
box = ts.Toolbox([get_weather])

get_weather(42)  # error
number: int = get_weather("Paris")  # error
ts.run(client, model="gpt-4o", mesages=history, toolbox=box)  # error
ts.run(client, model="gpt-4o", messages=history, toolbox=box, max_step=3)  # error
ts.run(client, model="gpt-4o", messages=history, toolbox=box, eagr=False)  # error
ts.run(client, model="gpt-4o", messages=history, toolbox=box, temperature="hot")  # error
ts.run(client, model="gpt-4o", messages=history)  # error
ts.run(client, model="gpt-4o", messages=history, toolbox=box, api="responses")  # error
ts.run(openai.AsyncOpenAI(api_key="sk-test"), model="gpt-4o", messages=history, toolbox=box)  # error
ts.run_events(client, model="gpt-4o", messages=history, toolbox=box, on_event=print)  # error
ts.arun_events(client, model="gpt-4o", messages=history, toolbox=box)  # error
wrong: list[str] = ts.tool_messages([])  # error
history.append(ts.function_call_output({"call_id": "c", "type": "function_call"}, "x"))  # error
