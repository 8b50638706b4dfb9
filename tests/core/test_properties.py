"""What must hold for every input: re-chunking, interleaving and cutting (hypothesis)."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import toolstitch as ts
from tests.conftest import examples
from toolstitch.testing import chunk

# Argument values rich in what breaks naive mergers: quotes, backslashes, \uXXXX escapes (ensure_ascii
# below turns non-ASCII into them), multi-byte characters, emoji (surrogate pairs when escaped).
_text = st.text(
    alphabet=st.sampled_from([*'ab "\\/\n\t{}[]:,', "é", "深", "圳", "😀", "\u2028", "\x01"]),
    max_size=12,
)
_scalar = st.one_of(st.none(), st.booleans(), st.integers(-(10**6), 10**6), _text)
_value = st.recursive(
    _scalar,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_text, inner, max_size=3),
    max_leaves=8,
)
_arguments = st.dictionaries(_text, _value, max_size=4)


@st.composite
def _call_texts(draw: st.DrawFn) -> tuple[list[dict[str, Any]], list[str]]:
    objects = draw(st.lists(_arguments, min_size=1, max_size=3))
    texts = [json.dumps(o, ensure_ascii=draw(st.booleans())) for o in objects]
    return objects, texts


def _cuts(draw: st.DrawFn, text: str) -> list[str]:
    """Cut ``text`` at arbitrary character positions (inside escapes and multi-char sequences too)."""
    points = sorted(set(draw(st.lists(st.integers(0, len(text)), max_size=8))))
    pieces, last = [], 0
    for p in [*points, len(text)]:
        pieces.append(text[last:p])
        last = p
    return pieces


def _entry(index: int, *, header: bool, args: str) -> dict[str, Any]:
    entry: dict[str, Any] = {"index": index, "function": {"arguments": args}}
    if header:
        entry.update(id=f"call_{index}", type="function")
        entry["function"]["name"] = f"tool_{index}"
    return entry


@st.composite
def _streams(draw: st.DrawFn) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """A stream of chunks carrying several calls, re-chunked and interleaved at random."""
    objects, texts = draw(_call_texts())
    queues = [
        [_entry(i, header=True, args="")] + [_entry(i, header=False, args=p) for p in _cuts(draw, t)]
        for i, t in enumerate(texts)
    ]
    fragments: list[dict[str, Any]] = []
    while any(queues):
        live = [q for q in queues if q]
        queue = live[draw(st.integers(0, len(live) - 1))]
        fragments.append(queue.pop(0))
    # Several fragments may share a chunk (never two of the same call out of order).
    chunks: list[dict[str, Any]] = [chunk(delta={"role": "assistant"})]
    i = 0
    while i < len(fragments):
        take = draw(st.integers(1, 3))
        chunks.append(chunk(delta={"tool_calls": fragments[i : i + take]}))
        i += take
    chunks.append(chunk(delta={}, finish_reason="tool_calls"))
    return objects, chunks


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_streams())
def test_any_rechunking_and_interleaving_gives_the_same_calls(case: tuple[list[Any], list[Any]]) -> None:
    objects, chunks = case
    acc = ts.Accumulator()
    for c in chunks:
        acc.feed(c)
    calls = acc.tool_calls
    assert [c.id for c in calls] == [f"call_{i}" for i in range(len(objects))]
    assert [c.status for c in calls] == ["ready"] * len(objects)
    assert [c.parsed for c in calls] == objects
    # Headers may arrive out of index order here (index 1 first): that is noted, nothing else is.
    assert {a.code for a in acc.anomalies} <= {"index_gap", "index_not_from_zero"}


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_streams(), st.data())
def test_a_stream_cut_anywhere_never_yields_an_unsealed_ready_call(
    case: tuple[list[Any], list[Any]], data: st.DataObject
) -> None:
    _, chunks = case
    cut = data.draw(st.integers(0, len(chunks) - 1))  # the finish chunk is the last one: never reached
    acc = ts.Accumulator()
    for c in chunks[:cut]:
        acc.feed(c)
        assert not any(call.ready for call in acc.calls())
    acc.end()
    assert all(call.status == "incomplete" for call in acc.calls())


@settings(max_examples=examples(200), deadline=None)
@given(_call_texts(), st.data())
def test_scanner_agrees_with_the_parser_on_every_prefix(
    case: tuple[Any, list[str]], data: st.DataObject
) -> None:
    from toolstitch.text._scanner import JSONScanner

    _, texts = case
    text = texts[0]
    scanner = JSONScanner()
    for piece in _cuts(data.draw, text):
        scanner.feed(piece)
        assert scanner.error is None  # a prefix of valid JSON is never called malformed
    assert scanner.complete and scanner.complete_at == len(text)
