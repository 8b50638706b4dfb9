"""A hostile MCP server (issue 45): its list, its hints and its results are input like any other.

The lists are served from the kept lists of ``tools/_mcp_tools.py`` (as a server that allows it
would leave them), so no process is started: what is checked is what toolstitch makes of them.
Nothing here may raise from toolstitch's own code, offer a tool that cannot be checked, or trust a
hint that is not ``True`` itself."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import toolstitch as ts
from tests.tools._support import sealed
from toolstitch import mcp
from toolstitch.tools._mcp import RESULT_CHARS, policy, result_text
from toolstitch.tools._mcp_session import _value
from toolstitch.tools._mcp_tools import LISTS

pytest.importorskip("mcp")

OBJECT = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}


def listed(name: Any, schema: Any = OBJECT, annotations: Any = None, **more: Any) -> SimpleNamespace:
    return SimpleNamespace(name=name, input_schema=schema, annotations=annotations, description="d", **more)


@pytest.fixture
def kept(tmp_path: Path) -> Iterator[mcp.MCPServer]:
    """A server no process stands behind (its list is kept): building never starts it."""
    server = mcp.stdio(sys.executable, [str(tmp_path / "never_started.py")], name="hostile")
    yield server
    LISTS.put(server, [], 0)


def build(server: mcp.MCPServer, tools: list[Any]) -> ts.Toolbox:
    LISTS.put(server, tools, 60_000)
    return ts.Toolbox(mcp=[server])


def test_tools_that_cannot_be_offered_safely_are_left_out(
    kept: mcp.MCPServer, caplog: pytest.LogCaptureFixture
) -> None:
    hostile = [
        listed("ok"),
        listed("bad name"),
        listed("x" * 65),
        listed(None),
        listed(42),
        listed("\ud800"),
        listed("no_schema", schema=None),
        listed("list_schema", schema=["type", "object"]),
        listed("not_object", schema={"type": "string"}),
        listed("broken_schema", schema={"type": "object", "properties": {"q": {"type": 7}}}),
        listed("deep", schema=_deep(5000)),
    ]
    with build(kept, hostile) as box:
        assert box.names == ["ok"]
    assert sum("is left out" in r.getMessage() for r in caplog.records) == len(hostile) - 1


def _deep(n: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(n):
        schema = {"type": "object", "properties": {"a": schema}}
    return schema


def test_a_server_that_lists_one_name_twice_is_refused(kept: mcp.MCPServer) -> None:
    with pytest.raises(ValueError, match="two tools are named 'twin'"):
        build(kept, [listed("twin"), listed("twin")])


def test_hints_of_the_wrong_type_count_as_absent(kept: mcp.MCPServer) -> None:
    trusted = mcp.stdio("x", name="t", trust_annotations=True)
    for value in ("true", 1, [True], {"x": 1}, None):
        hints = SimpleNamespace(read_only_hint=value, destructive_hint=None, idempotent_hint=value)
        rules = policy(trusted, "tool", hints)
        assert not rules.read_only and not rules.retry and rules.confirm, value
    rules = policy(trusted, "tool", "not annotations at all")
    assert (rules.read_only, rules.confirm, rules.retry) == (False, True, False)
    untrusted = policy(kept, "tool", SimpleNamespace(read_only_hint=True, idempotent_hint=True))
    assert (untrusted.read_only, untrusted.confirm, untrusted.retry) == (False, False, False)


def test_hostile_results_become_bounded_valid_text() -> None:
    parts = [
        SimpleNamespace(type="text", text="lone \ud800 surrogate"),
        SimpleNamespace(type="text", text=12),
        SimpleNamespace(type="image", mime_type=None, data="not base64!"),
        SimpleNamespace(type="audio", mime_type="audio/wav", data=None),
        SimpleNamespace(type="resource", resource=SimpleNamespace(uri="file:///a", text="inside")),
        SimpleNamespace(type="resource", resource=None),
        SimpleNamespace(type="resource_link", uri="file:///b", name=None),
        SimpleNamespace(type="<script>" * 100),
        "not a part",
    ]
    text = result_text(SimpleNamespace(content=parts, structured_content=None))
    assert "lone" in text and "[image: unknown type, 11 characters of data that is not base64]" in text
    assert "[a content part of type" in text and "inside" in text
    result = ts.ToolResult(sealed([("c1", "t", "{}")])[0], "ok", value=text)
    result.content.encode("utf-8")  # the lone surrogate no longer breaks the request
    huge = result_text(
        SimpleNamespace(content=[SimpleNamespace(type="text", text="x" * (RESULT_CHARS + 10))])
    )
    assert len(huge) < RESULT_CHARS + 200 and huge.endswith("are shown]")
    assert result_text(SimpleNamespace(content="a string", structured_content=None)) == ""
    assert result_text(None) == ""


def test_structured_content_that_is_no_json_or_too_big_falls_back_to_the_parts() -> None:
    parts = [SimpleNamespace(type="text", text="the parts")]
    for structured in ({"x": float("nan")}, {"x": object()}):
        value = _value("t", SimpleNamespace(content=parts, structured_content=structured, is_error=False))
        assert value == "the parts", structured
    big = {"x": "y" * (RESULT_CHARS + 1)}  # JSON, but too long: its text, cut, says so
    value = _value("t", SimpleNamespace(content=parts, structured_content=big, is_error=False))
    assert isinstance(value, str) and len(value) < RESULT_CHARS + 200 and value.endswith("are shown]")
    nested: Any = []
    for _ in range(100_000):
        nested = [nested]
    assert (
        _value("t", SimpleNamespace(content=parts, structured_content=nested, is_error=False)) == "the parts"
    )
    ok = _value("t", SimpleNamespace(content=parts, structured_content={"a": 1}, is_error=False))
    assert ok == {"a": 1} and json.dumps(ok)


def test_an_error_result_without_text_still_tells_the_model() -> None:
    with pytest.raises(ts.ToolError, match="the MCP server gave no details"):
        _value("t", SimpleNamespace(content=[], structured_content=None, is_error=True))
    # is_error must be True itself: a truthy string is no error flag, and the result is read as one
    assert _value("t", SimpleNamespace(content=[], structured_content=None, is_error="yes")) == ""


def test_a_call_to_a_server_that_never_started_is_an_error_saying_it_was_not_run(kept: mcp.MCPServer) -> None:
    with build(kept, [listed("search")]) as box:
        (result,) = box.execute(sealed([("c1", "search", '{"q": "x"}')], box.definitions()))
        assert result.status == "error" and "could not be reached" in result.content
        assert "was not run" in result.content
        (bad,) = box.execute(sealed([("c2", "search", '{"q": 5}')], box.definitions()))
        assert bad.reason == "invalid_arguments"  # checked against the kept schema, nothing sent


def test_hostile_server_descriptions_are_refused_when_they_are_made() -> None:
    with pytest.raises(ValueError, match="needs the command"):
        mcp.stdio("")
    with pytest.raises(TypeError, match="list of arguments"):
        mcp.stdio("python", "server.py")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="http"):
        mcp.http("file:///etc/passwd")
    with pytest.raises(TypeError, match="tool names"):
        mcp.http("http://127.0.0.1:1/mcp", read_only=[1])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="start_timeout"):
        mcp.stdio("python", start_timeout=0)
    with pytest.raises(TypeError, match=r"toolstitch\.mcp\.stdio"):
        ts.Toolbox(mcp=["python server.py"])  # type: ignore[list-item]
