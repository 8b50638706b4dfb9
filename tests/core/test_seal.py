"""``core._seal``: sealing and checking a call against the request (tools, tool_choice, parallel)."""

from __future__ import annotations

from typing import Any

import pytest

import toolstitch as ts
from toolstitch.core import sealed_call
from toolstitch.core._anomaly import Anomaly
from toolstitch.core._call import ToolCall
from toolstitch.core._limits import Limits
from toolstitch.core._owner import CallOwner, Finish, Identity
from toolstitch.core._seal import CallChecks

F = {
    "type": "function",
    "function": {"name": "f", "parameters": {"type": "object", "properties": {"a": {"type": "integer"}}}},
}
G = {"type": "function", "function": {"name": "g", "parameters": {"type": "object"}}}


def sealed(checks: CallChecks, name: str, text: str, first: bool = True) -> tuple[ToolCall, list[str]]:
    owner = CallOwner(Limits(), lambda: 0.0)
    call = owner.open(0, 0, 0, 0.0)
    notes: list[Anomaly] = []
    owner.identify(call, Identity(None, name, "function", None), [], opening=True)
    owner.fragment(call, (text, None, False), [])
    owner.seal(call, Finish(0.0, checks, first))
    notes.extend(owner.take_notes())
    return call, [n.code for n in notes]


@pytest.mark.parametrize(
    ("kw", "name", "first", "status"),
    [
        ({}, "f", True, "ready"),
        ({"tool_choice": "none"}, "f", True, "invalid"),
        ({"tool_choice": "required"}, "g", False, "ready"),
        ({"tool_choice": {"type": "function", "function": {"name": "f"}}}, "g", True, "invalid"),
        ({"tool_choice": {"type": "function", "function": {"name": 5}}}, "f", True, "invalid"),
        ({"tool_choice": {"type": "function", "function": {"name": "f"}}}, "f", True, "ready"),
        ({"parallel_tool_calls": False}, "f", False, "invalid"),
        ({"parallel_tool_calls": False}, "f", True, "ready"),
        ({"parallel_tool_calls": True}, "f", False, "ready"),
        ({"tool_choice": "something new"}, "f", True, "ready"),
    ],
)
def test_the_contract(kw: dict[str, Any], name: str, first: bool, status: str) -> None:
    call, codes = sealed(CallChecks([F, G], **kw), name, '{"a": 1}' if name == "f" else "{}", first)
    assert call.status == status
    if status == "invalid":
        assert isinstance(call.error, ts.errors.ContractViolation) and codes == ["contract_violation"]


def test_the_schema_is_checked_after_the_contract() -> None:
    call, _ = sealed(CallChecks([F]), "f", '{"a": "x"}')
    assert isinstance(call.error, ts.errors.SchemaViolation)
    call, _ = sealed(CallChecks([F]), "h", "{}")
    assert isinstance(call.error, ts.errors.UnknownTool)


def test_empty_arguments() -> None:
    empty = {
        "type": "function",
        "function": {"name": "e", "parameters": {"type": "object", "properties": {}}},
    }
    required = {
        "type": "function",
        "function": {"name": "r", "parameters": {"type": "object", "required": ["x"]}},
    }
    call, codes = sealed(CallChecks([empty]), "e", "")
    assert call.ready and call.parsed == {} and codes == ["empty_arguments_no_parameters"]
    call, _ = sealed(CallChecks([F]), "f", "")
    assert isinstance(call.error, ts.errors.EmptyArguments)
    call, _ = sealed(CallChecks([required]), "r", "")  # no properties, but {} still fails the schema
    assert isinstance(call.error, ts.errors.SchemaViolation)
    call, codes = sealed(CallChecks(None, empty_arguments="object"), "x", "")
    assert call.ready and codes == ["empty_arguments_as_object"]
    call, _ = sealed(CallChecks(None), "x", "")
    assert isinstance(call.error, ts.errors.EmptyArguments)


def test_sealed_call_from_history() -> None:
    call = sealed_call(index=2, id="call_9", name="f", arguments='{"a": 1}', tools=[F], choice=1)
    assert (call.ready, call.index, call.choice, call.id, call.parsed) == (True, 2, 1, "call_9", {"a": 1})
    assert call.metrics.sealed_at is not None
    empty = {"type": "function", "function": {"name": "e"}}
    call = sealed_call(index=0, id="x", name="e", arguments=None, tools=[empty])
    assert call.ready and [a.code for a in call.anomalies] == ["empty_arguments_no_parameters"]
    assert call.anomalies[0].call_index == 0
    call = sealed_call(index=0, id="x", name="f", arguments="x" * 100, limits=Limits(max_argument_bytes=10))
    assert isinstance(call.error, ts.errors.LimitExceeded)
    call = sealed_call(index="zero", id=5, name=None, arguments="{}")  # type: ignore[arg-type]
    assert call.status == "invalid" and call.index == 0 and call.id is None
