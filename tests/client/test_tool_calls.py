"""``ts.calls_of(completion)``: a non-streamed completion gets the ``ToolCall`` view a stream gets.

The real SDK over real HTTP (``create()`` without ``stream=True``), sync and async; every way a call
fails; SDK objects and dicts; hostile completions (never an exception, never a ``ready`` call that
is not exact and valid); the completion itself never changed; the history built from it."""

from __future__ import annotations

import copy
import json
from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from openai.types.chat import ChatCompletion

import toolstitch as ts
from tests.conftest import WEATHER_TOOLS as TOOLS
from tests.conftest import examples, field_paths
from toolstitch.testing import JSONReply, LocalServer, StreamScript, tool_call_chunks

MESSAGES = [{"role": "user", "content": "Weather in Oslo and Rome?"}]


def completion(
    *calls: tuple[str, str, Any], finish: str | None = "tool_calls", **message: Any
) -> dict[str, Any]:
    """A ``chat.completion`` body with these ``(id, name, arguments)`` calls."""
    msg: dict[str, Any] = {"role": "assistant", "content": None, **message}
    if calls:
        msg["tool_calls"] = [
            {"id": i, "type": "function", "function": {"name": n, "arguments": a}} for i, n, a in calls
        ]
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": "test-model",
        "choices": [{"index": 0, "message": msg, "finish_reason": finish, "logprobs": None}],
    }


TWO = completion(("c1", "get_weather", '{"city": "Oslo"}'), ("c2", "get_weather", '{"city": "Rome"}'))


def test_a_non_streamed_completion_over_http_gets_ready_calls(server: LocalServer) -> None:
    server.enqueue(JSONReply(TWO))
    result = ts.wrap(server.client()).chat.completions.create(model="m", messages=MESSAGES, tools=TOOLS)
    assert type(result) is ChatCompletion  # the SDK's object, untouched
    calls = ts.calls_of(result, tools=TOOLS)
    assert [(c.index, c.id, c.name, c.status, c.parsed) for c in calls] == [
        (0, "c1", "get_weather", "ready", {"city": "Oslo"}),
        (1, "c2", "get_weather", "ready", {"city": "Rome"}),
    ]
    assert result.model_dump() == ChatCompletion.model_validate(TWO).model_dump()  # not changed


async def test_async_non_streamed_completion(server: LocalServer) -> None:
    server.enqueue(StreamScript(tool_call_chunks([("c1", "get_weather", '{"city": "Oslo"}')], pieces=3)))
    result = await ts.wrap(server.async_client()).chat.completions.create(
        model="m", messages=MESSAGES, tools=TOOLS
    )
    (call,) = ts.calls_of(result, tools=TOOLS)
    assert (call.status, call.parsed) == ("ready", {"city": "Oslo"})


def test_a_dict_completion_is_read_as_the_sdk_object_is() -> None:
    from_dict = ts.calls_of(TWO, tools=TOOLS)
    from_sdk = ts.calls_of(ChatCompletion.model_validate(TWO), tools=TOOLS)
    assert [(c.id, c.status, c.arguments) for c in from_dict] == [
        (c.id, c.status, c.arguments) for c in from_sdk
    ]


@pytest.mark.parametrize(
    ("arguments", "finish", "error"),
    [
        ('{"city": "Os', "length", ts.errors.CallIncomplete),  # truncated by max_tokens
        ('{"city": "Os', "tool_calls", ts.errors.MalformedArguments),
        ('{"town": "Oslo"}', "tool_calls", ts.errors.SchemaViolation),
        ("[1]", "tool_calls", ts.errors.ArgumentsNotAnObject),
        ("", "tool_calls", ts.errors.EmptyArguments),
        ('{"city": "Oslo"}', None, ts.errors.CallIncomplete),  # no finish_reason: never sealed
    ],
)
def test_every_way_a_non_streamed_call_fails(arguments: str, finish: str | None, error: type) -> None:
    (call,) = ts.calls_of(completion(("c1", "get_weather", arguments), finish=finish), tools=TOOLS)
    assert call.status in ("invalid", "incomplete")
    assert isinstance(call.error, error)
    assert call.arguments == arguments  # the raw text kept


def test_the_request_contract_holds() -> None:
    assert [c.status for c in ts.calls_of(TWO, tools=TOOLS, parallel_tool_calls=False)] == [
        "ready",
        "invalid",
    ]
    assert [c.status for c in ts.calls_of(TWO, tools=TOOLS, tool_choice="none")] == ["invalid", "invalid"]
    forced = {"type": "function", "function": {"name": "other"}}
    assert [c.status for c in ts.calls_of(TWO, tools=TOOLS, tool_choice=forced)] == ["invalid", "invalid"]
    unknown = ts.calls_of(completion(("c1", "delete_all", "{}")), tools=TOOLS)
    assert isinstance(unknown[0].error, ts.errors.UnknownTool)
    assert [c.status for c in ts.calls_of(TWO, tools=[])] == ["invalid", "invalid"]
    assert [c.status for c in ts.calls_of(TWO)] == ["ready", "ready"]  # tools not given: unchecked


def test_arguments_sent_as_an_object_are_repaired_and_recorded() -> None:
    (call,) = ts.calls_of(completion(("c1", "get_weather", {"city": "Oslo"})), tools=TOOLS)
    assert call.parsed == {"city": "Oslo"}
    assert call.anomalies  # the repair is visible


def test_choices_are_picked_by_index() -> None:
    body = copy.deepcopy(TWO)
    second = copy.deepcopy(body["choices"][0])
    second["index"] = 1
    second["message"]["tool_calls"] = second["message"]["tool_calls"][:1]
    body["choices"].append(second)
    assert len(ts.calls_of(body, tools=TOOLS)) == 2
    assert len(ts.calls_of(body, tools=TOOLS, choice=1)) == 1
    assert len(ts.calls_of(body, tools=TOOLS, choice=None)) == 3
    assert ts.calls_of(body, tools=TOOLS, choice=7) == []


def test_a_completion_without_calls_has_none() -> None:
    assert ts.calls_of(completion(finish="stop", content="Hello")) == []


def test_the_history_is_built_from_it_as_from_a_stream() -> None:
    body = completion(("c1", "get_weather", '{"city": "Oslo"}'), ("c2", "get_weather", '{"city": "Ro'))
    calls = ts.calls_of(body, tools=TOOLS)
    assert [c.status for c in calls] == ["ready", "invalid"]
    history: list[Any] = [{"role": "user", "content": "hi"}, ts.assistant_message(body)]
    history.append(ts.tool_message(calls[0], "sunny"))
    history.append(ts.tool_message(calls[1], error=ts.call_error_text(calls[1])))
    assert ts.validate_history(history) == []
    with pytest.raises(ts.errors.CallNotReadyError):
        ts.tool_message(calls[1], "ran anyway")


# ------------------------------------------------------------------------- hostile completions

HOSTILE: list[Any] = [
    None, "", 0, -1, 2**64, 1.5, float("nan"), True, [], {}, [None], {"": None}, "\ud83d", "x" * 100_000,
    '{"', "}", "null", {"name": "f", "arguments": "{}"}, ["{}"], object(), b"bytes",
]  # fmt: skip


SCHEMAS = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}


@settings(max_examples=examples(200), deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_hostile_completions_never_raise_and_never_make_a_wrong_call_ready(data: st.DataObject) -> None:
    body = copy.deepcopy(TWO)
    for _ in range(data.draw(st.integers(1, 4))):
        paths = field_paths(body)
        if not paths:
            break
        path = data.draw(st.sampled_from(paths))
        parent = body
        for step in path[:-1]:
            parent = parent[step]
        if data.draw(st.booleans()) and isinstance(parent, dict):
            del parent[path[-1]]
        else:
            parent[path[-1]] = copy.deepcopy(data.draw(st.sampled_from(HOSTILE)))
    before = repr(body)
    request = data.draw(st.sampled_from([{}, {"parallel_tool_calls": False}, {"tool_choice": "none"}]))
    calls = ts.calls_of(body, tools=TOOLS, choice=None, **request)
    assert repr(body) == before  # only read
    for call in calls:
        if call.status == "ready":
            assert call.name in SCHEMAS
            value = json.loads(call.arguments)
            jsonschema.validate(value, SCHEMAS[call.name])
            assert request.get("tool_choice") != "none"
        assert "internal_error" not in {a.code for a in call.anomalies}


@pytest.mark.parametrize("hostile", HOSTILE, ids=lambda v: type(v).__name__)
def test_a_completion_that_is_no_object_has_no_calls(hostile: Any) -> None:
    assert ts.calls_of(hostile, tools=TOOLS) == []


def test_a_constructed_sdk_object_with_wrong_types_never_raises() -> None:
    broken = ChatCompletion.construct(choices=[{"index": 0, "message": 5, "finish_reason": "tool_calls"}])
    assert ts.calls_of(broken, tools=TOOLS) == []
    half = ChatCompletion.construct(choices="choices")
    assert ts.calls_of(half, tools=TOOLS) == []
