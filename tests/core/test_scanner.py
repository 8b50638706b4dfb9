"""``core._scanner``: the incremental JSON scanner (never parses; says early what it can)."""

from __future__ import annotations

import pytest

from toolstitch.core._scanner import JSONScanner


def scan(*pieces: str) -> JSONScanner:
    s = JSONScanner()
    for p in pieces:
        s.feed(p)
    return s


def test_complete_only_at_the_closing_bracket_of_the_top_level_value() -> None:
    s = scan('{"a": [1, {"b": "}"}', "]")
    assert not s.complete and s.started
    s.feed("}")
    assert s.complete and s.complete_at == len('{"a": [1, {"b": "}"}]}')
    s.feed("  \n")
    assert s.complete and s.error is None


@pytest.mark.parametrize(
    "pieces",
    [("{", '"a": "\\', 'u00e9"}'), ('{"a', '\\"', 'b": 1}'), ('{"k": "\\u4e', '2d"}'), ("{}",)],
)
def test_escapes_cut_anywhere_are_followed(pieces: tuple[str, ...]) -> None:
    s = scan(*pieces)
    assert s.error is None and s.complete


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("[1]", "starting with '{'"),
        ('{"a": 1]', "unexpected"),
        ('{"a": "\\x"}', "invalid escape"),
        ('{"a": "\\u12G4"}', "invalid \\u escape"),
        ('{"a": "\x01"}', "control character"),
        ('{"a": 1}{"b": 2}', "after the complete"),
    ],
)
def test_text_that_cannot_become_json_is_malformed_at_once(text: str, why: str) -> None:
    s = scan(text)
    assert s.error is not None and why in s.error
    assert not s.complete and s.error_at is not None
    offset = s.offset
    s.feed("more")
    assert s.offset == offset + 4  # after an error further text is only counted


def test_in_string_and_in_array() -> None:
    s = scan('{"a": [')
    assert s.in_array and not s.in_string
    s.feed('"x')
    assert s.in_string
