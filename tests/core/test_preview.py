"""``ToolCall.preview``: display-only partial arguments (issue 13), checked for every prefix.

What must hold (hypothesis):

* for every prefix of a valid JSON object, read at once or piece by piece, the preview is
  ``None`` before the ``{`` and then consistent with the final value: every key is a key of the
  final object, every finished value equals the final one, the value still being written is a
  prefix of it (strings), or a prefix-consistent container; nothing else appears;
* reading piece by piece gives the same preview as reading the same prefix at once;
* once the call is ``ready`` the preview is ``parsed``;
* hostile text and hostile streams never make it raise.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import toolstitch as ts
from tests.conftest import examples
from tests.core.test_fuzz import LIMITS, _chunks, _sdk_object
from tests.core.test_properties import _streams
from toolstitch.testing import chunk, tool_call_chunks
from toolstitch.text._preview import Preview

_text = st.text(
    alphabet=st.sampled_from([*'ab "\\/\n\t{}[]:,-.e0', "é", "深", "😀", "\u2028", "\x01", "\ud83d"]),
    max_size=10,
)
_scalar = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**12), 10**12),
    st.floats(allow_nan=False, allow_infinity=False),
    _text,
)
_value = st.recursive(
    _scalar,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_text, inner, max_size=4),
    max_leaves=12,
)
_objects = st.dictionaries(_text, _value, max_size=5)


@st.composite
def _documents(draw: st.DrawFn) -> tuple[dict[str, Any], str]:
    value = draw(_objects)
    text = json.dumps(
        value,
        ensure_ascii=draw(st.booleans()),
        indent=draw(st.sampled_from([None, 0, 2])),
        separators=draw(st.sampled_from([None, (",", ":")])),
    )
    return json.loads(text), text  # the final value as the strict parser reads it


def consistent(preview: Any, final: Any) -> bool:
    """``preview`` shows only what ``final`` holds: finished members equal, the last one a prefix."""
    if type(preview) is dict:
        if type(final) is not dict:
            return False
        keys = list(preview)
        if any(k not in final for k in keys):
            return False
        if any(preview[k] != final[k] for k in keys[:-1]):
            return False
        return not keys or consistent(preview[keys[-1]], final[keys[-1]])
    if type(preview) is list:
        if type(final) is not list or len(preview) > len(final):
            return False
        if not preview:
            return True
        if preview[:-1] != final[: len(preview) - 1]:
            return False
        return consistent(preview[-1], final[len(preview) - 1])
    if type(preview) is str:
        return type(final) is str and final.startswith(preview)
    return type(preview) is type(final) and preview == final


def _cuts(draw: st.DrawFn, text: str) -> list[str]:
    points = sorted(set(draw(st.lists(st.integers(0, len(text)), max_size=12))))
    pieces, last = [], 0
    for p in [*points, len(text)]:
        pieces.append(text[last:p])
        last = p
    return pieces


@settings(max_examples=examples(400), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_documents())
def test_every_prefix_previews_only_what_the_final_value_holds(doc: tuple[dict[str, Any], str]) -> None:
    final, text = doc
    incremental = Preview()
    for end in range(len(text) + 1):
        prefix = text[:end]
        at_once = Preview().read(prefix)
        step = incremental.read(text[end - 1 : end] if end else "")
        assert step == at_once, (prefix, step, at_once)
        if "{" not in prefix:
            assert at_once is None
            continue
        assert at_once is not None and consistent(at_once, final), (prefix, at_once, final)
    assert Preview().read(text) == final


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_documents(), st.data())
def test_a_streamed_call_previews_consistently_and_ends_as_parsed(
    doc: tuple[dict[str, Any], str], data: st.DataObject
) -> None:
    final, text = doc
    pieces = _cuts(data.draw, text)
    stream = tool_call_chunks([("call_0", "f", "")], pieces=1, finish_reason=None)
    stream += [
        ts.testing.chunk(delta={"tool_calls": [{"index": 0, "function": {"arguments": p}}]}) for p in pieces
    ]
    stream.append(chunk(delta={}, finish_reason="tool_calls"))
    every = data.draw(st.integers(1, 4))
    acc = ts.Accumulator()
    seen = ""
    for number, item in enumerate(stream):
        acc.feed(_sdk_object(item) if number % 2 else item, events=False)
        calls = acc.tool_calls
        if not calls or number % every:
            continue
        call = calls[0]
        preview = call.preview
        seen = call.arguments
        if call.status == "open":
            assert call.parsed is None
            assert preview == Preview().read(seen)
            if preview is not None:
                assert consistent(preview, final), (seen, preview)
    call = acc.tool_calls[0]
    if call.status == "invalid":  # a lone surrogate sent raw (ensure_ascii=False): refused, by design
        assert "lone UTF-16 surrogate" in str(call.error)
        return
    assert call.status == "ready"
    assert call.preview == call.parsed == final
    assert call.preview is call.parsed


def test_what_a_preview_leaves_out() -> None:
    cases = {
        "": None,
        "  ": None,
        "{": {},
        '{"ci': {},
        '{"city"': {},
        '{"city":': {},
        '{"city": "': {"city": ""},
        '{"city": "San F': {"city": "San F"},
        '{"city": "San F\\': {"city": "San F"},
        '{"city": "San F\\u00': {"city": "San F"},
        '{"city": "Caf\\u00e9", "n": 12': {"city": "Café"},
        '{"city": "Caf\\u00e9", "n": 12,': {"city": "Café", "n": 12},
        '{"n": -': {},
        '{"n": 1.': {},
        '{"n": 1.5e': {},
        '{"ok": tr': {},
        '{"ok": true': {"ok": True},
        '{"x": null, "l": [1, 2': {"x": None, "l": [1]},
        '{"l": [{"a": "b"}, {"a"': {"l": [{"a": "b"}, {}]},
        '{"e": "\\ud83d': {"e": ""},
        '{"e": "\\ud83d\\ude00': {"e": "😀"},
    }
    for text, expected in cases.items():
        assert Preview().read(text) == expected, text


def test_text_that_cannot_become_json_freezes_the_preview() -> None:
    assert Preview().read('{"a": 1, "b": x, "c": 2}') == {"a": 1}
    assert Preview().read("[1, 2]") is None
    assert Preview().read('{"a": "\\x", "b": 1}') == {"a": ""}
    assert Preview().read('{"a": "b\x01c"}') == {"a": "b"}
    assert Preview().read('{"a": 1}}{"b": 2}') == {"a": 1}
    deep = '{"a": ' + "[" * 200
    assert Preview().read(deep) is not None  # bounded depth: frozen, not a RecursionError


def test_a_returned_preview_does_not_change_later() -> None:
    acc = ts.Accumulator()
    stream = tool_call_chunks([("c", "f", '{"a": "xy", "b": [1, 2, 3]}')], pieces=8)
    first: Any = None
    kept = ""
    for item in stream:
        acc.feed(item)
        if first is None and acc.tool_calls and acc.tool_calls[0].preview:
            first = acc.tool_calls[0].preview
            kept = json.dumps(first)
        elif first is not None:
            assert acc.tool_calls[0].preview is not first
    assert first is not None and json.dumps(first) == kept
    assert acc.tool_calls[0].preview == {"a": "xy", "b": [1, 2, 3]}


@settings(max_examples=examples(400), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.text(max_size=20), max_size=12))
def test_hostile_text_never_raises(pieces: list[str]) -> None:
    preview = Preview()
    for piece in pieces:
        value = preview.read(piece)
        assert value is None or type(value) is dict
    once = Preview().read("".join(pieces))
    assert once is None or type(once) is dict


@settings(
    max_examples=examples(200),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(st.lists(_chunks(), max_size=12))
def test_hostile_streams_never_make_a_preview_raise(stream: list[Any]) -> None:
    for chunks in (stream, [_sdk_object(c) for c in stream]):
        acc = ts.Accumulator(limits=LIMITS)
        for item in chunks:
            acc.feed(item)
            for call in acc.calls():
                preview = call.preview
                assert preview is None or type(preview) is dict
                if call.status == "ready":
                    assert preview is call.parsed
        acc.end()
        for call in acc.calls():
            assert call.preview is None or type(call.preview) is dict


@settings(max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_streams())
def test_interleaved_calls_each_end_with_preview_equal_to_parsed(case: tuple[list[Any], list[Any]]) -> None:
    objects, chunks = case
    acc = ts.Accumulator()
    for item in chunks:
        acc.feed(item)
        for call in acc.tool_calls:
            preview = call.preview
            if preview is not None and call.status == "open":
                assert consistent(preview, objects[call.index])
    assert [c.preview for c in acc.tool_calls] == objects
