"""What the model reads about a refused call: advice that fits the refusal, the same words from
``ts.call_error_text(call)`` (a user's own loop) and from ``ts.run`` (its gate), written once
(``history/_refusals.py``).

``call_error_text`` told the model "Send the call again with arguments that are one valid JSON
object" for every refused call: a tool that does not exist, a second call under
``parallel_tool_calls=False``, calls under ``tool_choice="none"``, a schema violation. Each kind now
gets its own advice, and for the same call ``ts.run``'s tool message is ``call_error_text(call)``.
"""

from __future__ import annotations

from typing import Any

import pytest

import toolstitch as ts
from tests.tools._support import calls_reply, text_reply
from toolstitch.errors import (
    CallIncomplete,
    ContractViolation,
    EmptyArguments,
    LimitExceeded,
    MalformedArguments,
    MissingName,
    SchemaViolation,
    UnknownTool,
)
from toolstitch.testing import LocalServer, StreamScript, chunk, tool_call_chunks


@ts.tool
def get_weather(city: str) -> str:
    """Current weather for a city."""
    return f"sunny in {city}"


@ts.tool(read_only=True)
def get_time(tz: str) -> str:
    """The time in a time zone."""
    return "12:00"


RAW = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}


@ts.tool(parameters=RAW, name="search")
def search(q: str) -> str:
    """Search (a raw JSON schema, checked by jsonschema at the seal and at the gate)."""
    return q


BOX = [get_weather, get_time, search]
JSON_ADVICE = "one complete JSON object"


def refused_by_run(
    server: LocalServer, calls: list[tuple[str, str, str]], **kwargs: Any
) -> list[tuple[ts.ToolCall, str]]:
    """Each call of the model's one turn, and what ``ts.run`` told the model about it."""
    server.enqueue(calls_reply(calls), text_reply("ok"))
    messages = [{"role": "user", "content": "go"}]
    result = ts.run(server.client(), model="m", messages=messages, toolbox=BOX, **kwargs)
    answers = {m["tool_call_id"]: m["content"] for m in result.messages if m["role"] == "tool"}
    return [(call, answers[call.id or ""]) for call in result.steps[0].calls]


def agreed(server: LocalServer, calls: list[tuple[str, str, str]], **kwargs: Any) -> list[str]:
    """The texts of the refused calls, after checking that ``ts.run`` and ``call_error_text`` agree."""
    texts = []
    for call, told in refused_by_run(server, calls, **kwargs):
        if call.status != "ready":
            assert told == ts.call_error_text(call)
            texts.append(told)
    return texts


def test_an_unknown_tool_is_told_which_tools_exist(server: LocalServer) -> None:
    [text] = agreed(server, [("call_1", "delete_everything", "{}")])
    assert text == (
        "Error: there is no tool named 'delete_everything'; the call was not run. "
        "Available tools: get_time, get_weather, search."
    )


def test_a_call_under_tool_choice_none_is_told_to_answer_without_tools(server: LocalServer) -> None:
    [text] = agreed(server, [("call_1", "get_weather", '{"city": "Paris"}')], tool_choice="none")
    assert 'tool_choice="none"' in text and text.endswith("Answer without calling a tool.")
    assert "JSON" not in text


def test_a_call_tool_choice_does_not_allow_is_told_which_it_allows(server: LocalServer) -> None:
    forced = {"type": "function", "function": {"name": "get_time"}}
    [text] = agreed(server, [("call_1", "get_weather", '{"city": "Paris"}')], tool_choice=forced)
    assert "forced: get_time" in text and text.endswith("Call only the tools the request allows.")
    assert "JSON" not in text


def test_a_second_call_under_parallel_tool_calls_false_is_told_one_at_a_time(server: LocalServer) -> None:
    calls = [("call_1", "get_weather", '{"city": "Paris"}'), ("call_2", "get_time", '{"tz": "CET"}')]
    [text] = agreed(server, calls, parallel_tool_calls=False)
    assert "parallel_tool_calls=False" in text and "Make one tool call at a time" in text
    assert "JSON" not in text


def test_a_schema_violation_lists_the_problem_and_asks_for_corrected_arguments(server: LocalServer) -> None:
    [text] = agreed(server, [("call_1", "search", '{"q": 5}')])
    assert text == (
        "Error: invalid arguments for search; the call was not run.\n"
        "- q: 5 is not of type 'string'\n"
        "Call search again with corrected arguments."
    )


def test_arguments_that_are_not_json_are_told_to_send_one_json_object(server: LocalServer) -> None:
    [text] = agreed(server, [("call_1", "get_weather", '{"city": "Par')])
    assert "not valid JSON" in text and text.endswith(f"with the arguments as {JSON_ADVICE}.")
    [text] = agreed(server, [("call_2", "get_weather", "")])
    assert "empty" in text.lower() and text.endswith(f"with the arguments as {JSON_ADVICE}.")


def test_a_call_cut_off_is_told_so(server: LocalServer) -> None:
    cut = tool_call_chunks([("call_1", "get_weather", '{"city": "Paris"}')], finish_reason="length")
    server.enqueue(StreamScript(cut), text_reply("ok"))
    messages = [{"role": "user", "content": "go"}]
    result = ts.run(server.client(), model="m", messages=messages, toolbox=BOX)
    [call] = result.steps[0].calls
    told = next(m["content"] for m in result.messages if m["role"] == "tool")
    assert call.status == "incomplete" and told == ts.call_error_text(call)
    assert "cut off before its arguments were complete" in told and "JSON" not in told


# ----------------------------------------------------------------------------- call_error_text alone


def stitched(calls: list[tuple[str, str, str]], **kwargs: Any) -> list[ts.ToolCall]:
    tools = ts.Toolbox(BOX).definitions()
    return ts.stitch(tool_call_chunks(calls), tools=tools, **kwargs).until_done().tool_calls


@pytest.mark.parametrize(
    ("calls", "kwargs", "error", "advice"),
    [
        ([("c1", "nope", "{}")], {}, UnknownTool, "Available tools: get_time, get_weather, search."),
        ([("c1", "get_time", "{}")], {"tool_choice": "none"}, ContractViolation, "Answer without calling"),
        ([("c1", "search", '{"q": 1}')], {}, SchemaViolation, "Call search again with corrected arguments."),
        ([("c1", "search", '{"q": 1')], {}, MalformedArguments, JSON_ADVICE),
        ([("c1", "search", "")], {}, EmptyArguments, JSON_ADVICE),
        (
            [("c1", "get_time", '{"tz": "a"}'), ("c2", "get_time", '{"tz": "b"}')],
            {"limits": ts.Limits(max_calls_per_choice=1)},
            LimitExceeded,
            "Make fewer tool calls at once.",
        ),
    ],
)
def test_call_error_text_fits_each_kind(
    calls: list[tuple[str, str, str]], kwargs: dict[str, Any], error: type[Exception], advice: str
) -> None:
    call = next(c for c in stitched(calls, **kwargs) if c.status != "ready")
    assert isinstance(call.error, error)
    text = ts.call_error_text(call)
    assert advice in text and "valid JSON object" not in text
    assert ("JSON object" in text) == (error in (MalformedArguments, EmptyArguments))


def test_call_error_text_for_a_call_without_a_name_and_one_cut_off() -> None:
    nameless = [
        chunk(delta={"role": "assistant"}),
        chunk(
            delta={
                "tool_calls": [{"index": 0, "id": "c1", "type": "function", "function": {"arguments": "{}"}}]
            }
        ),
        chunk(delta={}, finish_reason="tool_calls"),
    ]
    [call] = ts.stitch(nameless, tools=ts.Toolbox(BOX).definitions()).until_done().tool_calls
    assert isinstance(call.error, MissingName)
    assert ts.call_error_text(call).endswith("Call one of the available tools by name.")

    [cut] = stitched_cut()
    assert cut.status == "incomplete" and isinstance(cut.error, CallIncomplete)
    assert "cut off" in ts.call_error_text(cut) and "JSON" not in ts.call_error_text(cut)


def stitched_cut() -> list[ts.ToolCall]:
    chunks = tool_call_chunks([("c1", "get_time", '{"tz": "CET"}')], finish_reason=None)[:-1]
    stream = ts.stitch(chunks, tools=ts.Toolbox(BOX).definitions())
    for _ in stream:
        pass
    return stream.tool_calls


@ts.tool(custom=True)
def run_sql(query: str) -> str:
    """Run a query (a custom tool: its input is text)."""
    return query


def test_a_custom_tool_called_as_a_function_is_told_to_send_text(server: LocalServer) -> None:
    server.enqueue(calls_reply([("call_1", "run_sql", '{"query": "select 1"}')]), text_reply("ok"))
    messages = [{"role": "user", "content": "go"}]
    result = ts.run(server.client(), model="m", messages=messages, toolbox=[run_sql])
    [call] = result.steps[0].calls
    told = next(m["content"] for m in result.messages if m["role"] == "tool")
    assert isinstance(call.error, UnknownTool) and told == ts.call_error_text(call)
    said = "'run_sql' is a custom tool: call it with its text input, not JSON arguments"
    assert told == f"Error: {said}; the call was not run."
