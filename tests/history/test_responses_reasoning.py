"""Reasoning that must go back: rules R08 and R09 of ``ts.validate_input``, and the builders.

R08: OpenAI refuses a ``function_call`` sent back with its item ``id`` but without the reasoning
item it came with ("Item 'fc_…' of type 'function_call' was provided without its required
'reasoning' item: 'rs_…'.", TanStack/ai#1212, vercel/workflow#880, 0xPlaygrounds/rig#751);
``validate_input(input, previous=response)`` predicts it from the response the calls came from.
R09: DeepSeek's gateway wants a reasoning item before the calls of every turn
(``dialect="deepseek"``). ``ts.response_items(..., reasoning=False)`` never drops a reasoning item
that came with a call.
"""

from __future__ import annotations

import importlib.util
from typing import Any

import pytest

import toolstitch as ts
from toolstitch.testing import LocalServer, StreamScript, response_events

RESPONSES_API = pytest.mark.skipif(
    importlib.util.find_spec("openai.types.responses") is None,
    reason="this openai release has no Responses API",
)

USER = {"role": "user", "content": "weather and time?"}
R1 = {"id": "rs_1", "type": "reasoning", "summary": [], "encrypted_content": "gAAA1"}
R2 = {"id": "rs_2", "type": "reasoning", "summary": [], "encrypted_content": "gAAA2"}
MSG = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "content": [{"type": "output_text", "text": "On it."}],
}


def call(n: int, with_id: bool = True) -> dict[str, Any]:
    item = {"type": "function_call", "call_id": f"call_{n}", "name": "f", "arguments": "{}"}
    return {"id": f"fc_{n}", **item} if with_id else item


def output(n: int) -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": f"call_{n}", "output": "ok"}


def rules(input: list[Any], **kw: Any) -> list[tuple[str, int | None]]:
    return [(p.rule, p.index) for p in ts.validate_input(input, **kw)]


PREVIOUS = {"object": "response", "output": [R1, call(1), call(2)]}


def test_calls_sent_back_without_their_reasoning_are_predicted_with_openais_text() -> None:
    problems = ts.validate_input([USER, call(1), call(2), output(1), output(2)], previous=PREVIOUS)
    assert [(p.rule, p.index, p.severity) for p in problems] == [("R08", 1, "error"), ("R08", 2, "error")]
    assert problems[0].server_error == (
        "Item 'fc_1' of type 'function_call' was provided without its required 'reasoning' item: 'rs_1'."
    )
    assert problems[0].param == "input"


def test_calls_sent_back_beside_their_reasoning_are_valid_and_not_repeats() -> None:
    assert rules([USER, R1, call(1), call(2), output(1), output(2)], previous=PREVIOUS) == []


def test_the_reasoning_must_come_before_the_call() -> None:
    assert rules([USER, call(1), R1, call(2), output(1), output(2)], previous=PREVIOUS) == [("R08", 1)]


def test_each_call_needs_the_reasoning_it_came_with() -> None:
    previous = {"object": "response", "output": [R1, MSG, R2, call(1)]}
    assert rules([USER, R1, MSG, call(1), output(1)], previous=previous) == [("R08", 3)]
    assert rules([USER, R2, call(1), output(1)], previous=previous) == []


def test_a_call_sent_back_without_its_item_id_needs_no_reasoning() -> None:
    assert (
        rules([USER, call(1, with_id=False), call(2, with_id=False), output(1), output(2)], previous=PREVIOUS)
        == []
    )


def test_a_response_without_reasoning_requires_none() -> None:
    previous = {"object": "response", "output": [call(1)]}
    assert rules([USER, call(1), output(1)], previous=previous) == []


def test_after_previous_response_id_only_the_outputs_go() -> None:
    assert rules([output(1), output(2)], previous=PREVIOUS) == []
    assert rules([output(1)], previous=PREVIOUS) == [("R02", None)]


def test_a_repeated_call_is_still_a_repeat() -> None:
    assert rules([USER, R1, call(1), call(1), output(1)], previous=PREVIOUS)[0] == ("R04", 3)


@RESPONSES_API
def test_the_builders_keep_the_reasoning_a_call_came_with(server: LocalServer) -> None:
    events = response_events([("call_1", "f", "{}")], text="Looking.", reasoning="One call.")
    server.enqueue(StreamScript.responses(events))
    stream = ts.wrap(server.client()).responses.create(model="m", input="hi", stream=True)
    response = stream.get_final_response()
    for reasoning in (True, False):
        items = ts.response_items(response, reasoning=reasoning)
        assert [i["type"] for i in items] == ["reasoning", "message", "function_call"]
        history = [USER, *items, {"type": "function_call_output", "call_id": "call_1", "output": "ok"}]
        assert ts.validate_input(history, previous=response) == []
    without = [i for i in ts.response_items(response) if i["type"] != "reasoning"]
    assert [p.rule for p in ts.validate_input([USER, *without], previous=response)] == ["R08", "R02"]


# --------------------------------------------------------------------------- DeepSeek's gateway


def test_deepseek_wants_a_reasoning_item_before_the_calls_of_every_turn() -> None:
    turns = [
        USER,
        R1,
        call(1),
        output(1),
        call(2),
        output(2),
        {"role": "user", "content": "again"},
        R2,
        MSG,
        call(3),
        output(3),
    ]
    assert rules(turns) == []
    assert rules(turns, dialect="deepseek") == [("R09", 4)]
    problem = ts.validate_input(turns, dialect="deepseek")[0]
    assert problem.severity == "error" and "DeepSeek" in problem.message


def test_deepseek_accepts_a_history_that_carries_its_reasoning() -> None:
    assert rules([USER, R1, call(1), call(2), output(1), output(2), R2, MSG], dialect="deepseek") == []


def test_an_unknown_dialect_is_refused() -> None:
    with pytest.raises(ValueError):
        ts.validate_input([USER], dialect="no-such-server")
