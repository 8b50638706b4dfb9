"""``ts.stitch(chunks)``: the stream ``wrap`` returns, over any iterable or async iterable of chunks.

SDK objects, plain dicts (as LiteLLM and gateways give them), other pydantic models of the same
shape, generators and async generators; the contract of the request; hostile chunks (fail closed:
never ``ready`` unless exact and valid, never an exception from toolstitch)."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import jsonschema
import openai
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from openai.types.chat import ChatCompletionChunk
from pydantic import BaseModel, ConfigDict

import toolstitch as ts
from tests.conftest import WEATHER_TOOLS as TOOLS
from tests.conftest import examples, field_paths, offered
from tests.core.test_accumulator import seed_stream
from toolstitch.client._fast import same_value
from toolstitch.testing import LocalServer, StreamScript, chunk, tool_call_chunks

EXPECTED = [{"city": "深圳"}, {"city": "上海", "unit": '"u"'}]


class ForeignChunk(BaseModel):
    """A chunk model that is not the SDK's (LiteLLM's ``ModelResponseStream`` is one of these)."""

    model_config = ConfigDict(extra="allow")


def foreign(data: Any) -> Any:
    """``data`` with every object turned into a :class:`ForeignChunk`."""
    if isinstance(data, dict):
        return ForeignChunk(**{k: foreign(v) for k, v in data.items()})
    if isinstance(data, list):
        return [foreign(v) for v in data]
    return data


class ExtrasChunk(openai.BaseModel):
    """A subclass of the SDK's ``BaseModel`` holding every field among pydantic's extras, as LiteLLM's
    chunk classes hold ``index``, ``delta``, ``content`` and ``tool_calls`` (the real ones are tried
    in interop/test_litellm.py)."""


def in_extras(data: Any) -> Any:
    if isinstance(data, dict):
        return ExtrasChunk(**{k: in_extras(v) for k, v in data.items()})
    if isinstance(data, list):
        return [in_extras(v) for v in data]
    return data


SOURCES = {
    "dicts": lambda: seed_stream(),
    "openai models with fields in extras": lambda: [in_extras(c) for c in seed_stream()],
    "sdk objects": lambda: [ChatCompletionChunk.model_validate(c) for c in seed_stream()],
    "foreign models": lambda: [foreign(c) for c in seed_stream()],
    "generator": lambda: (c for c in seed_stream()),
    "tuple": lambda: tuple(seed_stream()),
}


@pytest.mark.parametrize("source", sorted(SOURCES))
def test_stitch_gives_the_stream_wrap_gives(source: str, server: LocalServer) -> None:
    server.enqueue(StreamScript(seed_stream()))
    wrapped = ts.wrap(server.client()).chat.completions.create(
        model="test-model", messages=[], tools=TOOLS, stream=True
    )
    expected = wrapped.get_final_completion()

    chunks = SOURCES[source]()
    stream = ts.stitch(chunks, tools=TOOLS)
    assert isinstance(stream, ts.StitchedStream) and isinstance(stream, openai.Stream)
    assert stream.response is None  # no HTTP behind it
    with stream:
        yielded = list(stream)
    if not isinstance(chunks, Iterator):
        assert all(a is b for a, b in zip(yielded, chunks, strict=True))  # unchanged, in order
    assert [c.parsed for c in stream.tool_calls] == EXPECTED
    assert [c.status for c in stream.tool_calls] == ["ready", "ready"]
    completion = stream.get_final_completion()
    got, want = completion.model_dump(), expected.model_dump()
    for key in ("id", "created", "model"):
        got.pop(key), want.pop(key)
    assert got == want


async def test_stitch_of_an_async_iterable_is_the_async_stream() -> None:
    async def source() -> AsyncIterator[Any]:
        for c in seed_stream():
            yield c

    stream = ts.stitch(source(), tools=TOOLS)
    assert isinstance(stream, ts.AsyncStitchedStream) and isinstance(stream, openai.AsyncStream)
    async with stream:
        n = len([c async for c in stream])
    assert n == len(seed_stream())
    completion = await stream.get_final_completion()
    assert completion.choices[0].finish_reason == "tool_calls"
    assert [c.parsed for c in stream.tool_calls] == EXPECTED


class BothWays:
    """A source with ``__iter__`` and ``__aiter__``, as LiteLLM's ``CustomStreamWrapper`` (the same
    class from ``completion`` and from ``acompletion``)."""

    def __init__(self, chunks: list[Any]) -> None:
        self.chunks = chunks

    def __iter__(self) -> Iterator[Any]:
        return iter(self.chunks)

    async def _aiter(self) -> AsyncIterator[Any]:
        for c in self.chunks:
            yield c

    def __aiter__(self) -> AsyncIterator[Any]:
        return self._aiter()


def test_a_source_read_both_ways_is_read_with_for_outside_an_event_loop() -> None:
    stream = ts.stitch(BothWays(seed_stream()), tools=TOOLS)
    assert isinstance(stream, ts.StitchedStream)
    assert len(list(stream)) == len(seed_stream())
    assert [c.parsed for c in stream.tool_calls] == EXPECTED


async def test_a_source_read_both_ways_is_read_with_async_for_inside_an_event_loop() -> None:
    stream = ts.stitch(BothWays(seed_stream()), tools=TOOLS)
    assert isinstance(stream, ts.AsyncStitchedStream)
    await stream.get_final_completion()
    assert [c.parsed for c in stream.tool_calls] == EXPECTED
    # a generator over it chooses the other way
    sync = ts.stitch((c for c in BothWays(seed_stream())), tools=TOOLS)
    assert isinstance(sync, ts.StitchedStream)
    assert [c.parsed for c in sync.until_done().tool_calls] == EXPECTED


def test_closing_the_stream_closes_the_source_and_leaves_calls_incomplete() -> None:
    closed: list[bool] = []

    def source() -> Iterator[Any]:
        try:
            yield from seed_stream()
        finally:
            closed.append(True)

    with ts.stitch(source(), tools=TOOLS) as stream:
        for n, _ in enumerate(stream):
            if n == 4:
                break
    assert closed == [True]
    assert stream.tool_calls and all(c.status == "incomplete" for c in stream.tool_calls)
    with pytest.raises(ts.IncompleteStreamError):
        stream.get_final_completion()


async def test_closing_the_async_stream_closes_the_source() -> None:
    closed: list[bool] = []

    async def source() -> AsyncIterator[Any]:
        try:
            for c in seed_stream():
                yield c
        finally:
            closed.append(True)

    async with ts.stitch(source(), tools=TOOLS) as stream:
        async for _ in stream:
            break
    assert closed == [True]


def test_what_the_source_raises_reaches_the_caller_after_calls_became_incomplete() -> None:
    class Dropped(Exception):
        pass

    def source() -> Iterator[Any]:
        yield from seed_stream()[:5]
        raise Dropped("gone")

    stream = ts.stitch(source(), tools=TOOLS)
    with pytest.raises(Dropped):
        list(stream)
    assert all(c.status == "incomplete" for c in stream.tool_calls)
    assert isinstance(stream.accumulator.error, Dropped)


def test_the_request_contract_holds_for_stitched_chunks() -> None:
    two = tool_call_chunks([("c1", "get_weather", '{"city": "A"}'), ("c2", "get_weather", '{"city": "B"}')])
    assert [c.status for c in ts.stitch(two, tools=TOOLS).until_done().tool_calls] == ["ready", "ready"]
    single = ts.stitch(two, tools=TOOLS, parallel_tool_calls=False).until_done()
    assert [c.status for c in single.tool_calls] == ["ready", "invalid"]
    assert isinstance(single.tool_calls[1].error, ts.errors.ContractViolation)
    none = ts.stitch(two, tools=TOOLS, tool_choice="none").until_done()
    assert [c.status for c in none.tool_calls] == ["invalid", "invalid"]
    offered_none = ts.stitch(two, tools=[]).until_done()
    assert all(isinstance(c.error, ts.errors.UnknownTool) for c in offered_none.tool_calls)
    unchecked = ts.stitch(tool_call_chunks([("c1", "anything", "{}")])).until_done()
    assert [c.status for c in unchecked.tool_calls] == ["ready"]  # tools not given: names unchecked
    legacy = ts.stitch(two, tools=TOOLS, function_call={"name": "other"}).until_done()
    assert [c.status for c in legacy.tool_calls] == ["invalid", "invalid"]


def test_tools_given_as_a_generator_are_read_once() -> None:
    stream = ts.stitch(seed_stream(), tools=(t for t in TOOLS))
    assert [c.status for c in stream.until_done().tool_calls] == ["ready", "ready"]


@pytest.mark.parametrize(
    "one", [seed_stream()[0], ChatCompletionChunk.model_validate(seed_stream()[0]), "data"]
)
def test_one_chunk_is_refused_with_a_clear_type_error(one: Any) -> None:
    with pytest.raises(TypeError, match="iterable of chunks"):
        ts.stitch(one)


def test_something_that_is_not_iterable_is_refused() -> None:
    with pytest.raises(TypeError, match="iterable"):
        ts.stitch(5)  # type: ignore[call-overload]


def test_stitched_chunks_can_be_recorded_and_replayed(tmp_path: Any) -> None:
    stream = ts.stitch(seed_stream(), tools=TOOLS)
    recorder = stream.record(tmp_path / "r.jsonl")
    stream.get_final_completion()
    assert recorder.error is None
    replayed = ts.replay(tmp_path / "r.jsonl")
    assert [c.parsed for c in replayed.tool_calls] == EXPECTED


# ------------------------------------------------------------------------- hostile chunks

HOSTILE: list[Any] = [
    None, "", 0, -1, 2**64, 1.5, float("nan"), True, [], {}, [None], {"": None}, "\ud83d", "x" * 100_000,
    '{"', "}", "null", {"name": "f", "arguments": "{}"}, ["{}"], object(), b"bytes", ForeignChunk(a=1),
]  # fmt: skip


def mutate(chunks: list[Any], data: st.DataObject) -> list[Any]:
    """Hostile values in place of fields, chunks that are not objects, chunks dropped or repeated."""
    chunks = copy.deepcopy(chunks)
    for _ in range(data.draw(st.integers(1, 5))):
        i = data.draw(st.integers(0, len(chunks) - 1))
        kind = data.draw(st.sampled_from(["field", "field", "field", "chunk", "drop", "repeat"]))
        if kind == "chunk":
            chunks[i] = copy.deepcopy(data.draw(st.sampled_from(HOSTILE)))
        elif kind == "drop" and len(chunks) > 1:
            del chunks[i]
        elif kind == "repeat":
            chunks.insert(i, copy.deepcopy(chunks[i]))
        elif isinstance(chunks[i], dict) and field_paths(chunks[i]):
            path = data.draw(st.sampled_from(field_paths(chunks[i])))
            parent = chunks[i]
            for step in path[:-1]:
                parent = parent[step]
            parent[path[-1]] = copy.deepcopy(data.draw(st.sampled_from(HOSTILE)))
    return chunks


SCHEMAS = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}


def assert_fail_closed(stream: Any) -> None:
    """Every ``ready`` call is offered, its text is a JSON object valid against its schema."""
    for call in stream.calls():
        assert call.status in ("ready", "invalid", "incomplete")
        if call.status == "ready":
            assert call.name in SCHEMAS
            value = json.loads(call.arguments)
            assert isinstance(value, dict) and value == call.parsed
            jsonschema.validate(value, SCHEMAS[call.name])
    assert "internal_error" not in {a.code for a in stream.anomalies}


@settings(max_examples=examples(150), deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_hostile_dicts_fail_closed_and_never_raise(data: st.DataObject) -> None:
    chunks = mutate(seed_stream(), data)
    stream = ts.stitch(chunks, tools=TOOLS)
    with stream:
        events = list(stream.events())
    assert isinstance(events[-1], ts.events.StreamEnded)
    assert_fail_closed(stream)
    with contextlib.suppress(ts.IncompleteStreamError):
        stream.get_final_completion().model_dump_json()


@settings(max_examples=examples(60), deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
async def test_hostile_dicts_fail_closed_async(data: st.DataObject) -> None:
    chunks = mutate(seed_stream(), data)

    async def source() -> AsyncIterator[Any]:
        for c in chunks:
            yield c

    stream = ts.stitch(source(), tools=TOOLS)
    async with stream:
        async for _ in stream:
            pass
    assert_fail_closed(stream)


def test_a_truncated_call_is_never_ready() -> None:
    chunks = seed_stream()
    for cut in range(len(chunks)):
        stream = ts.stitch(chunks[:cut], tools=TOOLS).until_done()
        assert not any(c.status == "ready" for c in stream.tool_calls), cut


def test_an_in_band_error_in_a_dict_ends_the_stream_with_it() -> None:
    chunks = [*seed_stream()[:4], {"error": {"message": "overloaded"}}, *seed_stream()[4:]]
    stream = ts.stitch(chunks, tools=TOOLS)
    list(stream)
    assert not any(c.status == "ready" for c in stream.tool_calls)
    with pytest.raises(ts.IncompleteStreamError):
        stream.get_final_completion()


def test_content_text_streamed_through_stitch() -> None:
    chunks = [chunk(delta={"role": "assistant", "content": "Hel"}), chunk(delta={"content": "lo"})]
    chunks.append(chunk(delta={}, finish_reason="stop"))
    completion = ts.stitch(chunks).get_final_completion()
    assert completion.choices[0].message.content == "Hello"


def test_stitch_reads_raw_bytes_with_the_sdk_semantics() -> None:
    chunks = tool_call_chunks([("call_1", "f", '{"a": "é"}'), ("call_2", "g", "{}")], pieces=4)
    body = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks).encode() + b"data: [DONE]\n\n"
    reads = [body[k : k + 7] for k in range(0, len(body), 7)]
    results = []
    for decode in ("sdk", "fast"):
        stream = ts.stitch(iter(reads), tools=offered(["f", "g"]), decode=decode)  # type: ignore[arg-type]
        results.append(list(stream))
        assert [c.status for c in stream.tool_calls] == ["ready", "ready"]
        assert stream.get_final_completion().choices[0].finish_reason == "tool_calls"

    async def source() -> Any:
        for r in reads:
            yield r

    async def main() -> list[Any]:
        stream = ts.stitch(source(), tools=offered(["f", "g"]), decode="fast")
        return [c async for c in stream]

    results.append(asyncio.run(main()))
    assert same_value(results[0], results[1]) and same_value(results[0], results[2])
    assert len(results[0]) == len(chunks)


def test_stitch_raises_the_sdk_in_band_error_from_raw_bytes() -> None:
    body = b'data: {"error": {"message": "overloaded"}}\n\n'
    for decode in ("sdk", "fast"):
        stream = ts.stitch([body], decode=decode)  # type: ignore[arg-type]
        with pytest.raises(openai.APIError, match="overloaded"):
            list(stream)
