"""History for the Responses API: input items the next request accepts, and the validator's R rules.

The builders are held against the local server's own, independently written check of OpenAI's
answers (``check_history=True``), over real HTTP with the real ``openai`` client: what the builders
make is accepted, what the validator refuses is refused.
"""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest

pytest.importorskip("openai.types.responses", reason="this openai release has no Responses API")

import toolstitch as ts
from toolstitch.errors import CallNotReadyError
from toolstitch.testing import LocalServer, StreamScript, check_response_input, response_events

TIME = {"type": "function", "name": "get_time", "parameters": {"type": "object"}, "strict": False}
WEATHER = {"type": "function", "name": "get_weather", "parameters": {"type": "object"}, "strict": False}
TOOLS = [WEATHER, TIME]
CALLS = [("call_1", "get_weather", '{"city":  "Paris"}'), ("call_2", "get_time", '{"tz": "CET"}')]


def streamed(server: LocalServer, events: list[dict[str, Any]] | None = None) -> Any:
    server.enqueue(StreamScript.responses(events or response_events(CALLS, reasoning="Two calls.")))
    stream = ts.wrap(server.client()).responses.create(model="m", input="hi", tools=TOOLS, stream=True)
    stream.until_done()
    return stream


def test_response_items_are_the_output_as_received(server: LocalServer) -> None:
    stream = streamed(server)
    items = ts.response_items(stream)
    assert [i["type"] for i in items] == ["reasoning", "function_call", "function_call"]
    assert items[1] == {
        "id": "fc_1",
        "type": "function_call",
        "status": "completed",
        "arguments": '{"city":  "Paris"}',  # the text exactly as received, never re-serialised
        "call_id": "call_1",
        "name": "get_weather",
    }
    assert all(None not in i.values() for i in items)
    # reasoning=False never drops the reasoning a call came with (R08): here it came with both
    assert ts.response_items(stream, reasoning=False) == items
    text_only = ts.response_items(
        streamed(server, response_events(text="Hi.", reasoning="Say hi.")), reasoning=False
    )
    assert [i["type"] for i in text_only] == ["message"]
    assert ts.response_items(stream.get_final_response()) == items
    assert ts.response_items(stream.get_final_response().model_dump()) == items


def test_function_call_outputs_answer_ready_calls(server: LocalServer) -> None:
    calls = streamed(server).tool_calls
    outputs = ts.function_call_outputs([(calls[1], {"time": "12:00"}), (calls[0], "sunny")])
    assert outputs == [  # in the calls' output order
        {"type": "function_call_output", "call_id": "call_1", "output": "sunny"},
        {"type": "function_call_output", "call_id": "call_2", "output": '{"time":"12:00"}'},
    ]


def test_a_call_that_is_not_ready_is_answered_with_an_error(server: LocalServer) -> None:
    server.enqueue(StreamScript.responses(response_events(CALLS)))
    stream = ts.wrap(server.client()).responses.create(model="m", input="hi", tools=[TIME], stream=True)
    call = stream.until_done().tool_calls[0]
    assert call.status == "invalid"
    with pytest.raises(CallNotReadyError):
        ts.function_call_output(call, "sunny")
    item = ts.function_call_output(call, error=ts.call_error_text(call))
    assert item["call_id"] == "call_1" and item["output"].startswith("Error:")


def test_an_output_for_a_function_call_item() -> None:
    item = {"type": "function_call", "call_id": "call_9", "name": "f", "arguments": "{}"}
    assert ts.function_call_output(item, [1, 2]) == {
        "type": "function_call_output",
        "call_id": "call_9",
        "output": "[1,2]",
    }
    with pytest.raises(ValueError, match="call_id"):
        ts.function_call_output({"type": "function_call", "name": "f"}, "x")


# --------------------------------------------------------------------------- validate_input

CALL = {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"}
OUT = {"type": "function_call_output", "call_id": "c1", "output": "ok"}
USER = {"role": "user", "content": "hi"}


def rules(input: Any, **kw: Any) -> list[str]:
    return [p.rule for p in ts.validate_input(input, **kw)]


@pytest.mark.parametrize(
    "input, expected",
    [
        ("hello", []),
        ([USER, CALL, OUT], []),
        ([USER, {"id": "rs_1", "type": "reasoning", "summary": []}, CALL, OUT], []),
        ([USER, OUT], ["R01"]),
        ([USER, CALL], ["R02"]),
        ([USER, OUT, CALL], ["R01", "R02"]),
        ([USER, CALL, OUT, OUT], ["R03"]),
        ([USER, CALL, CALL, OUT], ["R04"]),
        ([USER, {**CALL, "call_id": ""}], ["R05"]),
        ([USER, {**CALL, "arguments": {"a": 1}}, OUT], ["R05"]),
        ([USER, CALL, {"type": "function_call_output", "call_id": "c1"}], ["R05"]),
        ([USER, {"type": "function_call_outputs"}], ["R05"]),
        ([USER, {**CALL, "arguments": "[1]"}, OUT], ["R06"]),
        ([USER, {"id": "rs_1", "type": "reasoning", "summary": []}, OUT], ["R07", "R01"]),
        ([USER, CALL, OUT, {"id": "rs_1", "type": "reasoning", "summary": []}], ["R07"]),
        (None, ["R00"]),
        ([USER, 3, CALL, OUT], ["R00"]),
    ],
)
def test_validate_input_rules(input: Any, expected: list[str]) -> None:
    assert rules(input) == expected


def test_a_chain_answers_the_previous_responses_calls() -> None:
    previous = response_events(CALLS)[-1]["response"]
    outputs = [
        {"type": "function_call_output", "call_id": "call_1", "output": "a"},
        {"type": "function_call_output", "call_id": "call_2", "output": "b"},
    ]
    assert rules(outputs, previous=previous) == []
    problems = ts.validate_input(outputs[:1], previous=previous)
    assert [(p.rule, p.index) for p in problems] == [("R02", None)]
    assert problems[0].server_error == "No tool output found for function call call_2."
    # Without the previous response, an output for a call this input does not hold is not judged.
    assert rules(outputs, previous_response_id="resp_1") == []
    assert rules(outputs) == ["R01", "R01"]


def test_validate_input_never_raises_on_hostile_items() -> None:
    deep: Any = "x"
    for _ in range(3000):
        deep = {"a": deep}
    hostile = [deep, {"type": None}, {"type": "function_call", "call_id": 5}, float("nan"), [[]]]
    assert ts.validate_input(hostile)  # problems, not exceptions


# --------------------------------------------------------------------------- against the server


def test_the_builders_make_a_history_the_server_accepts(server: LocalServer) -> None:
    server.check_history = True
    stream = streamed(server)
    history: list[Any] = [{"role": "user", "content": "hi"}, *ts.response_items(stream)]
    history += ts.function_call_outputs((call, "done") for call in stream.tool_calls)
    assert ts.validate_input(history) == []
    assert check_response_input(history) is None
    server.enqueue(StreamScript.responses(response_events(text="All done.")))
    client = ts.wrap(server.client())
    final = client.responses.create(model="m", input=history, tools=TOOLS, stream=True)
    assert final.get_final_response().output_text == "All done."


def test_a_chain_the_server_accepts(server: LocalServer) -> None:
    server.check_history = True
    stream = streamed(server)
    outputs = ts.function_call_outputs((call, "done") for call in stream.tool_calls)
    previous = stream.get_final_response()
    assert ts.validate_input(outputs, previous=previous) == []
    server.enqueue(StreamScript.responses(response_events(text="ok", id="resp_2")))
    client = server.client()
    client.responses.create(model="m", input=outputs, previous_response_id=previous.id)
    with pytest.raises(openai.BadRequestError, match="No tool output found for function call call_2"):
        client.responses.create(model="m", input=outputs[:1], previous_response_id=previous.id)
    assert [p.rule for p in ts.validate_input(outputs[:1], previous=previous)] == ["R02"]


@pytest.mark.parametrize("drop", ["call", "output"])
def test_the_validator_and_the_server_agree(server: LocalServer, drop: str) -> None:
    server.check_history = True
    stream = streamed(server)
    items = [i for i in ts.response_items(stream) if i["type"] != "reasoning"]
    outputs = ts.function_call_outputs((call, "done") for call in stream.tool_calls)
    history = [USER, *(items[1:] if drop == "call" else items), *(outputs if drop == "call" else outputs[1:])]
    problems = ts.validate_input(history)
    assert problems and problems[0].severity == "error"
    with pytest.raises(openai.BadRequestError) as caught:
        server.client().responses.create(model="m", input=history)
    assert problems[0].server_error in json.dumps(caught.value.body)
