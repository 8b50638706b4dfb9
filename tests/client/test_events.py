"""``stream.events()``: the wrapped stream as toolstitch events instead of chunks, sync and async, over
real HTTP. Recording, metrics and the final completion are the same as when iterating chunks."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import openai
import pytest

import toolstitch as ts
from tests.conftest import WEATHER_TOOLS as TOOLS
from tests.core.test_accumulator import seed_stream
from toolstitch.events import (
    ArgumentsComplete,
    ArgumentsDelta,
    ChoiceFinished,
    ContentDelta,
    ReasoningDelta,
    StreamEnded,
    ToolCallIncomplete,
    ToolCallReady,
    ToolCallStarted,
)
from toolstitch.testing import LocalServer, StreamScript, chunk

ARGS: dict[str, Any] = {
    "model": "test-model",
    "messages": [{"role": "user", "content": "hi"}],
    "tools": TOOLS,
}


def talking_stream() -> list[Any]:
    """Reasoning, then text, then the two interleaved calls of the seed stream."""
    return [
        chunk(delta={"role": "assistant", "reasoning_content": "The user wants "}),
        chunk(delta={"reasoning_content": "two cities."}),
        chunk(delta={"content": "Checking "}),
        chunk(delta={"content": "both."}),
        *seed_stream()[1:],
    ]


def check_events(events: list[Any], stream: Any) -> None:
    kinds = [type(e) for e in events]
    assert kinds[-1] is StreamEnded and events[-1].error is None
    assert [e.text for e in events if isinstance(e, ReasoningDelta)] == ["The user wants ", "two cities."]
    assert "".join(e.text for e in events if isinstance(e, ContentDelta)) == "Checking both."
    started = [e.call.index for e in events if isinstance(e, ToolCallStarted)]
    assert started == [0, 1]
    for call in stream.tool_calls:
        deltas = [e.text for e in events if isinstance(e, ArgumentsDelta) and e.call is call]
        assert "".join(deltas) == call.arguments  # the deltas add up to the text, exactly
        assert any(isinstance(e, ArgumentsComplete) and e.call is call for e in events)
    ready = [e.call for e in events if isinstance(e, ToolCallReady)]
    assert ready == stream.tool_calls
    finished = [e for e in events if isinstance(e, ChoiceFinished)]
    assert [(e.choice, e.finish_reason) for e in finished] == [(0, "tool_calls")]
    assert kinds.index(ChoiceFinished) < kinds.index(StreamEnded)
    first_ready = kinds.index(ToolCallReady)
    assert all(k is not ToolCallStarted for k in kinds[first_ready:])  # nothing starts after sealing


def test_events_of_a_wrapped_stream(server: LocalServer, tmp_path: Path) -> None:
    server.enqueue(StreamScript(talking_stream(), fragment=9), StreamScript(talking_stream(), fragment=9))
    client = ts.wrap(server.client())

    by_chunks = client.chat.completions.create(**ARGS, stream=True)
    by_chunks.record(tmp_path / "chunks.jsonl")
    n_chunks = len(list(by_chunks))

    previews: dict[int, list[Any]] = {0: [], 1: []}
    with client.chat.completions.create(**ARGS, stream=True) as stream:
        stream.record(tmp_path / "events.jsonl")
        events = []
        for event in stream.events():
            events.append(event)
            if isinstance(event, ArgumentsDelta):  # the preview as it stands when the delta arrives
                previews[event.call.index].append(copy.deepcopy(event.call.preview))
    check_events(events, stream)
    for call in stream.tool_calls:
        seen = [p for p in previews[call.index] if p is not None]
        assert seen and all(set(p) <= set(call.parsed) for p in seen)  # keys never invented
        assert call.preview == call.parsed  # once ready, the preview is the parsed value
    assert stream.accumulator.metrics.chunks == n_chunks == by_chunks.accumulator.metrics.chunks
    assert stream.get_final_completion().choices == by_chunks.get_final_completion().choices
    assert len(_recorded_chunks(tmp_path / "chunks.jsonl")) == n_chunks
    assert _recorded_chunks(tmp_path / "events.jsonl") == _recorded_chunks(tmp_path / "chunks.jsonl")
    assert list(stream.events()) == []  # consumed: nothing twice


def _recorded_chunks(path: Path) -> list[Any]:
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    return [line.get("chunk") for line in lines if "chunk" in line]


async def test_events_of_a_wrapped_async_stream(server: LocalServer) -> None:
    server.enqueue(StreamScript(talking_stream(), fragment=4))
    stream = await ts.wrap(server.async_client()).chat.completions.create(**ARGS, stream=True)
    async with stream:
        events = [e async for e in stream.events()]
    check_events(events, stream)
    completion = await stream.get_final_completion()
    assert completion.choices[0].message.content == "Checking both."


def test_events_of_stitched_chunks() -> None:
    stream = ts.stitch(talking_stream(), tools=TOOLS)
    check_events(list(stream.events()), stream)


def test_a_dropped_connection_yields_the_end_then_raises_the_sdks_error(server: LocalServer) -> None:
    server.enqueue(StreamScript(seed_stream(), cut_after=6))
    stream = ts.wrap(server.client()).chat.completions.create(**ARGS, stream=True)
    events: list[Any] = []
    with pytest.raises(openai.APIConnectionError):
        for event in stream.events():
            events.append(event)
    assert isinstance(events[-1], StreamEnded)
    assert isinstance(events[-1].error, openai.APIConnectionError)
    incomplete = [e.call for e in events if isinstance(e, ToolCallIncomplete)]
    assert incomplete and incomplete == [c for c in stream.tool_calls if c.status == "incomplete"]
    assert not any(isinstance(e, ToolCallReady) for e in events)


async def test_async_dropped_connection_yields_the_end_then_raises(server: LocalServer) -> None:
    server.enqueue(StreamScript(seed_stream(), cut_after=6, fragment=3))
    stream = await ts.wrap(server.async_client()).chat.completions.create(**ARGS, stream=True)
    events: list[Any] = []
    with pytest.raises(openai.APIConnectionError):
        async for event in stream.events():
            events.append(event)
    assert isinstance(events[-1], StreamEnded) and events[-1].error is not None


def test_events_and_chunks_can_take_turns_on_one_pass(server: LocalServer) -> None:
    server.enqueue(StreamScript(seed_stream()))
    stream = ts.wrap(server.client()).chat.completions.create(**ARGS, stream=True)
    first = next(iter(stream))  # a chunk, then the rest as events
    assert first.choices[0].delta.role == "assistant"
    events = list(stream.events())
    assert [type(e) for e in events].count(ToolCallReady) == 2
    assert stream.accumulator.metrics.chunks == len(seed_stream())


def test_closing_during_events_leaves_calls_incomplete(server: LocalServer) -> None:
    server.enqueue(StreamScript(seed_stream(), delay=0.001))
    with ts.wrap(server.client()).chat.completions.create(**ARGS, stream=True) as stream:
        for event in stream.events():
            if isinstance(event, ArgumentsDelta):
                break
    assert stream.tool_calls and all(c.status == "incomplete" for c in stream.tool_calls)
