"""Hostile replies through the real ``openai`` client over real HTTP, into the history builders."""

from __future__ import annotations

from typing import Any

import pytest

import toolstitch as ts
from toolstitch.errors import ChoiceNotFoundError
from toolstitch.history import assistant_message, validate_history
from toolstitch.testing import JSONReply, LocalServer, StreamScript, chunk

USER = {"role": "user", "content": "hi"}


def nested(depth: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for _ in range(depth - 1):
        out = {"a": out}
    return out


def test_a_stream_whose_only_choice_has_index_1(server: LocalServer) -> None:
    server.enqueue(
        StreamScript(
            [
                chunk(index=1, delta={"role": "assistant", "content": "from choice 1"}),
                chunk(index=1, delta={}, finish_reason="stop"),
            ]
        )
    )
    client = ts.wrap(server.client())
    with client.chat.completions.create(model="m", messages=[USER], stream=True) as stream:
        completion = stream.get_final_completion()
    with pytest.raises(ChoiceNotFoundError, match="no choice 0"):
        assistant_message(stream)
    assert assistant_message(completion, choice=1) == {"role": "assistant", "content": "from choice 1"}


def test_a_provider_field_nested_900_deep_round_trips(server: LocalServer) -> None:
    message = {"role": "assistant", "content": "ok", "reasoning": nested(900)}
    body = {
        "id": "c",
        "object": "chat.completion",
        "created": 0,
        "model": "m",
        "choices": [{"index": 0, "finish_reason": "stop", "message": message}],
    }
    server.enqueue(JSONReply(body))
    completion = server.client().chat.completions.create(model="m", messages=[USER])
    turn = assistant_message(completion)  # kept, whatever pydantic's serialisation depth
    history = [USER, turn, USER]
    assert [(p.rule, p.index) for p in validate_history(history)] == [("H90", 1)]
    server.enqueue(
        JSONReply({**body, "choices": [{**body["choices"][0], "message": USER | {"role": "assistant"}}]})
    )
    server.client().chat.completions.create(model="m", messages=history)  # the SDK can still send it
    assert server.requests[-1]["messages"][1]["reasoning"] == nested(900)
