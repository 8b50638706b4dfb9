"""A custom tool's items in a Responses ``input``: the builders answer a ``custom_tool_call`` with
a ``custom_tool_call_output``, ``validate_input`` holds them to the rules of function calls (with
OpenAI's own texts for them), and ``repair_history(api="responses")`` repairs them the same way.

Plain dicts, as a caller keeps them: nothing here needs the SDK's custom-tool types. Each verdict
is also held against ``toolstitch.testing.check_response_input``, written apart from the package.
"""

from __future__ import annotations

from typing import Any

import pytest

import toolstitch as ts
from toolstitch.core import ResponseAccumulator
from toolstitch.history import NOT_EXECUTED
from toolstitch.testing import check_response_input, response_events

USER = {"role": "user", "content": "Find the TODOs."}


def custom_call(call_id: str = "call_1", text: str = "TODO", item_id: str = "ctc_1") -> dict[str, Any]:
    return {"type": "custom_tool_call", "id": item_id, "call_id": call_id, "name": "grep", "input": text}


def custom_output(call_id: str = "call_1", output: str = "3 matches") -> dict[str, Any]:
    return {"type": "custom_tool_call_output", "call_id": call_id, "output": output}


def function_call(call_id: str = "call_2") -> dict[str, Any]:
    return {
        "type": "function_call",
        "call_id": call_id,
        "name": "get_weather",
        "arguments": '{"city": "Oslo"}',
    }


def rules(items: list[Any], **kw: Any) -> list[str]:
    return [p.rule for p in ts.validate_input(items, **kw) if p.severity == "error"]


def streamed_custom_call() -> Any:
    acc = ResponseAccumulator([{"type": "custom", "name": "grep"}])
    for event in response_events([("call_1", "grep", "TODO")], custom=True):
        acc.feed(event)
    acc.end()
    (call,) = acc.tool_calls
    return call


# --------------------------------------------------------------------------- the builders


def test_a_custom_call_is_answered_with_a_custom_tool_call_output() -> None:
    call = streamed_custom_call()
    assert call.type == "custom" and call.ready
    assert ts.function_call_output(call, "3 matches") == custom_output()
    assert ts.function_call_output(custom_call(), "3 matches") == custom_output()
    error = ts.function_call_output(custom_call(), error="no such file")
    assert error["type"] == "custom_tool_call_output" and "no such file" in error["output"]


def test_outputs_of_a_mixed_turn_keep_each_calls_type() -> None:
    outputs = ts.function_call_outputs([(custom_call(), "3 matches"), (function_call(), {"temp": 4})])
    assert [o["type"] for o in outputs] == ["custom_tool_call_output", "function_call_output"]


def test_response_items_keep_a_custom_call_as_received() -> None:
    final = next(
        e
        for e in response_events([("call_1", "grep", "a\nb")], custom=True)
        if e["type"] == "response.completed"
    )
    (item,) = ts.response_items(final["response"])
    assert item == {
        "id": "ctc_0",
        "type": "custom_tool_call",
        "status": "completed",
        "input": "a\nb",
        "call_id": "call_1",
        "name": "grep",
    }


def test_response_items_keep_the_reasoning_that_came_with_a_custom_call() -> None:
    events = response_events([("call_1", "grep", "x")], custom=True, reasoning="Search.")
    final = next(e for e in events if e["type"] == "response.completed")["response"]
    kinds = [i["type"] for i in ts.response_items(final, reasoning=False)]
    assert kinds == ["reasoning", "custom_tool_call"]


# --------------------------------------------------------------------------- validate_input


def test_a_custom_call_and_its_output_are_a_valid_input() -> None:
    items = [USER, custom_call(), custom_output()]
    assert ts.validate_input(items) == []
    assert check_response_input(items) is None


def test_a_custom_call_without_its_output_is_the_missing_output_error() -> None:
    items = [USER, custom_call()]
    (problem,) = ts.validate_input(items)
    assert problem.rule == "R02" and problem.index == 1
    assert problem.server_error == "No tool output found for custom tool call call_1."
    assert check_response_input(items) is not None


def test_a_custom_output_without_its_call_answers_nothing() -> None:
    items = [USER, custom_output()]
    (problem,) = ts.validate_input(items)
    assert problem.rule == "R01"
    assert problem.server_error == "No tool call found for custom tool call output with call_id call_1."
    assert check_response_input(items) is not None


@pytest.mark.parametrize(
    "items",
    [
        [USER, custom_call(), {"type": "function_call_output", "call_id": "call_1", "output": "x"}],
        [USER, function_call("call_1"), custom_output()],
    ],
    ids=["function-output-for-custom-call", "custom-output-for-function-call"],
)
def test_an_output_of_the_other_type_answers_nothing(items: list[Any]) -> None:
    assert set(rules(items)) == {"R01", "R02"}


def test_two_custom_outputs_for_one_call_and_two_calls_under_one_id() -> None:
    assert rules([USER, custom_call(), custom_output(), custom_output()]) == ["R03"]
    assert "R04" in rules([USER, custom_call(), custom_call(item_id="ctc_2"), custom_output()])


@pytest.mark.parametrize("field", ["call_id", "name", "input"])
def test_a_custom_call_without_what_the_server_requires(field: str) -> None:
    call = custom_call()
    del call[field]
    problems = [p for p in ts.validate_input([USER, call, custom_output()]) if p.rule == "R05"]
    assert problems and problems[0].param == f"input[1].{field}"


def test_a_custom_input_that_is_not_json_is_no_warning() -> None:
    assert ts.validate_input([USER, custom_call(text="not { json"), custom_output()]) == []


def test_a_previous_responses_custom_call_must_be_answered() -> None:
    previous = {"output": [custom_call()]}
    assert rules([USER], previous=previous) == ["R02"]
    assert rules([custom_output()], previous=previous) == []


def test_a_custom_call_sent_back_without_its_reasoning_is_r08() -> None:
    reasoning = {"type": "reasoning", "id": "rs_1", "summary": []}
    previous = {"output": [reasoning, custom_call()]}
    assert "R08" in rules([USER, custom_call(), custom_output()], previous=previous)
    assert rules([USER, reasoning, custom_call(), custom_output()], previous=previous) == []


# --------------------------------------------------------------------------- repair


def test_repair_answers_a_custom_call_with_a_custom_output() -> None:
    repaired, report = ts.repair_history(
        [USER, custom_call(), {"role": "user", "content": "and?"}], api="responses"
    )
    assert repaired[2] == {"type": "custom_tool_call_output", "call_id": "call_1", "output": NOT_EXECUTED}
    assert [c.rule for c in report.changes] == ["R02"]
    assert report.remaining == () and check_response_input(repaired) is None


def test_repair_answers_a_previous_responses_custom_call_with_a_custom_output() -> None:
    repaired, _ = ts.repair_history([USER], api="responses", previous={"output": [custom_call()]})
    assert repaired[0]["type"] == "custom_tool_call_output"


def test_repair_drops_an_orphan_custom_output_and_keeps_a_repeated_call_once() -> None:
    items = [USER, custom_output("call_9"), custom_call(), custom_call(), custom_output()]
    repaired, report = ts.repair_history(items, api="responses")
    assert repaired == [USER, custom_call(), custom_output()]
    assert sorted(c.rule for c in report.changes) == ["R01", "R04"]
    assert report.remaining == ()


def test_repair_keeps_two_different_custom_calls_under_one_id() -> None:
    items = [USER, custom_call(text="a"), custom_call(text="b", item_id="ctc_2"), custom_output()]
    repaired, report = ts.repair_history(items, api="responses")
    assert repaired == items and [p.rule for p in report.remaining] == ["R04"]


def test_repair_drops_an_output_of_the_other_type_and_answers_the_call() -> None:
    wrong = {"type": "function_call_output", "call_id": "call_1", "output": "3 matches"}
    repaired, report = ts.repair_history([USER, custom_call(), wrong], api="responses")
    assert repaired == [USER, custom_call(), {**custom_output(), "output": NOT_EXECUTED}]
    assert sorted(c.rule for c in report.changes) == ["R01", "R02"]
    assert report.remaining == ()
