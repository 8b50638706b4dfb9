"""What the examples of ``docs/responses.md`` promise (every block of the page runs in
``tests/test_docs_examples.py``; here their printed output is checked)."""

from __future__ import annotations

import pytest

pytest.importorskip("openai.types.responses", reason="this openai release has no Responses API")

from tests.test_docs_examples import output

PAGE = "docs/responses.md"


def test_a_first_stream() -> None:
    assert output(PAGE, "A first stream").splitlines() == [
        "ready call_1 get_weather {'city': 'Paris'}",
        "completed",
    ]


def test_what_leaves_a_call_not_ready() -> None:
    assert output(PAGE, "What leaves a call not `ready`").splitlines() == [
        "call_1 invalid TransitionRefused",
        "call_2 incomplete CallIncomplete",
    ]


def test_a_response_that_was_not_streamed() -> None:
    assert output(PAGE, "A response that was not streamed").splitlines() == [
        "[('call_1', 'ready')]",
        "[('call_1', 'invalid')]",
    ]


def test_sending_the_results_back() -> None:
    assert output(PAGE, "Sending the results back").splitlines() == ["[]", "Sunny in Paris."]


def test_repairing_a_saved_input() -> None:
    assert output(PAGE, "Repairing a saved `input`").splitlines() == [
        "#3 -> dropped R04 dropped: a repeat of function call 'call_1' (item 2)",
        "#1 -> dropped R01 dropped: an output for 'call_0', which no call before it made",
        "new -> #2 R02 inserted: 'not executed' output for call 'call_1' (item 2)",
    ]


def test_the_loop() -> None:
    assert output(PAGE, "The loop").splitlines() == [
        "It is sunny in Paris.",
        "['user', 'function_call', 'function_call_output', 'message']",
    ]


def test_the_sans_io_core() -> None:
    assert output(PAGE, "Without HTTP: `ts.ResponseAccumulator`") == "ready call_1 {'x': 1}\n"


def test_a_dropped_connection() -> None:
    assert output(PAGE, "A dropped connection").splitlines() == [
        "True [('call_1', 'ready')]",
        "[(3, 1)] 1 1",
    ]


def test_custom_tools() -> None:
    assert output(PAGE, "Custom tools").splitlines() == [
        "custom",
        "call_1 2 rows for 'SELECT id, name FROM users;'",
        "call_2 Error: invalid arguments for query; the call was not run.",
    ]
