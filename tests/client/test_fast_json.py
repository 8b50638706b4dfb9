"""``_json.loads`` is ``json.loads``: the same value (types and ``repr`` at every level) or the same
exception (type and message), for every text, on the installed pydantic-core.

Hypothesis writes JSON documents (every value type, duplicate keys, escapes, surrogates, numbers at
the edges of ``int`` and ``float``) in every spelling ``json.dumps`` has, and arbitrary text around
the grammar's edges; both parsers must agree on all of it.
"""

from __future__ import annotations

import json
from typing import Any

import pydantic_core
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import examples
from toolstitch.client import _json
from toolstitch.client._json import SAMPLE_TEXTS, loads, parser_agrees


def _outcome(parse: Any, text: str) -> tuple[Any, ...]:
    try:
        value = parse(text)
    except Exception as exc:
        return ("error", type(exc), str(exc))
    return ("value", _json._typed(value))


def _same(text: str) -> None:
    assert _outcome(loads, text) == _outcome(json.loads, text), text


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(-(10**40), 10**40)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4),
    max_leaves=12,
)

PIECES = [
    "{", "}", "[", "]", ",", ":", '"', '"a"', "\\", "\\u", "\\ud800", "\\udc00", "\\n", "\x00", "\x1f",
    " ", "\t", "\n", "\r", "\x0b", "\xa0", "\ufeff", "0", "01", "-", "+", ".", "e", "E", "1e400", "9" * 30,
    "NaN", "Infinity", "-Infinity", "nan", "true", "false", "null", "tru", "é", "😀", "\ud800",
]  # fmt: skip
near_json = st.lists(st.sampled_from(PIECES), max_size=14).map("".join)


@settings(max_examples=examples(1000))
@given(value=json_values, ascii=st.booleans(), compact=st.booleans())
def test_json_documents_parse_as_json_loads_parses_them(value: Any, ascii: bool, compact: bool) -> None:
    separators = (",", ":") if compact else (", ", ": ")
    _same(json.dumps(value, ensure_ascii=ascii, separators=separators))


@settings(max_examples=examples(1000))
@given(text=near_json)
def test_text_near_the_grammar_parses_or_fails_as_json_loads(text: str) -> None:
    _same(text)


@settings(max_examples=examples(300))
@given(text=st.text(max_size=40))
def test_arbitrary_text_parses_or_fails_as_json_loads(text: str) -> None:
    _same(text)


def test_the_installed_pydantic_core_agrees_and_is_used() -> None:
    assert parser_agrees()
    loads("{}")
    assert _json._parse is pydantic_core.from_json


def test_every_sample_text_parses_as_json_loads() -> None:
    for text in SAMPLE_TEXTS:
        _same(text)


def test_every_rule_is_in_the_sample_texts() -> None:
    joined = "".join(SAMPLE_TEXTS)
    for piece in [
        '"a":1,"b":2,"a":3',
        "\\ud800",
        "NaN",
        "Infinity",
        "1e400",
        "4.9e-324",
        "\ufeff",
        "01",
        "+1",
    ]:
        assert piece in joined
    assert "9" * 4301 in SAMPLE_TEXTS and "[" * 300 + "]" * 300 in SAMPLE_TEXTS
    assert any("\n" in t and t.startswith('"') for t in SAMPLE_TEXTS)  # a control character in a string


@pytest.mark.parametrize(
    "wrong",
    [
        lambda text: {"a": 2} if text.startswith("{") else json.loads(text),  # another value
        lambda text: 1.0 if text.startswith("[1e400") else json.loads(text),  # another type
        lambda text: "\ufffd" if text == '"\\ud800"' else json.loads(text.replace("01", "1")),  # accepts more
    ],
)
def test_a_pydantic_core_that_parses_differently_is_not_used(
    wrong: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pydantic_core, "from_json", wrong)
    monkeypatch.setattr(_json, "_parse", _json._UNCHECKED)
    assert not parser_agrees()
    assert loads('{"a": 1}') == {"a": 1}
    assert _json._parse is None
    monkeypatch.undo()
    _json._parse = _json._UNCHECKED


def test_a_pydantic_core_without_from_json_keeps_json_loads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(pydantic_core, "from_json")
    monkeypatch.setattr(_json, "_parse", _json._UNCHECKED)
    assert loads("[1]") == [1]
    assert _json._parse is None
    monkeypatch.undo()
    _json._parse = _json._UNCHECKED
