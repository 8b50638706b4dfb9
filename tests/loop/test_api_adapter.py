"""The loop speaks each API through one adapter chosen once (``loop/_api.py``): no part of the loop
tests which API it runs (issue 28)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import toolstitch as ts
from toolstitch.loop._api import API_ADAPTERS, ChatAPI, LoopAPI, ResponsesAPI

LOOP = Path(ts.__file__).parent / "loop"


def test_no_api_flag_is_tested_through_the_loop() -> None:
    """Outside the adapters, nothing compares an ``api`` value or reads a ``responses`` flag."""
    found = []
    for path in sorted(LOOP.glob("*.py")):
        if path.name == "_api.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Attribute)
                and node.attr == "responses"
                and isinstance(node.ctx, ast.Load)
            ):
                value = node.value
                name = value.id if isinstance(value, ast.Name) else getattr(value, "attr", "")
                if name in ("self", "loop"):
                    found.append(f"{path.name}:{node.lineno} .responses")
            if isinstance(node, ast.Compare) and any(
                isinstance(c, ast.Constant) and c.value == "responses" for c in node.comparators
            ):
                left = node.left
                if isinstance(left, ast.Attribute) and left.attr == "api":
                    found.append(f"{path.name}:{node.lineno} api ==")
    assert found == []


def test_each_api_has_an_adapter_that_overrides_every_question() -> None:
    assert set(API_ADAPTERS) == {"chat", "responses"}
    asked = [n for n, v in vars(LoopAPI).items() if callable(v) and not n.startswith("_")]
    for adapter in (ChatAPI, ResponsesAPI):
        missing = [n for n in asked if n != "background" and vars(adapter).get(n) is None]
        assert missing == [], (adapter, missing)


def test_an_unknown_api_is_refused() -> None:
    with pytest.raises(ValueError, match="api must be"):
        ts.run(
            ts.wrap(__import__("openai").OpenAI(api_key="x", base_url="http://127.0.0.1:9")),
            model="m",
            messages=[{"role": "user", "content": "hi"}],
            toolbox=ts.Toolbox([]),
            api="soap",
        )  # type: ignore[arg-type]
