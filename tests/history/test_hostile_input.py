"""Hostile Responses ``input`` to the history layer: problems, never a crash.

The chat twin is ``test_hostile_history.py``. Here every field of a well-formed item of each kind
may be replaced by any JSON value: a ``type`` or an ``id`` that is a list or an object (which no
table of kinds can look up, and once raised ``TypeError: unhashable type``), a ``call_id`` that is a
number, and so on, in ``input`` and in the ``previous`` response it continues.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from toolstitch.history import HistoryProblem, repair_history, validate_input

WELL_FORMED: list[dict[str, Any]] = [
    {"type": "message", "role": "user", "content": "hi"},
    {"type": "reasoning", "id": "rs_1", "summary": []},
    {"type": "function_call", "id": "fc_1", "call_id": "c1", "name": "f", "arguments": "{}"},
    {"type": "function_call_output", "call_id": "c1", "output": "x"},
    {"type": "custom_tool_call", "call_id": "c2", "name": "g", "input": "x"},
    {"type": "custom_tool_call_output", "call_id": "c2", "output": "x"},
    {"type": "item_reference", "id": "rs_1"},
    {"role": "assistant", "content": "done"},
]
HOSTILE = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=4),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=8,
)
FIELDS = st.sampled_from(["type", "id", "call_id", "name", "arguments", "output", "input", "role", "content"])


@st.composite
def items(draw: st.DrawFn) -> dict[str, Any]:
    item = dict(draw(st.sampled_from(WELL_FORMED)))
    for field in draw(st.lists(FIELDS, max_size=2)):
        item[field] = draw(HOSTILE)
    return item


INPUTS = st.lists(items(), min_size=1, max_size=5)
PREVIOUS = st.none() | st.lists(items(), max_size=3)


@settings(max_examples=500)
@given(input_items=INPUTS, previous=PREVIOUS)
def test_validate_input_and_its_repair_never_raise(input_items: list[Any], previous: Any) -> None:
    problems = validate_input(input_items, previous=previous)
    assert all(isinstance(p, HistoryProblem) for p in problems)
    fixed, report = repair_history(input_items, api="responses", previous=previous)
    assert list(report.remaining) == validate_input(fixed, previous=previous)


def test_a_type_or_an_id_that_cannot_be_looked_up_is_a_problem() -> None:
    (problem,) = validate_input([{"type": ["function_call"], "call_id": "c1"}])
    assert (problem.rule, problem.index) == ("R05", 0)
    assert "not a string" in problem.message
    previous = [WELL_FORMED[1], WELL_FORMED[2]]  # a call with the reasoning item it came with
    sent_back = [{"type": "reasoning", "id": {"not": "rs_1"}, "summary": []}, WELL_FORMED[2], WELL_FORMED[3]]
    rules = [p.rule for p in validate_input(sent_back, previous=previous)]
    assert "R08" in rules  # an id that is no string is no reasoning item the call can be paired with
    fixed, report = repair_history(sent_back, api="responses", previous=previous)
    assert [p.rule for p in report.remaining] == [p.rule for p in validate_input(fixed, previous=previous)]


def test_a_previous_response_with_such_items_is_read_without_them() -> None:
    previous = [{"type": ["function_call"], "call_id": "c1"}, {"type": "reasoning", "id": ["rs_1"]}]
    (problem,) = validate_input([WELL_FORMED[3]], previous=previous)
    assert problem.rule == "R01"  # no call of the previous response made c1: its output answers none
    fixed, report = repair_history([WELL_FORMED[3]], api="responses", previous=previous)
    assert fixed == [] and [c.rule for c in report.changes] == ["R01"]


def test_problems_quote_a_long_or_nested_id_cut_short() -> None:
    long_id = "c" * 100_000
    (problem,) = validate_input([{"type": "function_call_output", "call_id": long_id, "output": "x"}])
    assert problem.rule == "R01" and len(problem.message) < 400
    assert problem.server_error is not None and len(problem.server_error) < 400
    nested: Any = []
    for _ in range(150):
        nested = [nested, "rs" * 50]
    (problem,) = validate_input([{"type": "reasoning", "id": nested, "summary": []}])
    assert problem.rule == "R07" and len(problem.message) < 600
