"""Regression tests for bugs found in a review of the streaming core, through the real SDK."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import toolstitch as ts
from tests.conftest import offered
from toolstitch.testing import LocalServer, StreamScript, chunk

MESSAGES = [{"role": "user", "content": "hi"}]
# The tools the streams below call, without schemas: a request that offers no tool refuses every call.
TOOLS = offered("fg")


def _call(index: int, id: str, name: str, arguments: str) -> dict[str, Any]:
    return {"index": index, "id": id, "type": "function", "function": {"name": name, "arguments": arguments}}


# -- a schema that cannot be evaluated ---------------------------------------------------------

# check_schema() accepts it, but validating anything against it raises (the $ref points nowhere).
BROKEN_REF_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "f",
            "parameters": {"type": "object", "properties": {"a": {"$ref": "#/$defs/Missing"}}},
        },
    }
]
TWO_CALLS = [
    chunk(delta={"role": "assistant", "tool_calls": [_call(0, "call_a", "f", '{"a": 1}')]}),
    chunk(delta={"tool_calls": [_call(1, "call_b", "f", '{"a": 2}')]}),
    chunk(delta={}, finish_reason="tool_calls"),
]


def test_a_schema_that_cannot_be_evaluated_never_leaves_a_call_ready_or_open() -> None:
    acc = ts.Accumulator(BROKEN_REF_TOOLS)
    for c in TWO_CALLS:
        acc.feed(c)
    acc.end()  # must not raise
    assert [c.status for c in acc.tool_calls] == ["invalid", "invalid"]
    assert all(isinstance(c.error, ts.errors.SchemaViolation) for c in acc.tool_calls)
    assert "internal_error" not in [a.code for a in acc.anomalies]


def test_a_schema_that_cannot_be_evaluated_does_not_break_the_iteration(server: LocalServer) -> None:
    server.enqueue(StreamScript(TWO_CALLS))
    client = ts.wrap(server.client())
    with client.chat.completions.create(
        model="m", messages=MESSAGES, tools=BROKEN_REF_TOOLS, stream=True
    ) as stream:
        chunks = list(stream)
    assert len(chunks) == len(TWO_CALLS)
    assert not any(c.ready for c in stream.tool_calls)
    stream.get_final_completion()


# -- closing a stream early is not a clean end -------------------------------------------------

# n=2: choice 0 finishes first; choice 1 holds a complete first call, and a second call is on its way.
TWO_CHOICES = [
    chunk(index=0, delta={"role": "assistant", "tool_calls": [_call(0, "call_a", "f", '{"a": 1}')]}),
    chunk(index=1, delta={"role": "assistant", "tool_calls": [_call(0, "call_b", "f", '{"a": 2}')]}),
    chunk(index=0, delta={}, finish_reason="tool_calls"),
    chunk(index=1, delta={"tool_calls": [_call(1, "call_c", "g", '{"undo": "call_b"}')]}),
    chunk(index=1, delta={}, finish_reason="tool_calls"),
]


def _assert_choice_1_is_not_sealed(stream: Any) -> None:
    assert [c.status for c in stream.calls(0)] == ["ready"]
    assert [c.status for c in stream.calls(1)] == ["incomplete"]
    with pytest.raises(ts.IncompleteStreamError):
        stream.accumulator.get_final_completion()


def test_closing_early_seals_nothing_on_the_strength_of_the_end(server: LocalServer) -> None:
    server.enqueue(StreamScript(TWO_CHOICES, delay=0.001))
    client = ts.wrap(server.client())
    with client.chat.completions.create(
        model="m", messages=MESSAGES, tools=TOOLS, n=2, stream=True
    ) as stream:
        for n, _ in enumerate(stream):
            if n == 2:  # choice 0 just finished; choice 1 has not
                break
    _assert_choice_1_is_not_sealed(stream)


async def test_closing_early_seals_nothing_async(server: LocalServer) -> None:
    server.enqueue(StreamScript(TWO_CHOICES, delay=0.001))
    client = ts.wrap(server.async_client())
    async with await client.chat.completions.create(
        model="m", messages=MESSAGES, tools=TOOLS, n=2, stream=True
    ) as stream:
        n = 0
        async for _ in stream:
            if n == 2:
                break
            n += 1
    _assert_choice_1_is_not_sealed(stream)


def test_a_call_opened_after_the_finish_is_not_sealed_by_an_early_close() -> None:
    late = [
        chunk(delta={"role": "assistant", "tool_calls": [_call(0, "call_a", "f", '{"a": 1}')]}),
        chunk(delta={}, finish_reason="tool_calls"),
        chunk(delta={"tool_calls": [_call(1, "call_b", "f", '{"a": 2}')]}),
        chunk(delta={"tool_calls": [{"index": 1, "function": {"arguments": ""}}]}),
    ]
    stream = ts.StitchedStream(_Fake(late), ts.Accumulator())
    with stream:
        for n, _ in enumerate(stream):
            if n == 2:
                break
    assert [c.status for c in stream.tool_calls] == ["ready", "incomplete"]


def test_a_clean_end_still_seals_a_call_opened_after_the_finish() -> None:
    late = [
        chunk(delta={"role": "assistant", "tool_calls": [_call(0, "call_a", "f", '{"a": 1}')]}),
        chunk(delta={}, finish_reason="tool_calls"),
        chunk(delta={"tool_calls": [_call(1, "call_b", "f", '{"a": 2}')]}),
    ]
    stream = ts.StitchedStream(_Fake(late), ts.Accumulator())
    with stream:
        for _ in stream:
            pass
    assert [c.status for c in stream.tool_calls] == ["ready", "ready"]


class _Fake:
    """A minimal stand-in for ``openai.Stream``: iterable, closable."""

    def __init__(self, chunks: list[dict[str, Any]]) -> None:
        self._it = iter(chunks)
        self.closed = False

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return self._it

    def close(self) -> None:
        self.closed = True


# -- with_raw_response ------------------------------------------------------------------------

ONE_CALL = [
    chunk(delta={"role": "assistant", "tool_calls": [_call(0, "call_a", "f", '{"a": 1}')]}),
    chunk(delta={}, finish_reason="tool_calls"),
]


def _raw_entry_points(client: Any) -> list[Any]:
    return [
        client.chat.completions.with_raw_response,
        client.chat.with_raw_response.completions,
        client.with_raw_response.chat.completions,
        client.with_options(timeout=5).with_raw_response.chat.completions,
    ]


def test_with_raw_response_streams_are_stitched_too(server: LocalServer) -> None:
    client = ts.wrap(server.client())
    for completions in _raw_entry_points(client):
        server.enqueue(StreamScript(ONE_CALL))
        raw = completions.create(model="m", messages=MESSAGES, tools=TOOLS, stream=True)
        assert raw.headers["content-type"].startswith("text/event-stream")
        stream = raw.parse()
        assert isinstance(stream, ts.StitchedStream)
        assert raw.parse() is stream  # parsed once, like the SDK's own cache
        with stream:
            assert len(list(stream)) == len(ONE_CALL)
        assert [(c.name, c.status) for c in stream.tool_calls] == [("f", "ready")]


async def test_with_raw_response_streams_are_stitched_async(server: LocalServer) -> None:
    client = ts.wrap(server.async_client())
    for completions in _raw_entry_points(client):
        server.enqueue(StreamScript(ONE_CALL))
        raw = await completions.create(model="m", messages=MESSAGES, tools=TOOLS, stream=True)
        stream = raw.parse()
        assert isinstance(stream, ts.AsyncStitchedStream)
        async with stream:
            assert len([c async for c in stream]) == len(ONE_CALL)
        assert [(c.name, c.status) for c in stream.tool_calls] == [("f", "ready")]


def test_with_raw_response_without_stream_is_the_sdks(server: LocalServer) -> None:
    server.enqueue(StreamScript(ONE_CALL))
    raw = ts.wrap(server.client()).chat.completions.with_raw_response.create(model="m", messages=MESSAGES)
    assert raw.parse().choices[0].message.tool_calls[0].function.name == "f"


def test_a_replay_of_an_early_closed_stream_seals_what_the_live_stream_sealed(
    server: LocalServer, tmp_path: Path
) -> None:
    server.enqueue(StreamScript(TWO_CHOICES, delay=0.001))
    client = ts.wrap(server.client(), record=tmp_path)
    with client.chat.completions.create(
        model="m", messages=MESSAGES, tools=TOOLS, n=2, stream=True
    ) as stream:
        for n, _ in enumerate(stream):
            if n == 2:
                break
    _assert_choice_1_is_not_sealed(stream)
    (path,) = tmp_path.glob("*.jsonl")
    replayed = ts.replay(path).until_done()
    assert replayed.outcome == "closed"
    _assert_choice_1_is_not_sealed(replayed)


def test_a_late_fragment_that_refuses_a_ready_call_is_announced() -> None:
    acc = ts.Accumulator()
    acc.feed(chunk(delta={"tool_calls": [_call(0, "call_a", "f", '{"a": 1}')]}))
    events = acc.feed(chunk(delta={}, finish_reason="tool_calls"))
    assert any(isinstance(e, ts.events.ToolCallReady) for e in events)
    events = acc.feed(chunk(delta={"tool_calls": [{"index": 0, "function": {"arguments": " "}}]}))
    (call,) = acc.tool_calls
    assert call.status == "invalid" and isinstance(call.error, ts.errors.LateFragment)
    assert [e.call for e in events if isinstance(e, ts.events.ToolCallInvalid)] == [call]
    assert "fragment_after_finish" in {a.code for a in call.anomalies}
    # More late text extends the sample; the call is announced once.
    events = acc.feed(chunk(delta={"tool_calls": [{"index": 0, "function": {"arguments": "x"}}]}))
    assert not any(isinstance(e, ts.events.ToolCallInvalid) for e in events)
    assert call.error.raw == " x"


def test_a_call_over_the_per_choice_limit_is_announced_even_without_text() -> None:
    acc = ts.Accumulator(limits=ts.Limits(max_calls_per_choice=1))
    acc.feed(chunk(delta={"tool_calls": [_call(0, "call_a", "f", "{}")]}))
    events = acc.feed(chunk(delta={"tool_calls": [_call(1, "call_b", "f", "")]}))
    invalid = [e for e in events if isinstance(e, ts.events.ToolCallInvalid)]
    assert [e.call.id for e in invalid] == ["call_b"]
    assert isinstance(invalid[0].error, ts.errors.LimitExceeded)


def test_a_tool_schema_that_is_not_json_schema_refuses_its_calls() -> None:
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "objekt"}}}]
    acc = ts.Accumulator(tools=tools)
    acc.feed(chunk(delta={"tool_calls": [_call(0, "call_a", "f", '{"a": 1}')]}))
    acc.feed(chunk(delta={}, finish_reason="tool_calls"))
    (call,) = acc.tool_calls
    assert call.status == "invalid" and isinstance(call.error, ts.errors.SchemaViolation)
    assert "not a valid JSON Schema" in call.error.message
    assert call.parsed == {"a": 1}


# -- the fast path: only the core takes each chunk ---------------------------------------------


def test_the_core_only_path_follows_the_events_switch_the_recorder_and_the_guard(tmp_path: Path) -> None:
    # What a chunk goes through is decided by what takes it: the core alone until events are read,
    # a recording starts, or the guard watches; the flag is never set by hand.
    plain = ts.stitch(TWO_CALLS, tools=TOOLS)
    assert plain._core_only and not plain._events
    guarded = ts.stitch(TWO_CALLS, tools=TOOLS, guard=True)
    assert not guarded._core_only
    recorded = ts.stitch(TWO_CALLS, tools=TOOLS)
    recorded.record(tmp_path / "r.jsonl")
    assert not recorded._core_only
    read = ts.stitch(TWO_CALLS, tools=TOOLS)
    events = list(read.events())
    assert read._events and not read._core_only
    assert [c.status for c in read.tool_calls] == ["ready", "ready"] and events
