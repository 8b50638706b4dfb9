"""The hot exits are shortcuts, nothing more: a stream read with them is read exactly as without.

The reader hands a plain continuation to the owner (``CallOwner.fragment``) from two places: a
chunk whose one choice is nothing but that fragment (in ``Accumulator._read``), and a fragment the
router found a call for (the exit in ``Accumulator._read_fragment``), each only while no call of
the choice is watched for cumulative resends. With every choice watched, every fragment goes the
long way, through the router to the same entrance; that reading is the reference. The same SDK
chunk objects, read both ways, must give the same events, calls, anomalies and final completion:
streams built to reach the exits (continuations at open, sealed and unknown indexes, beside a
role, content, a finish, unknown fields, several entries, text with escapes, non-ASCII and lone
surrogates, limits
reached on the way) and every stream of the provider corpus.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from openai._models import construct_type
from openai.types.chat import ChatCompletionChunk

import toolstitch as ts
from tests.conftest import examples
from tests.corpus import CORPUS
from toolstitch.core._route import CallTable

SCHEMA = {
    "type": "object",
    "properties": {
        "path": {"type": "string"},
        "mode": {"type": "string", "enum": ["read", "write"]},
        "n": {"type": "integer"},
    },
    "required": ["path"],
    "additionalProperties": False,
}
TOOLS = [{"type": "function", "function": {"name": name, "parameters": SCHEMA}} for name in ("f", "g")]

_ENDS = st.sampled_from(['"}', "}", '{"path": "p"}', ' {"n": 1}', '"a"}{"n": 1}', '{"mode": "w', "rite"])
_TEXT = st.one_of(
    _ENDS,
    st.text(alphabet='{}[]":,\\ abu0123456789é€\ud83d\ude00\ud800', max_size=9),
    _ENDS,
)
"""Argument fragments: JSON punctuation, escapes, non-ASCII, a whole pair and a lone surrogate,
and the ends and whole values that make a call complete and a further value begin."""


def _chunk(delta: dict[str, Any], *, finish: Any = None, extra: dict[str, Any] | None = None) -> Any:
    choice: dict[str, Any] = {"index": 0, "delta": delta, "finish_reason": finish}
    chunk: dict[str, Any] = {
        "id": "c",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "m",
        "choices": [choice],
    }
    if extra:
        target = extra.pop("on")
        (choice if target == "choice" else delta if target == "delta" else chunk).update(extra)
    return chunk


def _entry(index: int, text: str, **header: Any) -> dict[str, Any]:
    function: dict[str, Any] = {"arguments": text}
    if "name" in header:
        function["name"] = header.pop("name")
    return {"index": index, "function": function, **header}


@st.composite
def _streams(draw: st.DrawFn) -> list[Any]:
    chunks: list[Any] = [_chunk({"role": "assistant"})]
    opened = draw(st.integers(1, 3))
    for i in range(opened):
        start = draw(st.sampled_from(["", "{", '{"path": "', '{"mode": "', '{"path": "p"']))
        chunks.append(
            _chunk({"tool_calls": [_entry(i, start, id=f"call_{i}", type="function", name="fg"[i % 2])]})
        )
    for _ in range(draw(st.integers(0, 30))):
        index = draw(st.integers(0, opened))  # ``opened`` itself: an index no call has
        entries = [_entry(index, draw(_TEXT))]
        if draw(st.integers(0, 9)) == 0:
            entries.append(_entry(draw(st.integers(0, opened)), draw(_TEXT)))
        delta: dict[str, Any] = {"tool_calls": entries}
        kind = draw(st.integers(0, 29))
        if kind == 0:
            delta["role"] = "assistant"
        elif kind == 1:
            delta["content"] = draw(st.sampled_from(["", "hi"]))
        elif kind == 2:
            entries[0]["id"] = draw(st.sampled_from(["call_0", "call_9"]))
        elif kind == 3:
            entries[0]["function"]["name"] = draw(st.sampled_from(["f", "g"]))
        extra = None
        if kind == 4:
            extra = {"on": draw(st.sampled_from(["chunk", "choice", "delta"])), "x_vendor": 1}
        finish = draw(st.sampled_from(["tool_calls", "stop", "length"])) if kind == 5 else None
        chunks.append(_chunk(delta, finish=finish, extra=extra))
    if draw(st.booleans()):
        chunks.append(_chunk({}, finish=draw(st.sampled_from(["tool_calls", "stop", "length"]))))
    return [construct_type(type_=ChatCompletionChunk, value=c) for c in chunks]


def _read(chunks: list[Any], limits: ts.Limits, events: bool) -> Any:
    acc = ts.Accumulator(tools=TOOLS, limits=limits, clock=lambda: 0.0)
    seen = []
    for chunk in chunks:
        seen.extend(_event(e) for e in acc.feed(chunk, events=events))
    seen.extend(_event(e) for e in acc.end())
    calls = [
        (
            c.choice,
            c.index,
            c.status,
            c.id,
            c.name,
            c.arguments,
            repr(c.error),
            c.metrics.fragments,
            c.metrics.bytes,
        )
        for c in acc.tool_calls
    ]
    anomalies = [(a.code, a.message, a.choice) for a in acc.anomalies]
    try:
        final: Any = json.dumps(acc.get_final_completion().model_dump(mode="json"), sort_keys=True)
    except Exception as exc:  # the documented IncompleteStreamError, the same both ways
        final = type(exc).__name__
    return seen, calls, anomalies, final


def _event(event: Any) -> tuple[Any, ...]:
    call = getattr(event, "call", None)
    where = None if call is None else (call.choice, call.index)
    return (type(event).__name__, where, getattr(event, "text", None), repr(getattr(event, "error", None)))


_INIT = CallTable.__init__


def _watched_init(self: CallTable) -> None:
    _INIT(self)
    self.chains = _Watched()


class _Watched(dict):  # type: ignore[type-arg]
    """A table's chains that always claim one more: every continuation of the choice is routed."""

    def __bool__(self) -> bool:
        return True


def _both(chunks: list[Any], limits: ts.Limits, monkeypatch: pytest.MonkeyPatch) -> None:
    for events in (True, False):
        hot = _read(chunks, limits, events)
        with monkeypatch.context() as m:
            # A chain that never ends in every table: no choice takes a shortcut.
            m.setattr(CallTable, "__init__", _watched_init)
            reference = _read(chunks, limits, events)
        assert hot == reference


@settings(
    max_examples=examples(400),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    chunks=_streams(),
    argument_bytes=st.sampled_from([8, 24, 64, 4096]),
    stream_bytes=st.sampled_from([40, 120, 1 << 20]),
)
def test_the_hot_exits_read_a_stream_as_the_long_way_does(
    chunks: list[Any], argument_bytes: int, stream_bytes: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    limits = ts.Limits(max_argument_bytes=argument_bytes, max_stream_bytes=stream_bytes)
    _both(chunks, limits, monkeypatch)


@pytest.mark.parametrize("stream", [s for s in CORPUS if s.chunks()], ids=lambda s: s.name)
def test_every_corpus_stream_reads_the_same_without_the_hot_exits(
    stream: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    chunks = [
        construct_type(type_=ChatCompletionChunk, value=c) if isinstance(c, dict) else c
        for c in stream.chunks()
    ]
    _both(chunks, ts.Limits(), monkeypatch)
