"""``ts.repair_history(input, api="responses")``: a Responses ``input`` list repaired without inventing.

Each fix on its own (orphan and second outputs dropped, an output before its call moved after it, a
call repeated exactly kept once with its repeated reasoning, unanswered calls answered with
``NOT_EXECUTED``, the previous response's calls too), the report's shape (the chat repair's
``RepairReport``), and the promises: ``input`` never mutated, arguments and outputs never changed,
``remaining`` exactly what ``ts.validate_input`` finds, and for any shuffled, cut and repeated turn
(hypothesis) a result that the validator and the local server's own check both accept. Over HTTP,
the repaired input is what the local server, checking histories, answers.
"""

from __future__ import annotations

import copy
import importlib.util
from typing import Any

import openai
import pytest
from hypothesis import given
from hypothesis import strategies as st

import toolstitch as ts
from toolstitch.history import NOT_EXECUTED, RepairChange, RepairReport
from toolstitch.testing import LocalServer, StreamScript, check_response_input, response_events

RESPONSES_API = pytest.mark.skipif(
    importlib.util.find_spec("openai.types.responses") is None,
    reason="this openai release has no Responses API",
)

USER = {"role": "user", "content": "weather and time in Zürich?"}
REASONING = {"id": "rs_1", "type": "reasoning", "summary": [], "encrypted_content": "gAAA"}


def call(call_id: str, name: str = "get_weather", arguments: str = '{"city": "Zürich"}') -> dict[str, Any]:
    return {
        "type": "function_call",
        "id": f"fc_{call_id}",
        "call_id": call_id,
        "name": name,
        "arguments": arguments,
    }


def output(call_id: str, text: str = "sunny") -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": call_id, "output": text}


def missing(call_id: str) -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": call_id, "output": NOT_EXECUTED}


def repair(items: Any, **kw: Any) -> tuple[Any, RepairReport]:
    before = copy.deepcopy(items)
    fixed, report = ts.repair_history(items, api="responses", **kw)
    assert items == before  # never mutated
    assert list(report.remaining) == ts.validate_input(fixed, **kw)
    return fixed, report


def changes(report: RepairReport) -> list[tuple[str, str, int | None, int | None]]:
    return [(c.action, c.rule, c.index, c.new_index) for c in report.changes]


def test_a_valid_input_is_returned_unchanged_with_no_changes() -> None:
    items = [USER, REASONING, call("a"), call("b", "get_time", "{}"), output("a"), output("b", "noon")]
    fixed, report = repair(items)
    assert fixed == items and fixed is not items
    assert not report.changed and report.ok and str(report) == "no changes"


def test_an_orphan_output_is_dropped() -> None:
    fixed, report = repair([USER, output("ghost"), call("a"), output("a")])
    assert fixed == [USER, call("a"), output("a")]
    assert changes(report) == [("dropped", "R01", 1, None)]
    assert report.ok and "'ghost'" in report.changes[0].detail


def test_an_output_sent_before_its_call_is_moved_after_the_calls_of_its_turn() -> None:
    items = [
        USER,
        output("b", "noon"),
        REASONING,
        call("a"),
        call("b", "get_time", "{}"),
        output("a"),
        {"role": "user", "content": "thanks"},
    ]
    fixed, report = repair(items)
    assert fixed == [
        USER,
        REASONING,
        call("a"),
        call("b", "get_time", "{}"),
        output("a"),
        output("b", "noon"),
        items[-1],
    ]
    assert changes(report) == [("moved", "R01", 1, 5)]
    assert report.ok


def test_a_missing_output_is_answered_with_an_error_text_before_the_next_turn() -> None:
    next_turn = [
        {**REASONING, "id": "rs_2"},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "ok"}]},
    ]
    items = [USER, REASONING, call("a"), call("b", "get_time", "{}"), output("a"), *next_turn]
    fixed, report = repair(items)
    assert fixed == [
        USER,
        REASONING,
        call("a"),
        call("b", "get_time", "{}"),
        output("a"),
        missing("b"),
        *next_turn,
    ]
    assert changes(report) == [("inserted", "R02", None, 5)]
    assert "not executed" in NOT_EXECUTED and report.ok
    assert str(report.changes[0]).startswith("new -> #5 R02 inserted")


def test_a_second_output_for_one_call_is_dropped_and_the_first_kept() -> None:
    fixed, report = repair([USER, call("a"), output("a", "first"), output("a", "second")])
    assert fixed == [USER, call("a"), output("a", "first")]
    assert changes(report) == [("dropped", "R03", 3, None)]


def test_an_output_without_call_id_is_dropped() -> None:
    fixed, report = repair([USER, call("a"), output("a"), {"type": "function_call_output", "output": "x"}])
    assert fixed == [USER, call("a"), output("a")]
    assert changes(report) == [("dropped", "R05", 3, None)]


def test_a_turn_appended_twice_keeps_its_call_and_reasoning_once() -> None:
    turn = [REASONING, call("a")]
    fixed, report = repair([USER, *turn, *copy.deepcopy(turn), output("a"), output("a")])
    assert fixed == [USER, *turn, output("a")]
    assert changes(report) == [
        ("dropped", "R04", 4, None),
        ("dropped", "R04", 3, None),
        ("dropped", "R03", 6, None),
    ]
    assert report.ok


def test_one_call_id_with_different_arguments_is_two_facts_and_stays() -> None:
    items = [USER, call("a"), call("a", arguments='{"city": "Bern"}'), output("a")]
    fixed, report = repair(items)
    assert fixed == items
    assert not report.changed and [p.rule for p in report.remaining] == ["R04"] and not report.ok


def test_what_cannot_be_fixed_without_inventing_stays_in_remaining() -> None:
    no_name = {"type": "function_call", "call_id": "c", "arguments": "{}"}
    lonely = {"id": "rs_9", "type": "reasoning", "summary": []}
    fixed, report = repair([USER, no_name, output("c"), lonely])
    assert fixed == [USER, no_name, output("c"), lonely]
    assert sorted(p.rule for p in report.remaining) == ["R05", "R07"]


def test_the_previous_responses_calls_are_answered_and_its_outputs_kept() -> None:
    previous = {"object": "response", "output": [REASONING, call("a"), call("b", "get_time", "{}")]}
    fixed, report = repair([output("a"), output("x")], previous=previous)
    assert fixed == [missing("b"), output("a")]
    assert changes(report) == [("dropped", "R01", 1, None), ("inserted", "R02", None, 0)]
    assert report.ok


def test_with_only_previous_response_id_an_output_that_cannot_be_judged_stays() -> None:
    fixed, report = repair([output("a")], previous_response_id="resp_1")
    assert fixed == [output("a")] and not report.changed and report.ok


def test_sdk_items_are_read_as_the_sdk_sends_them() -> None:
    types = pytest.importorskip("openai.types.responses")
    sdk_call = types.ResponseFunctionToolCall(
        type="function_call", call_id="a", name="f", arguments='{"x": 1}'
    )
    fixed, report = repair([USER, sdk_call])
    assert fixed[1]["arguments"] == '{"x": 1}' and fixed[2] == missing("a")
    assert changes(report) == [("inserted", "R02", None, 2)]


def test_a_string_or_a_non_list_is_returned_as_it_is() -> None:
    assert ts.repair_history("hi", api="responses") == ("hi", RepairReport())
    fixed, report = ts.repair_history(5, api="responses")
    assert fixed == 5 and [p.rule for p in report.remaining] == ["R00"]


def test_the_api_and_its_options_are_checked() -> None:
    with pytest.raises(ValueError, match="api must be"):
        ts.repair_history([], api="assistants")  # type: ignore[call-overload]
    with pytest.raises(ValueError, match="dialect"):
        ts.repair_history([], "mistral", api="responses")
    with pytest.raises(TypeError, match="previous"):
        ts.repair_history([], previous={"output": []})  # type: ignore[call-overload]


def test_the_report_is_the_chat_repairs_report() -> None:
    _, chat = ts.repair_history([{"role": "tool", "tool_call_id": "x", "content": "y"}])
    _, responses = ts.repair_history([output("x")], api="responses")
    assert type(chat) is type(responses) is RepairReport
    assert all(type(c) is RepairChange for c in (*chat.changes, *responses.changes))
    assert (chat.changes[0].action, responses.changes[0].action) == ("dropped", "dropped")


def test_hostile_items_never_raise() -> None:
    deep: Any = []
    for _ in range(900):
        deep = [deep]
    hostile = [deep, {"type": None}, {"type": "function_call", "call_id": 5}, float("nan"), [[]], None]
    fixed, report = ts.repair_history(hostile, api="responses")  # no deepcopy: 900 levels
    assert len(fixed) == len(hostile) and report.remaining
    assert list(report.remaining) == ts.validate_input(fixed)


# --------------------------------------------------------------------------- any history


@st.composite
def broken_inputs(draw: st.DrawFn) -> list[Any]:
    """A few turns of calls and outputs, then outputs dropped, repeated, moved and invented."""
    items: list[Any] = [USER]
    for turn in range(draw(st.integers(1, 3))):
        ids = [f"t{turn}c{k}" for k in range(draw(st.integers(1, 3)))]
        if draw(st.booleans()):
            items.append({**REASONING, "id": f"rs_{turn}"})
        items += [call(i, arguments=f'{{"n": {k}}}') for k, i in enumerate(ids)]
        items += [output(i, f"result {i}") for i in ids if draw(st.booleans())]
        if draw(st.booleans()):
            items.append(
                {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "ok"}]}
            )
    for _ in range(draw(st.integers(0, 4))):
        k = draw(st.integers(0, len(items) - 1))
        action = draw(st.sampled_from(["repeat", "move", "orphan"]))
        if action == "repeat":
            items.insert(k, copy.deepcopy(items[draw(st.integers(0, len(items) - 1))]))
        elif action == "move":
            items.insert(k, items.pop(draw(st.integers(0, len(items) - 1))))
        else:
            items.insert(k, output(f"ghost{k}"))
    return items


@given(broken_inputs())
def test_any_repaired_turns_satisfy_the_validator_and_the_server(items: list[Any]) -> None:
    fixed, report = repair(items)
    assert check_response_input(fixed) is None
    assert not [p for p in report.remaining if p.rule in ("R01", "R02", "R03", "R04")]
    # nothing invented: every item is one of the input's, or a 'not executed' answer
    for item in fixed:
        assert item in items or item == missing(item.get("call_id"))
    calls = [i for i in items if isinstance(i, dict) and i.get("type") == "function_call"]
    assert {i["call_id"] for i in calls} == {i["call_id"] for i in fixed if i.get("type") == "function_call"}


# --------------------------------------------------------------------------- over HTTP


@RESPONSES_API
def test_the_server_refuses_the_broken_input_and_accepts_the_repaired_one(server: LocalServer) -> None:
    server.check_history = True
    broken = [
        USER,
        output("ghost"),
        REASONING,
        call("a"),
        call("b", "get_time", "{}"),
        output("a"),
        output("a"),
    ]
    with pytest.raises(
        openai.BadRequestError, match="No tool call found for function call output with call_id ghost"
    ):
        server.client().responses.create(model="m", input=broken)
    fixed, report = ts.repair_history(broken, api="responses")
    assert report.ok
    server.enqueue(StreamScript.responses(response_events(text="All done.")))
    stream = ts.wrap(server.client()).responses.create(model="m", input=fixed, stream=True)
    assert stream.get_final_response().output_text == "All done."


def test_a_call_sent_back_without_its_reasoning_gets_the_previous_responses_item_back() -> None:
    previous = {"object": "response", "output": [REASONING, call("a"), call("b", "get_time", "{}")]}
    items = [USER, call("a"), call("b", "get_time", "{}"), output("a")]
    assert [p.rule for p in ts.validate_input(items, previous=previous)] == ["R08", "R08", "R02"]
    fixed, report = repair(items, previous=previous)
    assert fixed == [USER, REASONING, call("a"), call("b", "get_time", "{}"), output("a"), missing("b")]
    assert changes(report) == [("inserted", "R02", None, 5), ("inserted", "R08", None, 1)]
    assert report.ok
    without_ids = [{k: v for k, v in i.items() if k != "id"} for i in items]
    fixed, report = repair(without_ids, previous=previous)  # no item id: no reasoning needed
    assert [c.rule for c in report.changes] == ["R02"] and REASONING not in fixed


# --------------------------------------------------------------------------- linear time


@pytest.mark.parametrize("shape", ["unanswered", "repeated", "answered first"])
def test_20000_calls_in_one_turn_repair_in_linear_time(shape: str) -> None:
    # Quadratic code would take minutes here (4e8 steps); linear code takes well under a second.
    n = 20_000
    calls = [call(f"c{k}") for k in range(n)]
    outputs = [output(f"c{k}") for k in range(n)]
    items: list[Any] = {
        "unanswered": [USER, REASONING, *calls],
        "repeated": [USER, REASONING, *calls, REASONING, *calls, *outputs],
        "answered first": [USER, *outputs, REASONING, *calls],
    }[shape]
    fixed, report = ts.repair_history(items, api="responses")
    assert report.ok
    assert fixed[: n + 2] == [USER, REASONING, *calls]
    assert [i["call_id"] for i in fixed[n + 2 :]] == [f"c{k}" for k in range(n)]
