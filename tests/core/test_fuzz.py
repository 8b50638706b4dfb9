"""Fuzzing ``Accumulator.feed`` with hostile chunk dicts (hypothesis).

Chunks here are what a broken or hostile server could send: wrong types anywhere, missing keys,
nested nulls, huge strings, unknown fields, in-band errors, mixed with plausible tool-call fragments
so that calls do open, stream and seal. For every such stream:

* ``feed`` and ``end`` never raise, and never fail internally (no ``internal_error`` anomaly: a
  repair path that crashes would silently drop the chunk);
* a call, once sealed, is never lost or rewritten: it stays in ``calls()`` with the same text,
  parsed value, id and name (a late fragment may only refuse it, with ``LateFragment``);
* a call becomes ``ready`` only in the feed of a chunk that finished its choice (or at a clean
  ``end``), and only with a name and arguments that a strict JSON parser reads as an object;
* the SDK's own chunk objects (built from the same dicts as ``openai.Stream`` builds them) give the
  same calls as the dicts.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from openai._models import construct_type
from openai.types.chat import ChatCompletionChunk

import toolstitch as ts
from tests.conftest import examples

HUGE = "x" * 5_000


def _nested(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = {"k": [value]}
    return value


DEEP = _nested(900)
"""A provider field nested far beyond what serialisation survives."""
HOSTILE_INDEXES = ["²", "①", "9" * 5000, True, False, 2**40, 10**400, float("nan"), float("inf"), "0x1"]
SURROGATES = ["\udc80", "\ud83d", "\ude00", 'a"\ud83d', '\ude00"}']
LIMITS = ts.Limits(max_argument_bytes=4_096, max_calls_per_choice=6, sample_chars=64)
"""Small bounds, so that huge strings and many calls reach the limit paths too."""
_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
    st.sampled_from(["", "null", "function", "FUNCTION", "0", "-1", "{", "}", '{"', HUGE, DEEP, *SURROGATES]),
    st.sampled_from(HOSTILE_INDEXES),
)
_json = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
_args_text = st.one_of(
    st.sampled_from(
        ["", "{", "}", '{"a": 1}', '{"a": ', "1}", '"x"', "[]", "null", '{"k": "v"}', HUGE, *SURROGATES]
    ),
    st.text(alphabet='{}[]":,\\ au0123456789e.-tn', max_size=16),
)


def _maybe(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """A value from ``strategy``, or any JSON value at all (a wrong type)."""
    return st.one_of(strategy, strategy, strategy, _json)


@st.composite
def _entries(draw: st.DrawFn) -> Any:
    """One ``delta.tool_calls`` entry: plausible keys with plausible or absurd values."""
    if draw(st.integers(0, 15)) == 0:
        return draw(_json)
    entry: dict[str, Any] = {}
    if draw(st.booleans()):
        entry["index"] = draw(
            _maybe(st.one_of(st.integers(0, 3), st.integers(0, 3), st.sampled_from(HOSTILE_INDEXES)))
        )
    if draw(st.booleans()):
        entry["id"] = draw(_maybe(st.sampled_from(["call_a", "call_b", "call_c", "", "null", 7, "c\udc80"])))
    if draw(st.booleans()):
        entry["type"] = draw(_maybe(st.sampled_from(["function", "", None])))
    if draw(st.integers(0, 4)):
        function: Any = {}
        if draw(st.booleans()):
            function["name"] = draw(_maybe(st.sampled_from(["f", "g", "", None, "null", "f\udc80"])))
        if draw(st.integers(0, 3)):
            function["arguments"] = draw(
                st.one_of(
                    _args_text,
                    _args_text,
                    _args_text,
                    st.dictionaries(st.text(max_size=3), _json),
                    st.sampled_from([{"a": {1, 2}}, {1: "x"}, {"a": object()}, DEEP]),
                )
            )
        entry["function"] = draw(_maybe(st.just(function)))
    if draw(st.integers(0, 5)) == 0:
        entry[draw(st.text(max_size=6))] = draw(_json)
    return entry


@st.composite
def _chunks(draw: st.DrawFn) -> Any:
    kind = draw(st.integers(0, 19))
    if kind == 0:
        return draw(_json)  # not even a chunk
    if kind == 1:
        return {"error": draw(_json)}  # an in-band error (or a falsy "error": ignored)
    delta: Any = {}
    if draw(st.booleans()):
        delta["tool_calls"] = draw(_maybe(st.lists(_entries(), max_size=3)))
    if draw(st.integers(0, 3)) == 0:
        delta["content"] = draw(_maybe(st.text(max_size=10)))
    if draw(st.integers(0, 5)) == 0:
        delta["role"] = draw(_maybe(st.just("assistant")))
    if draw(st.integers(0, 5)) == 0:
        delta[draw(st.sampled_from(["reasoning", "reasoning_content", "refusal", "function_call", "x"]))] = (
            draw(_json)
        )
    choice: Any = {"delta": draw(_maybe(st.just(delta)))}
    if draw(st.integers(0, 5)):
        choice["index"] = draw(_maybe(st.integers(0, 1)))
    if draw(st.integers(0, 4)) == 0:
        choice["finish_reason"] = draw(_maybe(st.sampled_from(["tool_calls", "stop", "length", "", None])))
    chunk: dict[str, Any] = {"choices": draw(_maybe(st.just([choice])))}
    for key in ("id", "model", "created", "usage", "object"):
        if draw(st.integers(0, 3)) == 0:
            chunk[key] = draw(_json)
    if draw(st.integers(0, 5)) == 0:
        chunk[draw(st.text(max_size=6))] = draw(_json)
    return chunk


def _finishes(chunk: Any) -> set[int]:
    """The choices a chunk gives a finish_reason, read as leniently as toolstitch reads them."""
    if not isinstance(chunk, dict) or chunk.get("error") or not isinstance(chunk.get("choices"), list):
        return set()
    out = set()
    for choice in chunk["choices"]:
        if (
            isinstance(choice, dict)
            and isinstance(choice.get("finish_reason"), str)
            and choice["finish_reason"]
        ):
            index = choice.get("index")
            out.add(index if type(index) is int and index >= 0 else 0)
    return out


def _snapshot(call: ts.ToolCall) -> tuple[Any, ...]:
    return (call.arguments, json.dumps(call.parsed, sort_keys=True, default=repr), call.id, call.name)


def _same(now: tuple[Any, ...], then: tuple[Any, ...]) -> bool:
    """Equal, except that an id unusable at seal may have been synthesized since: none at all, or
    one holding a lone surrogate, which no request can carry back (``core/_route.py``'s
    ``ensure_ids`` replaces both when the message needs its ids)."""
    unusable = then[2] is None or (isinstance(then[2], str) and _lone_surrogate(then[2]))
    return now == then or (unusable and now[:2] == then[:2] and now[3] == then[3])


def _lone_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _check_ready(call: ts.ToolCall) -> None:
    assert call.name, call
    call.name.encode("utf-8")  # valid Unicode: a ready call holds exactly what a tool can receive
    call.arguments.encode("utf-8")
    value = json.loads(call.arguments, parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))
    assert isinstance(value, dict)
    assert value == call.parsed


def _drive(acc: ts.Accumulator, stream: list[Any], originals: list[Any], error: bool) -> None:
    sealed: dict[int, tuple[ts.ToolCall, tuple[Any, ...], str]] = {}
    for chunk, original in zip(stream, originals, strict=True):
        before = {id(c) for c in acc.calls() if c.ready}
        acc.feed(chunk)
        finished = _finishes(original)
        for call in acc.calls():
            if call.ready and id(call) not in before:
                assert call.choice in finished, "a call became ready without its choice finishing"
                _check_ready(call)
        _check_sealed_kept(acc, sealed)
    acc.end(ConnectionError("cut") if error else None)
    _check_sealed_kept(acc, sealed)
    for call in acc.calls():
        assert call.status != "open"
        if call.ready:
            _check_ready(call)
            assert not error or id(call) in sealed
    assert "internal_error" not in {a.code for a in acc.anomalies}, acc.anomalies


def _check_sealed_kept(
    acc: ts.Accumulator, sealed: dict[int, tuple[ts.ToolCall, tuple[Any, ...], str]]
) -> None:
    present = {id(c) for c in acc.calls()}
    for key, (call, snap, status) in sealed.items():
        assert key in present, "a sealed call was lost"
        assert _same(_snapshot(call), snap), "a sealed call was rewritten"
        if call.status != status:
            assert status == "ready" and call.status == "invalid"
            assert isinstance(call.error, ts.errors.LateFragment)
    for call in acc.calls():
        if call.sealed and id(call) not in sealed:
            sealed[id(call)] = (call, _snapshot(call), call.status)


def _sdk_object(chunk: Any) -> Any:
    """The chunk as ``openai.Stream`` would build it, when it is an object at all."""
    if not isinstance(chunk, dict):
        return chunk
    return construct_type(type_=ChatCompletionChunk, value=chunk)


@settings(
    max_examples=examples(300),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(st.lists(_chunks(), max_size=12), st.booleans(), st.booleans())
def test_feed_survives_hostile_chunks_and_keeps_its_promises(
    stream: list[Any], error: bool, recover: bool
) -> None:
    plain = ts.Accumulator(recover_text_tool_calls=recover, limits=LIMITS)
    _drive(plain, stream, stream, error)
    objects = ts.Accumulator(recover_text_tool_calls=recover, limits=LIMITS)
    _drive(objects, [_sdk_object(c) for c in stream], stream, error)


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(_entries(), min_size=1, max_size=8), st.sampled_from(["tool_calls", "stop"]))
def test_fragments_only_streams_seal_every_call(entries: list[Any], reason: str) -> None:
    """Fragments alone, then a finish_reason: every call is sealed, none is left open."""
    acc = ts.Accumulator()
    for entry in entries:
        acc.feed({"choices": [{"index": 0, "delta": {"tool_calls": [entry]}}]})
    acc.feed({"choices": [{"index": 0, "delta": {}, "finish_reason": reason}]})
    for call in acc.calls():
        assert call.sealed
        if call.ready:
            _check_ready(call)
    acc.end()
    assert "internal_error" not in {a.code for a in acc.anomalies}
    completion = acc.get_final_completion()
    ids = [c.id for c in completion.choices[0].message.tool_calls or []]
    assert all(isinstance(i, str) and i for i in ids)
    assert len(set(ids)) == len(ids)


@settings(
    max_examples=examples(200),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    st.lists(_chunks(), max_size=12),
    st.sampled_from(["none", "auto", {"type": "function", "function": {"name": "f"}}, None]),
    st.sampled_from([False, True, None]),
)
def test_the_request_contract_holds_for_every_stream(stream: list[Any], choice: Any, parallel: Any) -> None:
    """Whatever arrives: no ready call under tool_choice="none", only f when f is forced, at most one
    ready call per choice (the first) under parallel_tool_calls=False; the completion serialises."""
    acc = ts.Accumulator(tool_choice=choice, parallel_tool_calls=parallel, limits=LIMITS)
    for chunk in stream:
        acc.feed(chunk)
    acc.end()
    for index in {c.choice for c in acc.calls()}:
        ready = [c for c in acc.calls(index) if c.ready]
        for call in ready:
            _check_ready(call)
        if choice == "none":
            assert not ready
        if isinstance(choice, dict):
            assert all(c.name == "f" for c in ready)
        if parallel is False:
            assert len(ready) <= 1
    assert "internal_error" not in {a.code for a in acc.anomalies}
    try:
        completion = acc.get_final_completion()
    except ts.errors.IncompleteStreamError as exc:
        completion = exc.partial
    completion.model_dump(warnings=False)
