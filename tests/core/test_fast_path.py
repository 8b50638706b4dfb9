"""The fast path and the general path agree exactly (issue 12).

``Accumulator`` reads the common shape of a chunk on a fast path (``core/_fast.py``) and everything
else on the general path (``_read.py``, ``_route.py``). Here every stream is fed three times: with
the fast path (through ``feed``, which returns events), with the fast path through the quiet entry
the wrapped stream uses (``_feed_quiet``), and with the fast path switched off. Everything the
accumulators hold must be the same: each call's identity, text, status, parsed value, error,
anomalies and counts, the stream's anomalies, finish reasons and usage, the events (for ``feed``),
and the final completion (or the ``IncompleteStreamError`` with its partial completion).

Streams: the provider corpus (``cassettes/providers``), the hostile chunks of
``test_fuzz.py``, mutated transcripts as in ``test_adversarial_mutations.py``, and
hypothesis-made re-chunkings and interleavings of tool calls (``test_properties.py``), as plain
dicts and as the SDK's own ``ChatCompletionChunk`` objects. Timestamps are compared by presence
only: the fast path reads the clock only when it writes a timestamp.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import toolstitch as ts
import toolstitch.core._accumulator as accumulator_module
import toolstitch.core._fast as fast_module
import toolstitch.core._scanner as scanner_module
from tests.conftest import examples
from tests.core.test_adversarial_mutations import STREAMS, _mutate
from tests.core.test_fuzz import LIMITS, _chunks, _sdk_object
from tests.core.test_properties import _streams
from toolstitch.core._events import Event
from toolstitch.core._fast import take_common_chunk

_TIMES = ("opened_at", "first_argument_at", "arguments_complete_at", "sealed_at")


def _error(error: BaseException | None) -> Any:
    if error is None:
        return None
    return (type(error).__name__, str(error), getattr(error, "raw", None))


def _anomaly(note: ts.Anomaly) -> Any:
    return (note.code, note.message, note.choice, note.call_index, repr(note.raw)[:200])


def _call(call: ts.ToolCall) -> Any:
    metrics = call.metrics
    return (
        call.choice,
        call.index,
        call.slot,
        call.id,
        call.name,
        call.type,
        call.arguments,
        call.chars,
        call.status,
        repr(call.parsed),
        _error(call.error),
        [_anomaly(a) for a in call.anomalies],
        repr(call.extra),
        metrics.fragments,
        metrics.bytes,
        [getattr(metrics, t) is None for t in _TIMES],
        call.scanner.complete,
        call.scanner.error,
        call.scanner.error_at,
        call.scanner.offset,
    )


def _event(event: Event) -> Any:
    fields: list[Any] = [type(event).__name__]
    for name in ("choice", "text", "field", "finish_reason", "reason", "position"):
        if hasattr(event, name):
            fields.append((name, getattr(event, name)))
    call = getattr(event, "call", None)
    if call is not None:
        fields.append(("call", call.choice, call.slot))
    note = getattr(event, "anomaly", None)
    if note is not None:
        fields.append(_anomaly(note))
    if hasattr(event, "error"):
        fields.append(_error(event.error))
    return tuple(fields)


def _state(acc: ts.Accumulator) -> Any:
    try:
        completion: Any = acc.get_final_completion().model_dump(mode="json")
    except ts.IncompleteStreamError as exc:
        completion = ("incomplete", str(exc), exc.partial.model_dump(mode="json", warnings=False))
    return (
        [_call(c) for c in acc.calls()],
        [_anomaly(a) for a in acc.anomalies],
        acc.finish_reasons,
        repr(acc.usage),
        acc.metrics.chunks,
        acc.metrics.first_tool_call_at is None,
        acc.dropped_choices,
        repr(completion),
    )


@contextlib.contextmanager
def python_only() -> Iterator[None]:
    """Run the Python fast path and scanner (the references) even where the compiled twins
    (``_speedups.c``) are built."""
    saved = accumulator_module.take_chunk, scanner_module._native_scan
    accumulator_module.take_chunk = take_common_chunk
    scanner_module._native_scan = None
    try:
        yield
    finally:
        accumulator_module.take_chunk, scanner_module._native_scan = saved


NATIVE = fast_module.take_chunk is not take_common_chunk
"""The compiled fast path is in use (built, and not switched off)."""


def _run(chunks: list[Any], mode: str, error: bool = False, **options: Any) -> Any:
    if mode.endswith("-python"):
        with python_only():
            return _run(chunks, mode.removesuffix("-python"), error, **options)
    acc = ts.Accumulator(**options)
    if mode == "general":
        acc._fast_path = False
    events: list[Any] = []
    for chunk in chunks:
        if mode == "quiet":
            assert acc._feed_quiet(chunk) is None
        else:
            events.extend(_event(e) for e in acc.feed(chunk))
        if mode != "quiet":
            # The live view after every chunk, as a UI polling the calls would see it.
            events.append(tuple(_call(c) for c in acc.calls()))
    events.extend(_event(e) for e in acc.end(RuntimeError("cut") if error else None))
    internal = [a for a in acc.anomalies if a.code == "internal_error"]
    assert not internal, internal
    return _state(acc), events


def check_same(chunks: list[Any], error: bool = False, **options: Any) -> None:
    """Feed ``chunks`` through every path (the same objects: the accumulator never changes a chunk):
    the general path, the fast path with and without events, and, where the compiled twins are
    built, the Python fast path too (its reference)."""
    general, general_events = _run(chunks, "general", error, **options)
    for suffix in ("", "-python") if NATIVE else ("",):
        fast, fast_events = _run(chunks, "fast" + suffix, error, **options)
        quiet, _ = _run(chunks, "quiet" + suffix, error, **options)
        assert fast == general
        assert fast_events == general_events
        assert quiet == general


def _as_objects(chunks: list[Any]) -> list[Any]:
    return [_sdk_object(c) for c in chunks]


@pytest.mark.parametrize("name", [name for name, _, _ in STREAMS])
def test_the_conformance_corpus_reads_the_same_on_both_paths(name: str) -> None:
    _, chunks, tools = next(s for s in STREAMS if s[0] == name)
    for stream in (chunks, _as_objects(chunks)):
        check_same(stream)
        check_same(stream, tools=tools)
        check_same(stream, error=True)
        check_same(stream, tools=tools, limits=ts.Limits(max_argument_bytes=64, max_stream_bytes=200))


@settings(
    max_examples=examples(200),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(st.integers(0, max(0, len(STREAMS) - 1)), st.data())
def test_mutated_transcripts_read_the_same_on_both_paths(index: int, data: st.DataObject) -> None:
    _, chunks, tools = STREAMS[index]
    mutated = _mutate(copy.deepcopy(chunks), data)
    check_same(mutated, tools=tools)
    check_same(_as_objects(mutated), tools=tools)


@settings(
    max_examples=examples(300),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(st.lists(_chunks(), max_size=12), st.booleans())
def test_hostile_chunks_read_the_same_on_both_paths(stream: list[Any], error: bool) -> None:
    check_same(stream, error, limits=LIMITS)
    check_same(_as_objects(stream), error, limits=LIMITS)


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_streams(), st.data())
def test_rechunked_and_interleaved_calls_read_the_same_on_both_paths(
    case: tuple[list[Any], list[Any]], data: st.DataObject
) -> None:
    _, chunks = case
    # Cut anywhere (a stream that ends early) and, sometimes, with a small byte budget, so the
    # fast path meets its limits too.
    cut = data.draw(st.integers(1, len(chunks)))
    limits = data.draw(st.sampled_from([None, ts.Limits(max_argument_bytes=24, max_stream_bytes=60)]))
    for stream in (chunks, chunks[:cut]):
        check_same(stream, limits=limits)
        check_same(_as_objects(stream), limits=limits)


@settings(max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_streams(), st.data())
def test_cumulative_resends_read_the_same_on_both_paths(
    case: tuple[list[Any], list[Any]], data: st.DataObject
) -> None:
    """Providers that resend the text so far with every piece (Q17): the chain check must agree."""
    _, chunks = case
    seen: dict[int, str] = {}
    resent = []
    for item in chunks:
        item = copy.deepcopy(item)
        for entry in item["choices"][0]["delta"].get("tool_calls") or ():
            text = entry["function"]["arguments"]
            if text and data.draw(st.booleans()):
                seen[entry["index"]] = seen.get(entry["index"], "") + text
                entry["function"]["arguments"] = seen[entry["index"]]
        resent.append(item)
    check_same(resent)
    check_same(_as_objects(resent))


def test_the_common_shape_takes_the_fast_path() -> None:
    """The test above compares something: plain continuation chunks are taken by the fast path."""
    taken = 0
    original = accumulator_module.take_chunk

    def counting(acc: Any, chunk: Any, want_events: bool) -> Any:
        nonlocal taken
        result = original(acc, chunk, want_events)
        taken += result is not None
        return result

    calls = [(f"call_{i}", "f", '{"a": "' + "x" * 40 + '", "b": [1, 2]}') for i in range(3)]
    chunks = ts.testing.tool_call_chunks(calls, pieces=10)
    accumulator_module.take_chunk = counting  # type: ignore[assignment]
    try:
        for stream in (chunks, _as_objects(chunks)):
            taken = 0
            acc = ts.Accumulator()
            for c in stream:
                acc._feed_quiet(c)
            assert all(c.ready for c in acc.tool_calls)
            assert taken >= 20, taken
    finally:
        accumulator_module.take_chunk = original


_STRING_TEXT = st.lists(
    st.sampled_from([*list('ab é"\\/bfnrtu0123456789aAfF{}[]:,\x00\x1f\t\n\u2028'), "\\u00e9", '\\"', "\\n"]),
    max_size=12,
).map("".join)


@settings(max_examples=examples(400), deadline=None)
@given(before=_STRING_TEXT, text=_STRING_TEXT)
def test_the_string_shortcut_changes_what_the_scanner_would(before: str, text: str) -> None:
    """The fast path skips ``JSONScanner.feed`` for text inside a string that its pattern takes:
    whenever it does, feeding the text to a scanner in that state changes nothing but the offset."""
    from toolstitch.core._fast import _STRING_BODY
    from toolstitch.core._scanner import JSONScanner

    assert _STRING_BODY('a \\"q\\" \\u00e9 \\t é') and not _STRING_BODY("a\\") and not _STRING_BODY('a"')
    assert not _STRING_BODY("\\u00e") and not _STRING_BODY("\\x") and not _STRING_BODY("\x1f")
    scanner = JSONScanner()
    scanner.feed('{"k": "' + before)
    if not (scanner._in_string and not scanner._escape and not scanner._hex_left) or scanner.error:
        return
    if _STRING_BODY(text) is None:
        return
    state = {slot: copy.copy(getattr(scanner, slot)) for slot in JSONScanner.__slots__}
    scanner.feed(text)
    after = {slot: getattr(scanner, slot) for slot in JSONScanner.__slots__}
    assert after.pop("offset") == state.pop("offset") + len(text)
    assert after == state


def test_a_long_call_keeps_its_text_in_batches() -> None:
    """A call of thirty thousand pieces holds a few dozen strings (joined 1,024 at a time),
    on both paths; the text is whole and in order."""
    from toolstitch.core._call import _BATCH

    pieces = ['{"t": "'] + [f"{i % 10}" for i in range(30_000)] + ['"}']
    chunks = ts.testing.tool_call_chunks([("c1", "f", "".join(pieces))], pieces=len(pieces))
    for fast in (True, False):
        acc = ts.Accumulator()
        acc._fast_path = fast
        for c in chunks:
            acc.feed(c)
        call = acc.tool_calls[0]
        assert len(call._parts) < _BATCH and 0 < len(call._done) <= 30_000 // _BATCH + 2
        acc.end()
        assert call.ready and call.arguments == "".join(pieces)
