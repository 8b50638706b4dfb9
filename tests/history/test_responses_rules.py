"""The Responses rules R00-R09 as methods of ``_InputChecker``, as the chat rules are ``_Checker``'s.

The rule list is one list in three places (the table of ``docs/history-rules.md``, the docstring of
``ts.validate_input``, the checker's code), each method names in its docstring the rules it
reports, and every rule has an input that its own method reports it for.
"""

from __future__ import annotations

import ast
import inspect
import re
import sys
from pathlib import Path
from typing import Any

import pytest

import toolstitch as ts
from toolstitch.history import _validate_input

RULE = re.compile(r"R\d\d")
TABLE = Path(__file__).parents[2] / "docs" / "history-rules.md"
ALL = {f"R{n:02}" for n in range(10)}


def reported_by() -> dict[str, set[str]]:
    """Each function and method of the module, mapped to the rules it reports: the literal rule ids
    of its ``add(...)`` and ``_problem(...)`` calls."""
    found: dict[str, set[str]] = {}
    for node in ast.walk(ast.parse(inspect.getsource(_validate_input))):
        if not isinstance(node, ast.FunctionDef):
            continue
        for call in ast.walk(node):
            if not isinstance(call, ast.Call) or len(call.args) < 2:
                continue
            func = call.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            rule = call.args[1]
            if name in ("add", "_problem") and isinstance(rule, ast.Constant) and isinstance(rule.value, str):
                found.setdefault(node.name, set()).add(rule.value)
    return found


def test_the_rule_list_is_complete() -> None:
    table = set(re.findall(r"^\| (R\d\d) \|", TABLE.read_text(encoding="utf-8"), re.MULTILINE))
    documented = set(re.findall(r"``(R\d\d)``", ts.validate_input.__doc__ or ""))
    reported = set().union(*reported_by().values())
    assert table == documented == reported == ALL


def test_each_checker_method_names_its_rules_in_its_docstring() -> None:
    methods = reported_by()
    for name, rules in methods.items():
        if name == "validate_input":
            continue
        doc = getattr(_validate_input._InputChecker, name).__doc__ or ""
        assert rules <= set(RULE.findall(doc)), name
    assert set(methods) - {"validate_input"} <= set(vars(_validate_input._InputChecker))


CALL = {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"}
OUT = {"type": "function_call_output", "call_id": "c1", "output": "ok"}
USER = {"role": "user", "content": "hi"}
REASONING = {"id": "rs_1", "type": "reasoning", "summary": []}
PREVIOUS = [REASONING, {**CALL, "id": "fc_1"}]

# rule, the method that reports it, input, keyword arguments
EXAMPLES: list[tuple[str, str, Any, dict[str, Any]]] = [
    ("R00", "validate_input", None, {}),
    ("R00", "item", [USER, 3], {}),
    ("R01", "answers_a_call", [USER, OUT], {}),
    ("R01", "answers_a_call", [USER, CALL, {**OUT, "type": "custom_tool_call_output"}], {}),
    ("R02", "unanswered", [USER, CALL], {}),
    ("R02", "unanswered", [USER], {"previous": PREVIOUS}),
    ("R03", "output", [USER, CALL, OUT, OUT], {}),
    ("R04", "made_once", [USER, CALL, CALL, OUT], {}),
    ("R05", "item", [USER, {"type": "function_call_outputs"}], {}),
    ("R05", "call_fields", [USER, {**CALL, "name": ""}, OUT], {}),
    ("R05", "output", [USER, CALL, {**OUT, "output": None}], {}),
    ("R05", "output", [USER, CALL, {**OUT, "call_id": ""}], {}),
    ("R06", "arguments", [USER, {**CALL, "arguments": "[1]"}, OUT], {}),
    ("R07", "reasoning", [USER, CALL, OUT, REASONING], {}),
    ("R08", "beside_reasoning", [USER, {**CALL, "id": "fc_1"}, OUT], {"previous": PREVIOUS}),
    ("R09", "reasoned_turn", [USER, CALL, OUT], {"dialect": "deepseek"}),
]


def test_the_examples_cover_every_rule_and_every_method_that_reports_one() -> None:
    assert {e[0] for e in EXAMPLES} == ALL
    pairs = {(rule, method) for method, rules in reported_by().items() for rule in rules}
    assert {(e[0], e[1]) for e in EXAMPLES} == pairs


@pytest.mark.parametrize(
    ("rule", "method", "input", "kw"), EXAMPLES, ids=[f"{e[0]}-{e[1]}" for e in EXAMPLES]
)
def test_each_rule_is_reported_by_its_own_method(
    monkeypatch: pytest.MonkeyPatch, rule: str, method: str, input: Any, kw: dict[str, Any]
) -> None:
    seen: list[tuple[str, str]] = []
    add = _validate_input._InputChecker.add

    def recording(self: Any, index: int | None, rule_id: str, what: str, **fields: Any) -> None:
        seen.append((rule_id, sys._getframe(1).f_code.co_name))
        add(self, index, rule_id, what, **fields)

    monkeypatch.setattr(_validate_input._InputChecker, "add", recording)
    problems = ts.validate_input(input, **kw)
    assert rule in [p.rule for p in problems]
    if method != "validate_input":  # R00 of an input that is no list comes before any checker
        assert (rule, method) in seen
