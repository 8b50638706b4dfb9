"""``guard=True``: a stream that stops a framework from running a call that did not arrive whole and valid.

The real openai client over real HTTP against the local server, on every entry point ``wrap``
stitches (sync and async), and on ``ts.stitch``. Every chunk passes through unchanged until a chunk
finishes a choice holding a call that is not ``ready``: that chunk is never handed on, and
``UnsafeToolCallError`` (an ``openai.APIError``) is raised in its place. Off by default."""

from __future__ import annotations

import warnings
from collections.abc import Awaitable, Callable
from typing import Any

import openai
import pytest
from openai.types.chat import ChatCompletionChunk

import toolstitch as ts
from tests.client.test_dropin import HAS_HELPER
from toolstitch.errors import (
    CallIncomplete,
    MalformedArguments,
    SchemaViolation,
    ToolstitchError,
    UnknownTool,
    UnsafeToolCallError,
    UnstitchedStreamWarning,
)
from toolstitch.testing import LocalServer, StreamScript, chunk, tool_call_chunks

WEATHER = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
ADD = {
    "type": "object",
    "properties": {"a": {"type": "integer"}},
    "required": ["a"],
    "additionalProperties": False,
}
TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "parameters": WEATHER}},
    {"type": "function", "function": {"name": "add", "parameters": ADD, "strict": True}},
]
ARGS: dict[str, Any] = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "tools": TOOLS}

#: Streams a framework must not act on: each finishes with ``finish_reason: "tool_calls"``.
UNSAFE: dict[str, tuple[list[dict[str, Any]], type[Exception]]] = {
    "truncated": (tool_call_chunks([("call_1", "get_weather", '{"city": "Par')]), MalformedArguments),
    "schema-breaking": (tool_call_chunks([("call_1", "add", '{"a": "17"}')]), SchemaViolation),
    "unknown tool": (tool_call_chunks([("call_1", "delete_everything", "{}")]), UnknownTool),
}
SAFE = tool_call_chunks([("call_1", "get_weather", '{"city": "Paris"}'), ("call_2", "add", '{"a": 17}')])


def assert_refused(error: BaseException, why: type[Exception], choice: int | None = 0) -> None:
    assert isinstance(error, UnsafeToolCallError)
    assert isinstance(error, openai.APIError) and isinstance(error, ToolstitchError)
    assert error.choice == choice
    assert [c.status for c in error.tool_calls] in (["invalid"], ["incomplete"])
    assert isinstance(error.tool_calls[0].error, why)
    assert error.code == "unsafe_tool_call" and error.type == "toolstitch_guard"
    assert type(error.tool_calls[0].error).__name__ in str(error)


def assert_the_sdks_request(error: openai.APIError, request: Any) -> None:
    """``error.request`` is what the SDK's own error for ``request`` holds: on openai 3.60 and newer a
    copy without the secret headers, before that the request itself."""
    sdk = openai.APIError("the SDK's own", request, body=None).request
    got = error.request
    assert (got.method, got.url, list(got.headers.items())) == (
        sdk.method,
        sdk.url,
        list(sdk.headers.items()),
    )
    assert (got is request) == (sdk is request)
    if sdk is not request:  # the SDK scrubbed it: so is ours
        assert "authorization" not in got.headers and "authorization" in request.headers


# ------------------------------------------------------------------------- create(), closely


@pytest.mark.parametrize("case", sorted(UNSAFE))
def test_the_finish_of_an_unsafe_choice_is_never_handed_on(server: LocalServer, case: str) -> None:
    chunks, why = UNSAFE[case]
    server.enqueue(StreamScript(chunks), StreamScript(chunks))
    plain = list(server.client().chat.completions.create(**ARGS, stream=True))
    client = ts.wrap(server.client(), guard=True)
    stream = client.chat.completions.create(**ARGS, stream=True)
    got: list[ChatCompletionChunk] = []
    with pytest.raises(UnsafeToolCallError) as caught:
        for c in stream:
            got.append(c)
    assert_refused(caught.value, why)
    # every chunk before the finish, unchanged; the finish itself never
    assert [c.model_dump() for c in got] == [c.model_dump() for c in plain[:-1]]
    assert plain[-1].choices[0].finish_reason == "tool_calls"
    assert all(c.choices[0].finish_reason is None for c in got)
    assert stream.tool_calls == caught.value.tool_calls
    assert stream.response.is_closed  # the guard closed the response
    assert_the_sdks_request(caught.value, stream.response.request)


def test_a_safe_stream_passes_whole_and_unchanged(server: LocalServer) -> None:
    server.enqueue(StreamScript(SAFE), StreamScript(SAFE))
    plain = list(server.client().chat.completions.create(**ARGS, stream=True))
    stream = ts.wrap(server.client(), guard=True).chat.completions.create(**ARGS, stream=True)
    assert [c.model_dump() for c in stream] == [c.model_dump() for c in plain]
    assert [c.status for c in stream.tool_calls] == ["ready", "ready"]
    assert stream.get_final_completion().choices[0].finish_reason == "tool_calls"


def test_the_guard_is_off_by_default(server: LocalServer) -> None:
    chunks, _ = UNSAFE["truncated"]
    server.enqueue(StreamScript(chunks))
    stream = ts.wrap(server.client()).chat.completions.create(**ARGS, stream=True)
    assert list(stream)[-1].choices[0].finish_reason == "tool_calls"
    assert [c.status for c in stream.tool_calls] == ["invalid"]


def test_a_stream_that_ends_with_a_call_not_sealed_raises_at_its_end(server: LocalServer) -> None:
    chunks = tool_call_chunks([("call_1", "get_weather", '{"city": "Paris"}')], finish_reason=None)
    server.enqueue(StreamScript(chunks))
    stream = ts.wrap(server.client(), guard=True).chat.completions.create(**ARGS, stream=True)
    got = []
    with pytest.raises(UnsafeToolCallError) as caught:
        for c in stream:
            got.append(c)
    assert len(got) == len(chunks)  # nothing finished: every chunk was handed on, then the end refused
    assert_refused(caught.value, CallIncomplete, choice=None)


def test_a_length_finish_with_a_call_is_refused(server: LocalServer) -> None:
    chunks = tool_call_chunks([("call_1", "get_weather", '{"city": "Paris"}')], finish_reason="length")
    server.enqueue(StreamScript(chunks))
    stream = ts.wrap(server.client(), guard=True).chat.completions.create(**ARGS, stream=True)
    with pytest.raises(UnsafeToolCallError) as caught:
        stream.get_final_completion()
    assert_refused(caught.value, CallIncomplete)


def test_text_without_calls_is_never_refused(server: LocalServer) -> None:
    text = [chunk(delta={"role": "assistant", "content": "Hi"}), chunk(delta={}, finish_reason="stop")]
    server.enqueue(StreamScript(text))
    stream = ts.wrap(server.client(), guard=True).chat.completions.create(**ARGS, stream=True)
    assert stream.get_final_completion().choices[0].message.content == "Hi"


def test_one_unsafe_choice_of_two_is_refused_at_its_own_finish(server: LocalServer) -> None:
    def piece(n: int, delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return chunk(choices=[{"index": n, "delta": delta, "finish_reason": finish}])

    def call(args: str) -> dict[str, Any]:
        return {
            "tool_calls": [
                {
                    "index": 0,
                    "id": "c",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": args},
                }
            ]
        }

    chunks = [
        piece(0, call('{"city": "Oslo"}')),
        piece(1, call('{"city": "Os')),
        piece(0, {}, "tool_calls"),  # choice 0 is safe: handed on
        piece(1, {}, "tool_calls"),  # choice 1 is not: refused here
    ]
    server.enqueue(StreamScript(chunks))
    stream = ts.wrap(server.client(), guard=True).chat.completions.create(**{**ARGS, "n": 2}, stream=True)
    got = []
    with pytest.raises(UnsafeToolCallError) as caught:
        for c in stream:
            got.append(c)
    assert len(got) == 3
    assert_refused(caught.value, MalformedArguments, choice=1)


def test_events_end_with_the_calls_then_the_error(server: LocalServer) -> None:
    server.enqueue(StreamScript(UNSAFE["truncated"][0]))
    stream = ts.wrap(server.client(), guard=True).chat.completions.create(**ARGS, stream=True)
    names = []
    with pytest.raises(UnsafeToolCallError):
        for event in stream.events():
            names.append(type(event).__name__)
    assert names[-1] == "StreamEnded" and "ChoiceFinished" not in names


def test_a_recording_keeps_every_chunk_the_server_sent(server: LocalServer, tmp_path: Any) -> None:
    chunks, _ = UNSAFE["truncated"]
    server.enqueue(StreamScript(chunks))
    client = ts.wrap(server.client(), guard=True, record=tmp_path)
    with pytest.raises(UnsafeToolCallError):
        client.chat.completions.create(**ARGS, stream=True).until_done()
    [path] = tmp_path.glob("*.jsonl")
    replayed = ts.replay(path)
    assert replayed.outcome == "closed"  # closed by the guard, the finishing chunk recorded
    assert [c.status for c in replayed.calls()] == ["invalid"]


# ------------------------------------------------------------------------- every entry point


def _drain_sync(stream: Any) -> None:
    for _ in stream:
        pass


SYNC: dict[str, Callable[[Any], None]] = {
    "create": lambda c: _drain_sync(c.chat.completions.create(**ARGS, stream=True)),
    "with_raw_response": lambda c: _drain_sync(
        c.chat.completions.with_raw_response.create(**ARGS, stream=True).parse()
    ),
    "post": lambda c: _drain_sync(
        c.post(
            "/chat/completions",
            body={**ARGS, "stream": True},
            cast_to=openai.types.chat.ChatCompletion,
            stream=True,
            stream_cls=openai.Stream[ChatCompletionChunk],
        )
    ),
}


def _sync_streaming(client: Any) -> None:
    with client.chat.completions.with_streaming_response.create(**ARGS, stream=True) as response:
        _drain_sync(response.parse())


def _sync_helper(client: Any) -> None:
    if not HAS_HELPER:
        pytest.skip("this openai release has no chat.completions.stream")
    with client.chat.completions.stream(**ARGS) as stream:
        kinds = []
        try:
            for event in stream:
                kinds.append(event.type)
        finally:  # the SDK's helper never announced a finished call
            assert "tool_calls.function.arguments.done" not in kinds


SYNC["with_streaming_response"] = _sync_streaming
SYNC["stream helper"] = _sync_helper


@pytest.mark.parametrize("case", sorted(UNSAFE))
@pytest.mark.parametrize("entry", sorted(SYNC))
def test_every_sync_entry_point_refuses(server: LocalServer, entry: str, case: str) -> None:
    chunks, why = UNSAFE[case]
    server.enqueue(StreamScript(chunks))
    client = ts.wrap(server.client(), guard=True).with_options(timeout=30)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnstitchedStreamWarning)
        with pytest.raises(UnsafeToolCallError) as caught:
            SYNC[entry](client)
    assert_refused(caught.value, why)


async def _drain_async(stream: Any) -> None:
    async for _ in stream:
        pass


async def _acreate(client: Any) -> None:
    await _drain_async(await client.chat.completions.create(**ARGS, stream=True))


async def _araw(client: Any) -> None:
    raw = await client.chat.completions.with_raw_response.create(**ARGS, stream=True)
    await _drain_async(raw.parse())


async def _astreaming(client: Any) -> None:
    async with client.chat.completions.with_streaming_response.create(**ARGS, stream=True) as response:
        await _drain_async(await response.parse())


async def _ahelper(client: Any) -> None:
    if not HAS_HELPER:
        pytest.skip("this openai release has no chat.completions.stream")
    async with client.chat.completions.stream(**ARGS) as stream:
        kinds = []
        try:
            async for event in stream:
                kinds.append(event.type)
        finally:
            assert "tool_calls.function.arguments.done" not in kinds


async def _apost(client: Any) -> None:
    stream = await client.post(
        "/chat/completions",
        body={**ARGS, "stream": True},
        cast_to=openai.types.chat.ChatCompletion,
        stream=True,
        stream_cls=openai.AsyncStream[ChatCompletionChunk],
    )
    await _drain_async(stream)


ASYNC: dict[str, Callable[[Any], Awaitable[None]]] = {
    "create": _acreate,
    "with_raw_response": _araw,
    "with_streaming_response": _astreaming,
    "stream helper": _ahelper,
    "post": _apost,
}


@pytest.mark.parametrize("case", sorted(UNSAFE))
@pytest.mark.parametrize("entry", sorted(ASYNC))
async def test_every_async_entry_point_refuses(server: LocalServer, entry: str, case: str) -> None:
    chunks, why = UNSAFE[case]
    server.enqueue(StreamScript(chunks))
    client = ts.wrap(server.async_client(), guard=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnstitchedStreamWarning)
        with pytest.raises(UnsafeToolCallError) as caught:
            await ASYNC[entry](client)
    assert_refused(caught.value, why)


async def test_the_async_guard_closes_the_response(server: LocalServer) -> None:
    server.enqueue(StreamScript(UNSAFE["truncated"][0]))
    stream = await ts.wrap(server.async_client(), guard=True).chat.completions.create(**ARGS, stream=True)
    with pytest.raises(UnsafeToolCallError):
        await stream.get_final_completion()
    assert stream.response.is_closed


# ------------------------------------------------------------------------- ts.stitch and wrap itself


@pytest.mark.parametrize("case", sorted(UNSAFE))
def test_stitch_guards_too(case: str) -> None:
    chunks, why = UNSAFE[case]
    closed = []

    def source() -> Any:
        try:
            yield from chunks
        finally:
            closed.append(True)

    stream = ts.stitch(source(), tools=TOOLS, guard=True)
    got = []
    with pytest.raises(UnsafeToolCallError) as caught:
        for c in stream:
            got.append(c)
    assert got == chunks[:-1] and closed == [True]
    assert_refused(caught.value, why)
    assert caught.value.request is None  # no HTTP request behind a list of chunks


async def test_stitch_guards_an_async_source_too() -> None:
    chunks, why = UNSAFE["schema-breaking"]

    async def source() -> Any:
        for c in chunks:
            yield c

    with pytest.raises(UnsafeToolCallError) as caught:
        await ts.stitch(source(), tools=TOOLS, guard=True).get_final_completion()
    assert_refused(caught.value, why)


def test_wrapping_again_with_the_guard_makes_a_new_proxy(server: LocalServer) -> None:
    plain = ts.wrap(server.client())
    guarded = ts.wrap(plain, guard=True)
    assert guarded is not plain and guarded.unwrapped is plain.unwrapped
    assert ts.wrap(guarded) is guarded  # wrapping a wrapped client with defaults changes nothing


# ------------------------------------------------------------------- a finish that decides again


def _responses_cases() -> dict[str, list[dict[str, Any]]]:
    from toolstitch.testing import response_events

    calls = [("call_1", "get_weather", '{"city": "Paris"}')]
    cases: dict[str, list[dict[str, Any]]] = {}
    for status in ("incomplete", "failed", "in_progress", "cancelled", None, 7):
        events = response_events(calls)
        events[-1]["response"]["status"] = status
        cases[f"completed with status {status!r}"] = events
    events = response_events(calls)
    events.insert(len(events) - 1, {"type": "error", "code": "server_error", "message": "boom"})
    cases["completed after an error event"] = events
    return cases


RESPONSES_TOOLS = [{"type": "function", "name": "get_weather", "parameters": WEATHER, "strict": False}]


@pytest.mark.parametrize("case", sorted(_responses_cases()))
def test_the_guard_refuses_in_place_of_a_deciding_responses_event(case: str) -> None:
    """``response.completed`` whose response did not complete (or that follows an ``error`` event)
    decides the response while its call is not ready: the guard raises in its place, so a framework
    never acts on it. The event itself is never handed on."""
    events = _responses_cases()[case]
    got: list[Any] = []
    with pytest.raises(UnsafeToolCallError):
        for event in ts.stitch(events, tools=RESPONSES_TOOLS, api="responses", guard=True):
            got.append(event)
    assert all(e["type"] != "response.completed" for e in got)


@pytest.mark.parametrize("case", ["completed with status 'incomplete'", "completed with status None"])
async def test_the_async_guard_refuses_a_deciding_responses_event(case: str) -> None:
    events = _responses_cases()[case]

    async def source() -> Any:
        for event in events:
            yield event

    got: list[Any] = []
    with pytest.raises(UnsafeToolCallError):
        async for event in ts.stitch(source(), tools=RESPONSES_TOOLS, api="responses", guard=True):
            got.append(event)
    assert all(e["type"] != "response.completed" for e in got)


def test_the_guard_refuses_a_second_finish_after_a_late_fragment(server: LocalServer) -> None:
    """A choice finished with a ready call; a late fragment refuses it; a second finish_reason chunk
    finishes the choice again: the guard raises in place of that chunk (over real HTTP)."""
    chunks = [
        *tool_call_chunks([("call_1", "get_weather", '{"city": "Paris"}')]),
        chunk(delta={"tool_calls": [{"index": 0, "function": {"arguments": " "}}]}),
        chunk(delta={}, finish_reason="tool_calls"),
    ]
    server.enqueue(StreamScript(chunks))
    client = ts.wrap(server.client(), guard=True)
    got: list[Any] = []
    with pytest.raises(UnsafeToolCallError) as caught:
        for c in client.chat.completions.create(**ARGS, stream=True):
            got.append(c)
    assert len(got) == len(chunks) - 1
    assert [c.status for c in caught.value.tool_calls] == ["invalid"]
