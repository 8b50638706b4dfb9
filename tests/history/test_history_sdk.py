"""Built histories through the real ``openai`` client, over real HTTP, to the local test server.

The server's ``check_history=True`` check of H01-H04 is written independently of
``validate_history``, so these tests hold the two against each other: what the validator predicts
must be what the server answers, word for word where the validator quotes it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import openai
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from openai.types.chat import ChatCompletion

from tests.conftest import WEATHER_TOOLS as TOOLS
from tests.conftest import examples
from toolstitch.client._wrap import wrap
from toolstitch.errors import CallNotReadyError
from toolstitch.history import (
    assistant_message,
    call_error_text,
    repair_history,
    tool_message,
    tool_messages,
    validate_history,
)
from toolstitch.testing import JSONReply, LocalServer, StreamScript, tool_call_chunks

ARGS_PARIS = '{"city": "Paris", "unit":"C"}'  # the odd spacing must reach the server unchanged
ARGS_ROME = '{"city":"Rome"}'
CALLS = [("call_paris", "get_weather", ARGS_PARIS), ("call_rome", "get_weather", ARGS_ROME)]
USER = {"role": "user", "content": "Weather in Paris and Rome?"}
ANSWER = {
    "id": "chatcmpl-2",
    "object": "chat.completion",
    "created": 1700000000,
    "model": "test-model",
    "choices": [
        {
            "index": 0,
            "finish_reason": "stop",
            "message": {"role": "assistant", "content": "Paris 18C, Rome 21C."},
        }
    ],
}


@pytest.fixture
def server() -> Iterator[LocalServer]:
    with LocalServer(check_history=True, handler=lambda body: JSONReply(ANSWER)) as s:
        yield s


def send(server: LocalServer, messages: list[Any]) -> ChatCompletion:
    return server.client().chat.completions.create(model="test-model", messages=messages, tools=TOOLS)


def first_turn(server: LocalServer) -> tuple[ChatCompletion, list[Any]]:
    """A real ``ChatCompletion`` with two tool calls, and the history built from it."""
    server.enqueue(StreamScript(tool_call_chunks(CALLS)))
    completion = send(server, [USER])
    calls = completion.choices[0].message.tool_calls
    assert calls is not None
    results = tool_messages([(calls[0], {"temp": 18}), (calls[1], "21C")])
    return completion, [USER, assistant_message(completion), *results]


def test_a_built_history_is_accepted(server: LocalServer) -> None:
    completion, history = first_turn(server)
    assert history[1] == assistant_message(completion.choices[0].message)
    assert validate_history(history) == []

    reply = send(server, history)

    assert reply.choices[0].message.content == "Paris 18C, Rome 21C."
    sent = server.requests[-1]["messages"]
    assert sent == history
    assert [c["function"]["arguments"] for c in sent[1]["tool_calls"]] == [ARGS_PARIS, ARGS_ROME]
    assert [m["tool_call_id"] for m in sent[2:]] == ["call_paris", "call_rome"]


def test_a_streamed_turn_with_an_invalid_call_is_answered_and_accepted(
    server: LocalServer,
) -> None:
    broken = [*CALLS[:1], ("call_bad", "get_weather", '{"city": "Ro')]
    server.enqueue(StreamScript(tool_call_chunks(broken, pieces=4)))
    client = wrap(server.client())
    with client.chat.completions.create(
        model="test-model", messages=[USER], tools=TOOLS, stream=True
    ) as stream:
        for _ in stream:
            pass
    good, bad = stream.tool_calls
    assert (good.status, bad.status) == ("ready", "invalid")
    with pytest.raises(CallNotReadyError):
        tool_message(bad, "never ran")

    history = [
        USER,
        assistant_message(stream),
        tool_message(good, {"temp": 18}),
        tool_message(bad, error=call_error_text(bad)),
    ]
    assert history[1]["tool_calls"][1]["function"]["arguments"] == '{"city": "Ro'
    assert validate_history(history) == []
    send(server, history)  # accepted
    assert "it was not run" in server.requests[-1]["messages"][3]["content"]


def _break(history: list[Any], how: str) -> list[Any]:
    user, assistant, paris, rome = history
    return {
        "missing-result": [user, assistant, paris, {"role": "user", "content": "and?"}],
        "trailing-calls": [user, assistant],
        "orphan-tool-message": [paris, user, assistant, paris, rome],
        "interleaved-user": [user, assistant, paris, {"role": "user", "content": "?"}, rome],
        "undeclared-id": [user, assistant, paris, rome, {**rome, "tool_call_id": "call_x"}],
        "no-tool-call-id": [user, assistant, paris, {"role": "tool", "content": "21C"}],
    }[how]


@pytest.mark.parametrize(
    ("how", "rule"),
    [
        ("missing-result", "H03"),
        ("trailing-calls", "H03"),
        ("orphan-tool-message", "H01"),
        ("interleaved-user", "H04"),
        ("undeclared-id", "H02"),
        ("no-tool-call-id", "H07"),
    ],
)
def test_the_validator_predicts_the_servers_400(server: LocalServer, how: str, rule: str) -> None:
    _, history = first_turn(server)
    broken = _break(history, how)

    problems = [p for p in validate_history(broken) if p.rule == rule]
    assert problems and problems[0].severity == "error"
    with pytest.raises(openai.BadRequestError) as info:
        send(server, broken)
    assert isinstance(info.value.body, dict)
    assert problems[0].server_error == info.value.body["message"]

    fixed, report = repair_history(broken)
    assert report.ok and report.changed
    send(server, fixed)  # the repaired history is accepted


@st.composite
def random_histories(draw: st.DrawFn) -> list[Any]:
    """Histories of plain-shaped messages in a random order, with ids from a small pool so that
    results sometimes match, sometimes not."""
    pool = ["call_a", "call_b", "call_c"]
    messages: list[Any] = [USER]
    for _ in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(["user", "assistant", "calls", "tool", "tool"]))
        if kind == "user":
            messages.append({"role": "user", "content": "more"})
        elif kind == "assistant":
            messages.append({"role": "assistant", "content": "ok"})
        elif kind == "calls":
            ids = draw(st.lists(st.sampled_from(pool), min_size=1, max_size=3, unique=True))
            calls = [{"id": i, "type": "function", "function": {"name": "f", "arguments": "{}"}} for i in ids]
            messages.append({"role": "assistant", "content": None, "tool_calls": calls})
        else:
            messages.append({"role": "tool", "tool_call_id": draw(st.sampled_from(pool)), "content": "r"})
    return messages


PAIRING = {"H01", "H02", "H03", "H04", "H07"}  # the rules the test server checks


@settings(
    max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(history=random_histories())
def test_validator_and_server_agree_on_random_histories(server: LocalServer, history: list[Any]) -> None:
    predicted = [p for p in validate_history(history) if p.rule in PAIRING]
    try:
        send(server, history)
    except openai.BadRequestError as exc:
        assert isinstance(exc.body, dict)
        assert exc.body["message"] in {p.server_error for p in predicted}, json.dumps(history)
    else:
        assert predicted == [], json.dumps(history)
