"""The gate: ready, registered, valid, confirmed, in that order; every refusal explains itself.

A refusal is a result the model reads, so these tests check the text says what was wrong, and that
the function never ran.
"""

from __future__ import annotations

import asyncio
from typing import Literal

import pytest

import toolstitch as ts
from tests.tools._support import Recorder, sealed
from toolstitch.tools import Tool, Toolbox, tool
from toolstitch.tools._gate import Admission, Refusal, admit

ran = Recorder()


@tool
def get_weather(city: str, unit: Literal["c", "f"] = "c") -> str:
    ran.add("get_weather", city)
    return f"{city}: 20{unit}"


@tool(confirm=True)
def place_order(item: str) -> str:
    ran.add("place_order", item)
    return f"ordered {item}"


def delete_everything() -> None:  # a module-level function that is NOT in the toolbox
    ran.add("delete_everything")


@pytest.fixture(autouse=True)
def _clear() -> None:
    ran.calls.clear()


def one(arguments: str, name: str = "get_weather", **kw: object) -> ts.ToolCall:
    [call] = sealed([("call_1", name, arguments)], **kw)  # type: ignore[arg-type]
    return call


def test_a_ready_call_with_valid_arguments_is_admitted() -> None:
    verdict = admit(one('{"city": "Oslo"}'), Toolbox([get_weather]))
    assert isinstance(verdict, Admission)
    assert verdict.tool is get_weather and verdict.kwargs == {"city": "Oslo"}


def test_a_cut_off_call_is_refused_before_anything_else() -> None:
    # The stream ended before finish_reason: the call is incomplete, whatever its name.
    call = one('{"city": "Os', name="no_such_tool", finish_reason=None)
    assert call.status == "incomplete"
    verdict = admit(call, Toolbox([get_weather]))
    assert isinstance(verdict, Refusal) and verdict.reason == "incomplete"
    assert "cut off" in verdict.message and "not run" in verdict.message


def test_malformed_json_is_refused_with_the_parse_error() -> None:
    verdict = admit(one('{"city": Oslo}'), Toolbox([get_weather]))
    assert isinstance(verdict, Refusal) and verdict.reason == "not_ready"
    assert "not valid JSON" in verdict.message
    assert "one complete JSON object" in verdict.message


def test_readiness_is_checked_before_the_name() -> None:
    verdict = admit(one("[1, 2]", name="no_such_tool"), Toolbox([get_weather]))
    assert isinstance(verdict, Refusal) and verdict.reason == "not_ready"


def test_an_unknown_name_is_never_looked_up_anywhere_else() -> None:
    box = Toolbox([get_weather])
    for name in ("delete_everything", "Get_Weather", "get-weather", "__import__"):
        verdict = admit(one("{}", name=name), box)
        assert isinstance(verdict, Refusal) and verdict.reason == "unknown_tool"
        assert f"no tool named {name!r}" in verdict.message
        assert "Available tools: get_weather." in verdict.message
    [result] = box.execute([one("{}", name="delete_everything")])
    assert result.status == "refused" and ran.calls == []


def test_the_name_is_checked_before_the_arguments() -> None:
    verdict = admit(one('{"bad": 1}', name="nope"), Toolbox([get_weather]))
    assert isinstance(verdict, Refusal) and verdict.reason == "unknown_tool"


def test_invalid_arguments_never_reach_the_function() -> None:
    box = Toolbox([get_weather])
    [result] = box.execute([one('{"city": "Oslo", "unit": "kelvin"}')])
    assert ran.calls == []
    assert result.status == "refused" and result.reason == "invalid_arguments"
    assert "invalid arguments for get_weather" in result.content
    assert "unit: Input should be 'c' or 'f' (got 'kelvin')" in result.content
    assert "Call get_weather again with corrected arguments." in result.content
    assert result.problems == ("unit: Input should be 'c' or 'f' (got 'kelvin')",)


def test_an_omitted_defaulted_parameter_of_a_strict_tool_is_ready_and_admitted() -> None:
    # Strict mode publishes every parameter as required (nullable when it has a default); a server
    # that ignores strict may leave a defaulted one out. The stream's check reads that as "use the
    # default", like the tool's own validator, so the call is ready and the gate admits it.
    box = Toolbox([get_weather])
    call = one('{"city": "Oslo"}', tools=box.definitions())
    assert call.status == "ready", call.error
    verdict = admit(call, box)
    assert isinstance(verdict, Admission) and verdict.kwargs == {"city": "Oslo"}


def test_raw_schema_tools_are_validated_with_jsonschema() -> None:
    def lookup(**kw: object) -> object:
        ran.add("lookup", kw)
        return kw

    t = Tool.from_schema(
        lookup,
        name="lookup",
        parameters={"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]},
    )
    [bad, good] = Toolbox([t]).execute(
        sealed([("c1", "lookup", '{"id": "seven"}'), ("c2", "lookup", '{"id": 7}')])
    )
    assert bad.reason == "invalid_arguments" and "id: 'seven' is not of type 'integer'" in bad.content
    assert good.ok and good.value == {"id": 7}
    assert ran.calls == [("lookup", {"id": 7})]


# ----------------------------------------------------------------------------- confirmation


def test_a_confirm_tool_without_a_callback_is_refused() -> None:
    [result] = Toolbox([place_order]).execute([one('{"item": "book"}', name="place_order")])
    assert result.reason == "not_approved" and "no confirmation callback" in result.content
    assert ran.calls == []


@pytest.mark.parametrize("answer", [False, None, "yes", 1])
def test_only_an_explicit_true_approves(answer: object) -> None:
    box = Toolbox([place_order], confirm=lambda call, t: answer)  # type: ignore[arg-type,return-value]
    [result] = box.execute([one('{"item": "book"}', name="place_order")])
    assert result.reason == "not_approved" and "was not approved" in result.content
    assert ran.calls == []


def test_the_callback_sees_the_call_and_the_tool_and_its_yes_runs_the_call() -> None:
    asked: list[tuple[str | None, object, Tool]] = []

    def ask(call: ts.ToolCall, t: Tool) -> bool:
        asked.append((call.id, call.parsed, t))
        return True

    box = Toolbox([place_order, get_weather], confirm=ask)
    results = box.execute(
        sealed([("c1", "get_weather", '{"city": "Oslo"}'), ("c2", "place_order", '{"item": "book"}')])
    )
    assert [r.status for r in results] == ["ok", "ok"]
    assert asked == [("c2", {"item": "book"}, place_order)]  # only the confirm=True tool asks
    assert results[1].timings.confirmation >= 0.0


def test_a_failing_callback_means_no() -> None:
    def broken(call: ts.ToolCall, t: Tool) -> bool:
        raise RuntimeError("ui crashed")

    [result] = Toolbox([place_order], confirm=broken).execute([one('{"item": "x"}', name="place_order")])
    assert result.reason == "not_approved" and ran.calls == []


def test_async_callbacks_work_from_sync_and_async_code() -> None:
    async def approve(call: ts.ToolCall, t: Tool) -> bool:
        await asyncio.sleep(0)
        return call.parsed == {"item": "book"}

    with Toolbox([place_order], confirm=approve) as box:
        calls = sealed([("c1", "place_order", '{"item": "book"}'), ("c2", "place_order", '{"item": "car"}')])
        sync_results = box.execute(calls)
        async_results = asyncio.run(box.aexecute(calls, ledger=None))
    for results in (sync_results, async_results):
        assert [r.status for r in results] == ["ok", "refused"]
    assert ran.names() == ["place_order", "place_order"]
