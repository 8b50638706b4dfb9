"""A replay checks calls as the live stream did: same schemas, same options (regressions from review).

Each test pins one user-visible failure: it failed before the fix next to it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import toolstitch as ts
from toolstitch.recording._replay import replay
from toolstitch.testing import LocalServer, StreamScript, chunk, tool_call_chunks

LOGIN_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "login",
            "parameters": {
                "type": "object",
                "properties": {
                    "user": {"type": "string"},
                    "password": {"type": "string", "minLength": 8},
                },
                "required": ["user", "password"],
                "additionalProperties": False,
            },
        },
    }
]
WEATHER_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
        },
    }
]
MESSAGES = [{"role": "user", "content": "hi"}]


def facts(calls: list[ts.ToolCall]) -> list[tuple[Any, ...]]:
    return [(c.index, c.id, c.name, c.arguments, c.status, c.parsed) for c in calls]


def consume(stream: Any) -> None:
    with stream:
        for _ in stream:
            pass


def test_a_tool_parameter_named_like_a_credential_does_not_change_the_replayed_calls(
    server: LocalServer, tmp_path: Path
) -> None:
    """Masking credentials in the header must not rewrite the tools' schemas: a parameter called
    ``password`` is a name, not a secret, and the replay checks calls against that schema."""
    server.enqueue(
        StreamScript(tool_call_chunks([("call_1", "login", '{"user": "ann", "password": "short"}')]))
    )
    stream = ts.wrap(server.client(), record=tmp_path).chat.completions.create(
        model="m", messages=MESSAGES, tools=LOGIN_TOOLS, stream=True
    )
    consume(stream)
    assert stream.tool_calls[0].status == "invalid"  # "short" is under minLength 8

    replayed = replay(stream.recorder.path)
    assert replayed.request["tools"] == LOGIN_TOOLS
    assert facts(replayed.tool_calls) == facts(stream.tool_calls)


def test_calls_recovered_from_text_are_recovered_again_on_replay(server: LocalServer, tmp_path: Path) -> None:
    text = '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>'
    server.enqueue(
        StreamScript(
            [
                chunk(delta={"role": "assistant", "content": text}),
                chunk(delta={}, finish_reason="stop"),
            ]
        )
    )
    client = ts.wrap(server.client(), record=tmp_path, recover_text_tool_calls=True)
    stream = client.chat.completions.create(model="m", messages=MESSAGES, tools=WEATHER_TOOLS, stream=True)
    consume(stream)
    assert [(c.name, c.status) for c in stream.tool_calls] == [("get_weather", "ready")]

    replayed = replay(stream.recorder.path)
    assert facts(replayed.tool_calls) == facts(stream.tool_calls)
    assert replayed.get_final_completion() == stream.get_final_completion()
