"""Defining a custom tool: ``@ts.tool(custom=True)`` / ``format=``, ``Tool.from_custom`` and a custom
tool's definition given to a ``Toolbox``; what it offers, and the refusals when it is defined (a
custom tool that could never run is a programming error, said at once). Its calls through the gate
and the executor are in ``tests/loop/test_run_responses_custom.py``; nothing here needs the SDK's
custom-tool types, so it runs on every supported ``openai`` release."""

from __future__ import annotations

from typing import Any

import pytest

import toolstitch as ts
from toolstitch.core import ResponseAccumulator
from toolstitch.testing import response_events
from toolstitch.tools import Tool, Toolbox, tool

SQL = {"type": "grammar", "syntax": "regex", "definition": r"SELECT [a-z_, ]+ FROM [a-z_]+;"}


@tool(custom=True)
def grep(pattern: str) -> str:
    """Search the code base for a pattern."""
    return "3 matches"


@tool(format=SQL)
def query(sql: str, call: ts.ToolCall) -> str:
    """Run one SELECT."""
    return f"rows for {call.id}"


# --------------------------------------------------------------------------- defining the tool


def test_a_custom_tool_is_offered_as_a_custom_tool() -> None:
    assert grep.custom and not grep.eager and grep.format is None
    assert grep.definition() == {
        "type": "custom",
        "custom": {"name": "grep", "description": "Search the code base for a pattern."},
    }
    assert query.definition()["custom"]["format"] == SQL
    assert repr(grep) == "Tool('grep', custom)"


@pytest.mark.parametrize(
    ("make", "error"),
    [
        (lambda: tool(custom=True)(lambda a, b: a), TypeError),  # two parameters
        (lambda: tool(custom=True)(_int_tool), TypeError),  # not a str
        (lambda: tool(custom=True, eager=True, read_only=True)(_text_tool), ValueError),
        (lambda: tool(custom=True, strict=True)(_text_tool), ValueError),
        (
            lambda: tool(format={"type": "grammar", "syntax": "regex", "definition": "(a"})(_text_tool),
            ValueError,
        ),
        (
            lambda: tool(format={"type": "grammar", "syntax": "regex", "definition": r"(a)\1"})(_text_tool),
            ValueError,
        ),
        (
            lambda: tool(format={"type": "grammar", "syntax": "ebnf", "definition": "x"})(_text_tool),
            ValueError,
        ),
        (lambda: tool(custom=True, parameters={"type": "object"})(_text_tool), TypeError),
    ],
    ids=[
        "two-params",
        "int-param",
        "eager",
        "strict",
        "bad-regex",
        "backreference",
        "unknown-syntax",
        "parameters",
    ],
)
def test_a_custom_tool_that_could_never_run_is_refused_when_defined(make: Any, error: type) -> None:
    with pytest.raises(error):
        make()


def _int_tool(n: int) -> str:
    return str(n)


def _text_tool(text: str) -> str:
    return text


@pytest.mark.parametrize(
    "definition",
    [
        {"type": "custom", "custom": {"name": "shell", "description": "Run a command."}},
        {"type": "custom", "name": "shell", "description": "Run a command.", "format": {"type": "text"}},
    ],
    ids=["chat-shape", "responses-flat-shape"],
)
def test_a_toolbox_takes_a_custom_tools_definition_with_its_function(definition: dict[str, Any]) -> None:
    box = Toolbox([(definition, _text_tool)])
    (t,) = box
    assert (t.name, t.custom, t.description) == ("shell", True, "Run a command.")
    assert box.definitions()[0]["type"] == "custom"


ARITHMETIC = {
    "type": "grammar",
    "syntax": "lark",
    "definition": (
        'start: expr\nexpr: term (SP OP SP term)*\nterm: NUMBER\nSP: " "\nOP: "+" | "-"\nNUMBER: /[0-9]+/\n'
    ),
}


def test_a_lark_tool_is_checked_at_seal_and_at_the_gate() -> None:
    calc = Tool.from_custom(_text_tool, name="calc", format=ARITHMETIC)
    acc = ResponseAccumulator([{"type": "custom", "name": "calc", "format": calc.format}])
    for event in response_events([("call_1", "calc", "1 + 2 + 3"), ("call_2", "calc", "1 +2")], custom=True):
        acc.feed(event)
    acc.end()
    good, bad = acc.tool_calls
    assert (good.status, bad.status) == ("ready", "invalid")
    assert "lark grammar" in str(bad.error) and not good.anomalies
    first, second = Toolbox([calc]).execute([good, bad])
    assert first.ok and first.content == "1 + 2 + 3"
    assert not second.ok and second.reason == "invalid_arguments" and "lark grammar" in second.content


@pytest.mark.parametrize(
    "definition",
    ['start: ("a"', "start: undefined_rule", "start: /(?=a)a/", "not a grammar at all"],
    ids=["unclosed", "undefined-rule", "lookaround-terminal", "prose"],
)
def test_a_lark_grammar_that_does_not_compile_is_refused_when_defined(definition: str) -> None:
    fmt = {"type": "grammar", "syntax": "lark", "definition": definition}
    with pytest.raises(
        ValueError, match="calc: the format cannot be checked: the lark grammar does not compile"
    ):
        Tool.from_custom(_text_tool, name="calc", format=fmt)
    with pytest.raises(ValueError, match="calc"):  # trusted or not: the API would refuse it too
        Tool.from_custom(_text_tool, name="calc", format=ts.trust_grammar(fmt))


def test_a_regex_that_python_refuses_but_rust_reads_defines_a_tool() -> None:
    han = Tool.from_custom(
        _text_tool, name="han", format={"type": "grammar", "syntax": "regex", "definition": r"\p{Han}+"}
    )
    (result,) = Toolbox([han]).execute([_ready_custom("han", "深圳")])
    assert result.ok and result.content == "深圳"


def _ready_custom(name: str, text: str) -> ts.ToolCall:
    acc = ResponseAccumulator([{"type": "custom", "name": name}])
    for event in response_events([("call_1", name, text)], custom=True):
        acc.feed(event)
    acc.end()
    (call,) = acc.tool_calls
    return call


def test_the_executor_runs_a_ready_custom_call_and_the_gate_rechecks_the_grammar() -> None:
    acc = ResponseAccumulator([query.definition()["custom"] | {"type": "custom"}, grep.definition()])
    events = response_events(
        [("call_1", "query", "SELECT id FROM users;"), ("call_2", "query", "DROP x;")], custom=True
    )
    for event in events:
        acc.feed(event)
    acc.end()
    good, bad = acc.tool_calls
    assert (good.status, bad.status) == ("ready", "invalid")
    first, second = Toolbox([query]).execute([good, bad])
    assert first.ok and first.content == "rows for call_1"
    assert not second.ok and second.reason == "invalid_arguments" and "regex grammar" in second.content
    outputs = ts.function_call_outputs([first, second])
    assert [(o["type"], o["call_id"]) for o in outputs] == [
        ("custom_tool_call_output", "call_1"),
        ("custom_tool_call_output", "call_2"),
    ]
