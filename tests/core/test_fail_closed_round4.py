"""Fail closed, round 4 (issue 42), the reader's share: what a call's type, shape, id and refusal say.

* A Chat Completions call of a custom tool is read as the API defines it (``type: "custom"`` with
  ``custom: {name, input}``), streamed or not, and held to the tool's format; a call whose wire
  shape disagrees with its type is refused, whatever the API, cut wherever the stream cuts it, read
  from dicts or from the SDK's own objects (the reader's short path included).
* A refused call keeps the id the server sent (a Responses ``call_id`` over
  ``Limits.max_id_chars`` too), so the history can answer it.
* Every call refused at its seal records one anomaly whose code is its error's code; a call to a
  tool offered as the other kind is refused as ``UnknownTool`` even when its text does not parse.
"""

from __future__ import annotations

import importlib.util
import itertools
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from openai._models import construct_type
from openai.types.chat import ChatCompletionChunk

import toolstitch as ts
from toolstitch.testing import chunk, response_events

RESPONSES = importlib.util.find_spec("openai.types.responses") is not None
LONE = "\udc00"

SELECT = {"type": "grammar", "syntax": "regex", "definition": r"SELECT [a-z_, ]+ FROM [a-z_]+;"}
QUERY = {"type": "custom", "custom": {"name": "query", "description": "One SELECT.", "format": SELECT}}
NOTE = {"type": "custom", "custom": {"name": "note"}}
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}
TOOLS = [QUERY, NOTE, WEATHER]


def stream(entries: list[dict[str, Any]], *, sdk: bool = False) -> list[Any]:
    """A chat stream of one tool-call entry per chunk, finished; as dicts or as the SDK's chunks."""
    chunks = [chunk(delta={"role": "assistant"})]
    chunks += [chunk(delta={"tool_calls": [e]}) for e in entries]
    chunks.append(chunk(delta={}, finish_reason="tool_calls"))
    # As the SDK builds them from the wire (no validation: a ``type`` its annotation does not list
    # is kept, and ``custom`` is an extra field).
    return [construct_type(type_=ChatCompletionChunk, value=c) for c in chunks] if sdk else chunks


def stitched(entries: list[dict[str, Any]], *, sdk: bool = False, tools: Any = TOOLS) -> Any:
    s = ts.stitch(stream(entries, sdk=sdk), tools=tools)
    s.until_done()
    return s


def custom_entries(call_id: str, name: str, text: str, cuts: list[int]) -> list[dict[str, Any]]:
    """A custom call as the API streams it: a header with the name, then the input in pieces."""
    bounds = [0, *sorted(set(cuts)), len(text)]
    pieces = [text[a:b] for a, b in itertools.pairwise(bounds) if a < b]
    head = {"index": 0, "id": call_id, "type": "custom", "custom": {"name": name, "input": ""}}
    return [head, *({"index": 0, "custom": {"input": p}} for p in pieces)]


# -- a chat custom call, read as the API defines it ------------------------------------------------


@pytest.mark.parametrize("sdk", [False, True], ids=["dicts", "sdk-objects"])
@pytest.mark.parametrize(
    ("text", "status", "error"),
    [
        ("SELECT id, name FROM users;", "ready", None),
        ("DROP TABLE users;", "invalid", "SchemaViolation"),
        ("SELECT a FROM b; DROP TABLE b;", "invalid", "SchemaViolation"),
    ],
)
def test_a_chat_custom_call_is_held_to_its_tools_format(
    sdk: bool, text: str, status: str, error: Any
) -> None:
    s = stitched(custom_entries("c1", "query", text, [3, 9, 15]), sdk=sdk)
    [call] = s.tool_calls
    assert (call.type, call.name, call.id, call.arguments, call.status) == (
        "custom",
        "query",
        "c1",
        text,
        status,
    )
    assert type(call.error).__name__ == (error or "NoneType")
    if status == "ready":
        assert call.parsed == text  # the input is the text itself, never JSON
    # ``exclude_none``: a release without the SDK's custom-call type (the floor) builds the call as
    # its function-call class, whose ``function`` is then None.
    [tool_call] = s.get_final_completion().model_dump(exclude_none=True)["choices"][0]["message"][
        "tool_calls"
    ]
    assert tool_call == {"id": "c1", "type": "custom", "custom": {"name": "query", "input": text}}


@settings(max_examples=60, deadline=None)
@given(
    text=st.text(st.characters(codec="utf-8"), max_size=40),
    cuts=st.lists(st.integers(0, 40), max_size=8),
    sdk=st.booleans(),
)
def test_a_custom_input_is_kept_exactly_however_it_is_cut(text: str, cuts: list[int], sdk: bool) -> None:
    """Text, not JSON: no cumulative-resend or further-value reading may change it (``{`` included)."""
    text = "{" + text + "}{" + text
    s = stitched(custom_entries("c1", "note", text, [c % (len(text) + 1) for c in cuts]), sdk=sdk)
    [call] = s.tool_calls
    assert (call.type, call.arguments, call.status) == ("custom", text, "ready")


@pytest.mark.parametrize(
    ("entries", "why"),
    [
        (
            [
                {
                    "index": 0,
                    "id": "c1",
                    "type": "custom",
                    "function": {"name": "note", "arguments": "rm -rf /"},
                }
            ],
            "yet it carries function arguments",
        ),
        (
            [{"index": 0, "id": "c1", "type": "function", "custom": {"name": "note", "input": "x"}}],
            "yet it carries a custom tool's input",
        ),
        (
            [
                {
                    "index": 0,
                    "id": "c1",
                    "type": "custom",
                    "custom": {"name": "note", "input": "a"},
                    "function": {"name": "note", "arguments": "b"},
                }
            ],
            "both",
        ),
        (
            [
                {"index": 0, "id": "c1", "type": "custom", "custom": {"name": "note", "input": "a"}},
                {"index": 0, "function": {"arguments": "b"}},
            ],
            "yet it carries function arguments",
        ),
        (
            [
                {"index": 0, "id": "c1", "type": "custom"},
                {"index": 0, "function": {"name": "note", "arguments": "b"}},
            ],
            "yet it carries function arguments",
        ),
        (
            [
                {
                    "index": 0,
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": "{"},
                },
                {"index": 0, "custom": {"input": '"city": "Rome"}'}},
            ],
            "yet it carries a custom tool's input",
        ),
        (
            [
                {"index": 0, "id": "c1", "type": "custom", "custom": {"name": "note", "input": "a"}},
                {"index": 0, "type": "function"},
            ],
            "its type changed",
        ),
        (
            [{"index": 0, "id": "c1", "type": "custom", "custom": {"name": "note", "input": {"a": 1}}}],
            "not text",
        ),
        ([{"index": 0, "id": "c1", "type": "custom", "custom": "note"}], "not an object"),
    ],
    ids=[
        "custom-type-function-shape",
        "function-type-custom-shape",
        "both-parts",
        "function-continuation-of-custom",
        "function-body-after-custom-header",
        "custom-continuation-of-function",
        "type-changes",
        "input-not-text",
        "custom-not-an-object",
    ],
)
@pytest.mark.parametrize("sdk", [False, True], ids=["dicts", "sdk-objects"])
def test_a_call_whose_shape_disagrees_with_its_type_is_refused(
    entries: list[dict[str, Any]], why: str, sdk: bool
) -> None:
    s = stitched(entries, sdk=sdk)
    [call] = s.tool_calls
    assert call.status == "invalid" and isinstance(call.error, ts.errors.MalformedArguments)
    assert why in call.error.message
    assert call.anomalies and call.error.code in {a.code for a in call.anomalies}


def test_the_short_path_for_sdk_chunks_never_appends_to_a_custom_call() -> None:
    """A plain SDK continuation (``function.arguments`` only) for a call opened as custom takes the
    long way, where its shape is checked (the hot path would have appended it as text)."""
    head = {"index": 0, "id": "c1", "type": "custom", "custom": {"name": "note", "input": "take "}}
    rest = [{"index": 0, "function": {"arguments": p}} for p in ("a ", "note")]
    s = stitched([head, *rest], sdk=True)
    [call] = s.tool_calls
    assert call.status == "invalid" and call.arguments == "take a note"


def test_a_function_call_beside_a_custom_call_is_still_read_as_before() -> None:
    entries = [
        *custom_entries("c1", "note", "remember milk", [4]),
        {"index": 1, "id": "c2", "type": "function", "function": {"name": "get_weather", "arguments": ""}},
        {"index": 1, "function": {"arguments": '{"city": '}},
        {"index": 1, "function": {"arguments": '"Rome"}'}},
    ]
    for sdk in (False, True):
        s = stitched(entries, sdk=sdk)
        assert [(c.type, c.name, c.status, c.parsed) for c in s.tool_calls] == [
            ("custom", "note", "ready", "remember milk"),
            ("function", "get_weather", "ready", {"city": "Rome"}),
        ]


def _completion(tool_calls: list[dict[str, Any]]) -> dict[str, Any]:
    message = {"role": "assistant", "content": None, "tool_calls": tool_calls}
    choice = {"index": 0, "finish_reason": "tool_calls", "message": message, "logprobs": None}
    return {"id": "x", "object": "chat.completion", "created": 1, "model": "m", "choices": [choice]}


@pytest.mark.parametrize(
    ("tool_call", "status"),
    [
        ({"id": "c1", "type": "custom", "custom": {"name": "query", "input": "SELECT a FROM b;"}}, "ready"),
        ({"id": "c1", "type": "custom", "custom": {"name": "query", "input": "DROP TABLE b;"}}, "invalid"),
        (
            {"id": "c1", "type": "custom", "function": {"name": "query", "arguments": "SELECT a FROM b;"}},
            "invalid",
        ),
        (
            {"id": "c1", "type": "function", "function": {"name": "query", "arguments": "SELECT a FROM b;"}},
            "invalid",
        ),
    ],
)
def test_calls_of_a_finished_message_holds_custom_calls_to_the_same_rules(
    tool_call: dict, status: str
) -> None:
    [call] = ts.calls_of(_completion([tool_call]), tools=TOOLS)
    assert call.status == status
    ran: list[str] = []

    @ts.tool(format=SELECT)
    def query(sql: str) -> str:
        """One SELECT."""
        ran.append(sql)
        return "rows"

    with ts.Toolbox([query]) as box:
        [call] = ts.calls_of(_completion([tool_call]), tools=box.definitions())
        [result] = box.execute([call])
    assert result.ok is (status == "ready")
    assert ran == (["SELECT a FROM b;"] if status == "ready" else [])


@pytest.mark.skipif(
    importlib.util.find_spec("openai.types.chat.chat_completion_message_custom_tool_call") is None,
    reason="this openai release has no ChatCompletionMessageCustomToolCall",
)
def test_calls_of_reads_the_sdks_own_custom_tool_call() -> None:
    from openai.types.chat import ChatCompletion

    completion = ChatCompletion.model_validate(
        _completion(
            [{"id": "c1", "type": "custom", "custom": {"name": "query", "input": "SELECT a FROM b;"}}]
        )
    )
    [call] = ts.calls_of(completion, tools=TOOLS)
    assert (call.type, call.name, call.arguments, call.status) == (
        "custom",
        "query",
        "SELECT a FROM b;",
        "ready",
    )


# -- a refused call keeps the id the server sent ----------------------------------------------------


def test_a_chat_call_refused_for_its_long_id_keeps_that_id() -> None:
    long = "call_" + "x" * ts.Limits().max_id_chars
    head = {"index": 0, "id": long, "type": "function", "function": {"name": "get_weather", "arguments": ""}}
    s = stitched([head, {"index": 0, "function": {"arguments": '{"city": "Rome"}'}}])
    [call] = s.tool_calls
    assert call.status == "invalid" and isinstance(call.error, ts.errors.LimitExceeded)
    assert call.id == long


@pytest.mark.skipif(not RESPONSES, reason="this openai release has no Responses API")
def test_a_responses_call_refused_for_its_long_id_keeps_that_id() -> None:
    long = "call_" + "x" * (ts.Limits().max_id_chars - 4)  # one character over the bound
    acc = ts.ResponseAccumulator([WEATHER])
    for event in response_events([(long, "get_weather", '{"city": "Rome"}')]):
        acc.feed(event)
    acc.end()
    [call] = acc.tool_calls
    assert call.status == "invalid" and isinstance(call.error, ts.errors.LimitExceeded)
    assert call.id == long == acc.get_final_response().output[0].call_id


def test_an_id_the_stream_budget_cannot_hold_is_kept_as_a_bounded_prefix() -> None:
    """Memory stays bounded: past ``max_stream_bytes`` the refused call keeps 64 characters."""
    limits = ts.Limits(max_stream_bytes=1000, max_id_chars=100)
    long = "call_" + "y" * 5000
    head = {
        "index": 0,
        "id": long,
        "type": "function",
        "function": {"name": "get_weather", "arguments": "{}"},
    }
    s = ts.stitch(stream([head]), tools=TOOLS, limits=limits)
    s.until_done()
    [call] = s.tool_calls
    assert call.status == "invalid" and call.id == long[:64]


# -- every refusal at seal is on the record, under its error's code --------------------------------


@pytest.mark.parametrize(
    ("name", "arguments", "error"),
    [
        ("delete_everything", '{"x": 1}', "UnknownTool"),
        ("delete_everything", "not json", "UnknownTool"),
        ("get_weather", '{"city": 3}', "SchemaViolation"),
        ("get_weather", '{"city": "Rome"', "MalformedArguments"),
        ("get_weather", "[1]", "ArgumentsNotAnObject"),
        ("get_weather", "", "EmptyArguments"),
        (
            "query",
            "SELECT a FROM b;",
            "UnknownTool",
        ),  # a function call to a custom tool: text that is no JSON
        ("query", '{"sql": "SELECT a FROM b;"}', "UnknownTool"),
    ],
)
def test_each_refused_call_records_one_anomaly_under_its_errors_code(
    name: str, arguments: str, error: str
) -> None:
    entries = [
        {"index": 0, "id": "c1", "type": "function", "function": {"name": name, "arguments": arguments}}
    ]
    s = stitched(entries)
    [call] = s.tool_calls
    assert call.status == "invalid" and type(call.error).__name__ == error
    refusals = [a for a in s.anomalies if a.code == call.error.code]
    assert len(refusals) == 1 and refusals[0].call_index == 0
    assert [a.code for a in call.anomalies].count(call.error.code) == 1


def test_a_contract_violation_is_recorded_once() -> None:
    entries = [
        {"index": 0, "id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}
    ]
    s = ts.stitch(stream(entries), tools=TOOLS, tool_choice="none")
    s.until_done()
    assert [a.code for a in s.anomalies].count("contract_violation") == 1


def test_a_ready_stream_records_no_refusal() -> None:
    entries = [
        {
            "index": 0,
            "id": "c1",
            "type": "function",
            "function": {"name": "get_weather", "arguments": '{"city": "X"}'},
        }
    ]
    s = stitched(entries)
    assert s.tool_calls[0].status == "ready" and s.anomalies == []


@pytest.mark.skipif(not RESPONSES, reason="this openai release has no Responses API")
def test_a_responses_function_call_to_a_custom_tool_is_an_unknown_tool_whatever_its_text() -> None:
    acc = ts.ResponseAccumulator([QUERY])
    for event in response_events([("c1", "query", "SELECT a FROM b;")]):
        acc.feed(event)
    acc.end()
    [call] = acc.tool_calls
    assert isinstance(call.error, ts.errors.UnknownTool) and "as a function" in call.error.message
    assert [a.code for a in acc.anomalies].count("unknown_tool") == 1


def test_a_chat_id_no_request_can_carry_gets_a_made_one() -> None:
    """An id holding a lone surrogate cannot be sent back: the message gets a made id (noted), so a
    history answers the call under one id on both sides; two such ids stay two."""
    entries = [
        {
            "index": i,
            "id": f"c{LONE}{i}",
            "type": "function",
            "function": {"name": "get_weather", "arguments": '{"city": "X"}'},
        }
        for i in range(2)
    ]
    s = stitched(entries)
    ids = [c.id for c in s.tool_calls]
    assert len(set(ids)) == 2 and all(i and i.startswith("call_ts") for i in ids)
    assert [a.code for a in s.anomalies].count("id_synthesized") == 2
    sent = [c["id"] for c in s.get_final_completion().model_dump()["choices"][0]["message"]["tool_calls"]]
    assert sent == ids
