"""Custom tools end to end: the gate and the executor, and ``ts.run(api="responses")`` over real
HTTP with the real ``openai`` client against the local server, which checks every request's
``input`` as OpenAI answers it (``check_history=True``: a custom call left unanswered, or an output
that answers nobody's call, is a 400).
"""

from __future__ import annotations

import importlib.util
from typing import Any

import pytest

HAS_CUSTOM = importlib.util.find_spec("openai.types.responses") is not None and hasattr(
    importlib.import_module("openai.types.responses"), "ResponseCustomToolCall"
)
pytestmark = pytest.mark.skipif(
    not HAS_CUSTOM, reason="this openai release has no custom-tool types (openai.types.responses)"
)

import toolstitch as ts  # noqa: E402
from toolstitch.testing import LocalServer, StreamScript, response_events  # noqa: E402
from toolstitch.tools import Toolbox, tool  # noqa: E402

ran: list[tuple[str, Any]] = []
SQL = {"type": "grammar", "syntax": "regex", "definition": r"SELECT [a-z_, ]+ FROM [a-z_]+;"}


@tool(custom=True)
def grep(pattern: str) -> str:
    """Search the code base for a pattern."""
    ran.append(("grep", pattern))
    return "3 matches"


@tool(format=SQL)
def query(sql: str, call: ts.ToolCall) -> str:
    """Run one SELECT."""
    ran.append(("query", sql))
    return f"rows for {call.id}"


@tool(read_only=True, eager=True)
def get_time(tz: str) -> str:
    """The time in a time zone."""
    ran.append(("get_time", tz))
    return "12:00"


BOX = Toolbox([grep, query, get_time])


@pytest.fixture(autouse=True)
def _clear() -> None:
    ran.clear()


def model(server: LocalServer, *turns: list[dict[str, Any]]) -> None:
    server.check_history = True
    for n, events in enumerate(turns):
        for event in events:
            if event.get("type", "").startswith("response.") and isinstance(event.get("response"), dict):
                event["response"]["id"] = f"resp_{n}"
        server.enqueue(StreamScript.responses(events))


def custom_turn(*calls: tuple[str, str, str]) -> list[dict[str, Any]]:
    return response_events(list(calls), custom=True, reasoning="Let me look.")


# --------------------------------------------------------------------------- the loop


def test_the_loop_runs_a_custom_tool_and_answers_with_its_output(server: LocalServer) -> None:
    model(server, custom_turn(("call_1", "grep", "TODO|FIXME")), response_events(text="Three TODOs."))
    result = ts.run(server.client(), model="m", input="Find the TODOs.", toolbox=BOX, api="responses")
    assert result.stop_reason == "done" and result.output_text == "Three TODOs."
    assert ran == [("grep", "TODO|FIXME")]
    kinds = [i.get("type", i.get("role")) for i in result.input]
    assert kinds == ["user", "reasoning", "custom_tool_call", "custom_tool_call_output", "message"]
    assert result.input[3] == {"type": "custom_tool_call_output", "call_id": "call_1", "output": "3 matches"}
    assert ts.validate_input(result.input) == []
    first, second = server.requests
    assert first["tools"][0] == {
        "type": "custom",
        "name": "grep",
        "description": "Search the code base for a pattern.",
    }  # the Responses API's flat CustomToolParam
    assert first["tools"][1]["format"] == SQL
    assert second["input"][2]["type"] == "custom_tool_call"


async def test_arun_runs_a_custom_tool(server: LocalServer) -> None:
    model(
        server, custom_turn(("call_1", "query", "SELECT id, name FROM users;")), response_events(text="Done.")
    )
    result = await ts.arun(server.async_client(), model="m", input="Users?", toolbox=BOX, api="responses")
    assert result.output_text == "Done."
    assert ran == [("query", "SELECT id, name FROM users;")]
    assert result.input[3]["output"] == "rows for call_1"
    assert ts.validate_input(result.input) == []


def test_an_input_that_does_not_match_the_grammar_never_runs(server: LocalServer) -> None:
    model(
        server,
        custom_turn(("call_1", "query", "DROP TABLE users;")),
        response_events(text="Sorry."),
    )
    result = ts.run(server.client(), model="m", input="Users?", toolbox=BOX, api="responses")
    assert ran == []
    answer = result.input[3]
    assert answer["type"] == "custom_tool_call_output" and "regex grammar" in answer["output"]
    assert ts.validate_input(result.input) == []


def test_a_custom_call_naming_a_function_tool_never_runs_not_even_eagerly(server: LocalServer) -> None:
    # get_time is an eager, read-only function tool: its JSON-looking text must not start it.
    model(server, custom_turn(("call_1", "get_time", '{"tz": "UTC"}')), response_events(text="Sorry."))
    result = ts.run(server.client(), model="m", input="Time?", toolbox=BOX, api="responses")
    assert ran == []
    assert result.input[3]["type"] == "custom_tool_call_output"
    assert ts.validate_input(result.input) == []


def test_a_function_call_naming_a_custom_tool_never_runs(server: LocalServer) -> None:
    model(
        server,
        response_events([("call_1", "grep", '{"pattern": "TODO"}')]),
        response_events(text="Sorry."),
    )
    result = ts.run(server.client(), model="m", input="Find.", toolbox=BOX, api="responses")
    assert ran == []
    assert result.input[2]["type"] == "function_call_output"


def test_a_mixed_turn_answers_each_call_with_its_own_type(server: LocalServer) -> None:
    events = response_events(
        [("call_1", "grep", "TODO"), ("call_2", "get_time", '{"tz": "UTC"}')], custom={"call_1"}
    )
    model(server, events, response_events(text="Both."))
    result = ts.run(server.client(), model="m", input="Both?", toolbox=BOX, api="responses")
    assert sorted(ran) == [("get_time", "UTC"), ("grep", "TODO")]
    outputs = {i["call_id"]: i["type"] for i in result.input if i.get("type", "").endswith("_output")}
    assert outputs == {"call_1": "custom_tool_call_output", "call_2": "function_call_output"}
    assert ts.validate_input(result.input) == []


def test_a_resumed_input_ending_with_an_unanswered_custom_call_runs_it(server: LocalServer) -> None:
    model(server, response_events(text="Found them."))
    unanswered = {
        "type": "custom_tool_call",
        "id": "ctc_1",
        "call_id": "call_7",
        "name": "grep",
        "input": "XXX",
    }
    history = [{"role": "user", "content": "Find."}, unanswered]
    result = ts.run(server.client(), model="m", input=history, toolbox=BOX, api="responses")
    assert ran == [("grep", "XXX")]
    assert result.input[2] == {"type": "custom_tool_call_output", "call_id": "call_7", "output": "3 matches"}


def test_an_incomplete_response_never_runs_its_custom_call(server: LocalServer) -> None:
    model(server, response_events([("call_1", "grep", "TODO")], custom=True, status="incomplete"))
    model(server, response_events(text="Stopped."))
    ts.run(server.client(), model="m", input="Find.", toolbox=BOX, api="responses")
    assert ran == []


# --------------------------------------------------------------------------- the wrapped stream


def test_a_wrapped_stream_gives_the_sdks_own_custom_tool_call_item(server: LocalServer) -> None:
    from openai.types.responses import ResponseCustomToolCall

    server.enqueue(StreamScript.responses(response_events([("call_1", "grep", "TODO")], custom=True)))
    client = ts.wrap(server.client())
    stream = client.responses.create(
        model="m", input="Find.", tools=[{"type": "custom", "name": "grep"}], stream=True
    )
    for _ in stream:
        pass
    (call,) = stream.tool_calls
    assert (call.status, call.type, call.parsed) == ("ready", "custom", "TODO")
    item = stream.get_final_response().output[0]
    assert isinstance(item, ResponseCustomToolCall) and item.input == "TODO"
    (result,) = Toolbox([grep]).execute([call])
    assert result.ok and ran == [("grep", "TODO")]
    assert ts.function_call_output(call, result.content)["type"] == "custom_tool_call_output"


def test_a_wrapped_stream_refuses_a_custom_call_to_a_tool_nobody_offered(server: LocalServer) -> None:
    server.enqueue(StreamScript.responses(response_events([("call_1", "rm", "-rf /")], custom=True)))
    client = ts.wrap(server.client())
    with client.responses.stream(model="m", input="x", tools=[{"type": "custom", "name": "grep"}]) as stream:
        for _ in stream:
            pass
    (call,) = stream.tool_calls
    assert call.status == "invalid" and isinstance(call.error, ts.errors.UnknownTool)


def test_a_recorded_custom_stream_replays_with_the_same_verdicts(server: LocalServer, tmp_path: Any) -> None:
    tools = [{"type": "custom", "name": "query", "format": SQL}]
    calls = [("call_1", "query", "SELECT id FROM users;"), ("call_2", "query", "DROP TABLE users;")]
    server.enqueue(StreamScript.responses(response_events(calls, custom=True)))
    stream = ts.wrap(server.client(), record=tmp_path).responses.create(
        model="m", input="x", tools=tools, stream=True
    )
    live = [(c.id, c.type, c.status) for c in stream.until_done().tool_calls]
    assert live == [("call_1", "custom", "ready"), ("call_2", "custom", "invalid")]
    [path] = tmp_path.glob("*.jsonl")
    replayed = ts.replay(path)
    assert [(c.id, c.type, c.status) for c in replayed.calls()] == live
    assert replayed.calls()[0].parsed == "SELECT id FROM users;"


def test_calls_of_a_response_that_was_not_streamed_reads_its_custom_calls(server: LocalServer) -> None:
    calls = [("call_1", "query", "SELECT id FROM users;"), ("call_2", "query", "DROP TABLE users;")]
    server.enqueue(StreamScript.responses(response_events(calls, custom=True)))
    response = server.client().responses.create(model="m", input="x")
    tools = [{"type": "custom", "name": "query", "format": SQL}]
    assert [(c.id, c.type, c.status) for c in ts.calls_of(response, tools=tools)] == [
        ("call_1", "custom", "ready"),
        ("call_2", "custom", "invalid"),
    ]


def test_the_guard_refuses_a_response_whose_custom_call_is_not_ready(server: LocalServer) -> None:
    server.enqueue(StreamScript.responses(response_events([("call_1", "query", "DROP x;")], custom=True)))
    client = ts.wrap(server.client(), guard=True)
    tools = [{"type": "custom", "name": "query", "format": SQL}]
    stream = client.responses.create(model="m", input="x", tools=tools, stream=True)
    with pytest.raises(ts.errors.UnsafeToolCallError):
        stream.until_done()


# --------------------------------------------------------------------------- lark grammars

ONE_SELECT = {
    "type": "grammar",
    "syntax": "lark",
    "definition": 'start: "SELECT " IDENT " FROM " IDENT ";"?\nIDENT: /[a-z_]+/\n',
}


def _select(sql: str) -> str:
    ran.append(("select", sql))
    return "1 row"


def test_a_lark_tool_runs_a_fitting_input_and_never_one_that_does_not(server: LocalServer) -> None:
    box = Toolbox([ts.Tool.from_custom(_select, name="select", format=ONE_SELECT)])
    model(
        server,
        custom_turn(
            ("call_1", "select", "SELECT a FROM t;"), ("call_2", "select", "SELECT a FROM t; DROP TABLE t;")
        ),
        response_events(text="Done."),
    )
    result = ts.run(server.client(), model="m", input="Rows?", toolbox=box, api="responses")
    assert ran == [("select", "SELECT a FROM t;")]
    outputs = {i["call_id"]: i["output"] for i in result.input if i.get("type") == "custom_tool_call_output"}
    assert outputs["call_1"] == "1 row" and "lark grammar" in outputs["call_2"]
    assert ts.validate_input(result.input) == []
    # what the server received is the format as given, the definition as the API defines it
    sent = server.requests[0]["tools"]
    assert {"type": "custom", "name": "select", "format": ONE_SELECT}.items() <= sent[0].items()


def test_a_trusted_lark_tool_without_llguidance_runs_unchecked(
    server: LocalServer, without_llguidance: None
) -> None:
    with pytest.raises(ValueError, match=r"toolstitch\[grammars\]"):
        ts.Tool.from_custom(_select, name="select", format=ONE_SELECT)
    trusted = ts.Tool.from_custom(_select, name="select", format=ts.trust_grammar(ONE_SELECT))
    model(server, custom_turn(("call_1", "select", "anything")), response_events(text="Done."))
    result = ts.run(server.client(), model="m", input="Rows?", toolbox=Toolbox([trusted]), api="responses")
    assert ran == [("select", "anything")]
    (call,) = result.steps[0].calls
    assert "grammar_unchecked" in {a.code for a in call.anomalies}
    assert server.requests[0]["tools"][0]["format"] == ONE_SELECT  # the mark is not sent
