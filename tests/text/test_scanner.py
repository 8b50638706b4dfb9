"""``text._scanner``: the incremental JSON scanner (never parses; says early what it can)."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolstitch.text._scanner import JSONScanner


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


# Text biased towards what the scanner's one-match path for string bodies must get right: escapes
# (whole, cut, invalid), ``\u`` digits (hex or not), quotes, control characters.
_PIECES = st.sampled_from(
    [
        *('{"a": "', '"', "\\", "\\u", "00e9", "0", "G", "u", "n", "t", '\\"', "é"),
        *("\x01", "\x7f", "x", "}", ", ", '"b": '),
    ]
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_PIECES, max_size=40), st.data())
def test_any_cut_gives_the_verdict_of_one_character_at_a_time(pieces: list[str], data: st.DataObject) -> None:
    text = "".join(pieces)
    by_char = scan(*text)
    cuts = sorted(data.draw(st.sets(st.integers(0, len(text)), max_size=12)))
    bounds = [0, *cuts, len(text)]
    cut = scan(*(text[a:b] for a, b in itertools.pairwise(bounds)))
    whole = scan(text)
    for s in (cut, whole):
        assert (s.complete, s.complete_at, s.error, s.error_at, s.offset) == (
            by_char.complete,
            by_char.complete_at,
            by_char.error,
            by_char.error_at,
            by_char.offset,
        )
        assert (s.in_string, s.in_array) == (by_char.in_string, by_char.in_array)


def test_a_long_string_body_that_ends_in_a_quote_costs_one_pass() -> None:
    # The one-match path must not backtrack on a miss: a run of plain characters that a quote
    # ends is read once (``fullmatch`` on this pattern would take exponential time).
    s = scan('{"a": "')
    s.feed("a" * 200_000 + '"')
    s.feed("}")
    assert s.complete and s.error is None


def test_feed_says_when_the_value_closed_or_broke() -> None:
    s = JSONScanner()
    assert s.feed('{"a": "x') is False
    assert s.feed('\\"y"') is False
    assert s.feed("}") is True and s.complete
    t = JSONScanner()
    assert t.feed('{"a": "\\') is False
    assert t.feed("q") is True and t.error is not None
    assert t.feed("more") is False  # already broken: nothing new to say
