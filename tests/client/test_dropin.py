"""``ts.wrap`` as a drop-in: every streaming entry point of the real SDK, sync and async, over real HTTP
against the local test server; ``isinstance``, signatures, context managers, ``with_options``/``copy``,
and the one warning for a path that cannot be stitched."""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Awaitable, Callable
from typing import Any

import openai
import pytest
from openai.lib.streaming.chat import AsyncChatCompletionStream, ChatCompletionStream
from openai.types.chat import ChatCompletion, ChatCompletionChunk

import toolstitch as ts
from tests.conftest import WEATHER_TOOLS as TOOLS
from tests.core.test_accumulator import seed_stream
from toolstitch.errors import UnstitchedStreamWarning
from toolstitch.testing import LocalServer, StreamScript

MESSAGES = [{"role": "user", "content": "Weather in Shenzhen and Shanghai?"}]
EXPECTED = [{"city": "深圳"}, {"city": "上海", "unit": '"u"'}]
ARGS: dict[str, Any] = {"model": "test-model", "messages": MESSAGES, "tools": TOOLS}


def azure(server: LocalServer, cls: type[Any]) -> Any:
    return cls(
        azure_endpoint=server.base_url.removesuffix("/v1"),
        api_key="test",
        api_version="2024-10-21",
        max_retries=0,
    )


CLIENTS: dict[str, Callable[[LocalServer], Any]] = {
    "OpenAI": lambda s: s.client(),
    "AsyncOpenAI": lambda s: s.async_client(),
    "AzureOpenAI": lambda s: azure(s, openai.AzureOpenAI),
    "AsyncAzureOpenAI": lambda s: azure(s, openai.AsyncAzureOpenAI),
}


# ------------------------------------------------------------------------- the client itself


@pytest.mark.parametrize("kind", sorted(CLIENTS))
def test_the_wrapped_client_is_an_instance_of_the_class_it_wraps(server: LocalServer, kind: str) -> None:
    plain = CLIENTS[kind](server)
    wrapped = ts.wrap(plain)
    assert isinstance(wrapped, type(plain))
    assert isinstance(wrapped, getattr(openai, kind))
    assert isinstance(wrapped, ts.client.WrappedClient)
    assert isinstance(wrapped.chat.completions, type(plain.chat.completions))
    # type() too, for code that checks the class (logfire's instrument_openai asserts it)
    assert issubclass(type(wrapped), type(plain)) and issubclass(type(wrapped), ts.client.WrappedClient)
    assert wrapped.__class__ is type(plain)
    for copied in (wrapped.with_options(timeout=3), wrapped.copy(max_retries=1)):
        assert isinstance(copied, getattr(openai, kind))
        assert isinstance(copied, ts.client.WrappedClient)
    assert not isinstance(wrapped, openai.AsyncOpenAI if "Async" not in kind else openai.OpenAI)


PATHS = [
    "chat.completions.create",
    "chat.completions.stream",
    "chat.completions.parse",
    "chat.completions.with_raw_response.create",
    "chat.completions.with_streaming_response.create",
    "with_raw_response.chat.completions.create",
    "with_streaming_response.chat.completions.create",
    "chat.with_raw_response.completions.create",
    "beta.chat.completions.stream",
    "with_options",
    "copy",
    "post",
    "request",
]


# openai releases before the helpers left beta have no chat.completions.stream/parse (the floor,
# 1.55.3, has them under beta only): what a release does not have cannot be tested on it.
HAS_HELPER = hasattr(openai.resources.chat.Completions, "stream")
needs_helper = pytest.mark.skipif(not HAS_HELPER, reason="this openai release has no chat.completions.stream")


def _at(obj: Any, path: str) -> Any:
    for name in path.split("."):
        obj = getattr(obj, name)
    return obj


@pytest.mark.parametrize("kind", ["OpenAI", "AsyncOpenAI"])
@pytest.mark.parametrize("path", PATHS)
def test_wrapped_methods_keep_the_sdks_signature_name_and_docstring(
    server: LocalServer, kind: str, path: str
) -> None:
    plain = CLIENTS[kind](server)
    try:
        theirs = _at(plain, path)
    except AttributeError:
        pytest.skip(f"this openai release has no {path}")
    wrapped = ts.wrap(plain)
    ours = _at(wrapped, path)
    assert inspect.signature(ours) == inspect.signature(theirs)
    assert ours.__name__ == theirs.__name__
    assert ours.__doc__ == theirs.__doc__


def test_the_sync_client_is_a_context_manager_that_gives_the_wrapper(server: LocalServer) -> None:
    plain = server.client()
    wrapped = ts.wrap(plain)
    with wrapped as entered:
        assert entered is wrapped
        assert not plain.is_closed()
    assert plain.is_closed()
    assert not hasattr(wrapped, "__aenter__")  # as the SDK's sync client


async def test_the_async_client_is_an_async_context_manager_that_gives_the_wrapper(
    server: LocalServer,
) -> None:
    plain = server.async_client()
    wrapped = ts.wrap(plain)
    async with wrapped as entered:
        assert entered is wrapped
        server.enqueue(StreamScript(seed_stream()))
        stream = await entered.chat.completions.create(**ARGS, stream=True)
        await stream.get_final_completion()
        assert [c.status for c in stream.tool_calls] == ["ready", "ready"]
    assert plain.is_closed()
    assert not hasattr(wrapped, "__enter__")


def test_the_sdk_client_s_methods_run_on_the_client_not_on_the_wrapper(server: LocalServer) -> None:
    plain = server.client()
    wrapped = ts.wrap(plain)
    assert wrapped.get == plain.get and wrapped.delete == plain.delete  # bound to the client
    assert wrapped.embeddings is plain.embeddings and wrapped.base_url == plain.base_url
    plain.get = "patched"  # type: ignore[assignment,method-assign]  # as instrumentations do
    assert wrapped.get == "patched"


def test_a_client_class_that_cannot_be_subclassed_with_the_wrapper_still_passes_isinstance(
    server: LocalServer,
) -> None:
    class Slotted(openai.OpenAI):
        __slots__ = ("extra",)  # a layout of its own: no class can derive from it and the proxy

    plain = Slotted(api_key="test", base_url=server.base_url, max_retries=0)
    wrapped = ts.wrap(plain)
    assert isinstance(wrapped, Slotted) and not issubclass(type(wrapped), Slotted)
    server.enqueue(StreamScript(seed_stream()))
    stream = wrapped.chat.completions.create(**ARGS, stream=True)
    stream.until_done()
    assert [c.status for c in stream.tool_calls] == ["ready", "ready"]


def test_attribute_writes_and_deletes_reach_the_client(server: LocalServer) -> None:
    plain = server.client()
    wrapped = ts.wrap(plain)
    wrapped.marker = 1  # type: ignore[attr-defined]
    assert plain.marker == 1  # type: ignore[attr-defined]
    del wrapped.marker  # type: ignore[attr-defined]
    assert not hasattr(plain, "marker")
    assert "chat" in dir(wrapped) and "unwrapped" in dir(wrapped)


# ------------------------------------------------------------------------- every entry point


def _consume_sync(result: Any) -> Any:
    if isinstance(result, ts.StitchedStream):
        with result:
            chunks = list(result)
        assert all(isinstance(c, ChatCompletionChunk) for c in chunks)
        return result
    return result  # a raw response: parse() is the stream


SyncEntry = Callable[[Any], Any]

SYNC_ENTRIES: dict[str, SyncEntry] = {}


def _entry(name: str) -> Callable[[SyncEntry], SyncEntry]:
    def register(fn: SyncEntry) -> SyncEntry:
        SYNC_ENTRIES[name] = fn
        return fn

    return register


@_entry("create")
def _create(client: Any) -> Any:
    stream = client.chat.completions.create(**ARGS, stream=True)
    assert isinstance(stream, openai.Stream) and isinstance(stream, ts.StitchedStream)
    chunks = list(stream)
    assert all(isinstance(c, ChatCompletionChunk) for c in chunks)
    assert isinstance(stream.get_final_completion(), ChatCompletion)
    return stream


@_entry("with_raw_response")
def _raw(client: Any) -> Any:
    raw = client.chat.completions.with_raw_response.create(**ARGS, stream=True)
    assert raw.headers["content-type"].startswith("text/event-stream")
    stream = raw.parse()
    assert raw.parse() is stream  # parsed once, as the SDK caches its own parse
    assert isinstance(stream, openai.Stream) and isinstance(stream, ts.StitchedStream)
    stream.until_done()
    return stream


@_entry("client.with_raw_response")
def _client_raw(client: Any) -> Any:
    stream = client.with_raw_response.chat.completions.create(**ARGS, stream=True).parse()
    stream.until_done()
    return stream


@_entry("chat.with_raw_response")
def _chat_raw(client: Any) -> Any:
    stream = client.chat.with_raw_response.completions.create(**ARGS, stream=True).parse()
    stream.until_done()
    return stream


@_entry("with_streaming_response")
def _streaming(client: Any) -> Any:
    with client.chat.completions.with_streaming_response.create(**ARGS, stream=True) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        stream = response.parse()
        assert isinstance(stream, openai.Stream) and isinstance(stream, ts.StitchedStream)
        for _ in stream:
            pass
    return stream


@_entry("client.with_streaming_response")
def _client_streaming(client: Any) -> Any:
    with client.with_streaming_response.chat.completions.create(**ARGS, stream=True) as response:
        stream = response.parse()
        stream.until_done()
    return stream


@_entry("chat.with_streaming_response")
def _chat_streaming(client: Any) -> Any:
    with client.chat.with_streaming_response.completions.create(**ARGS, stream=True) as response:
        stream = response.parse()
        stream.until_done()
    return stream


@_entry("stream helper")
def _helper(client: Any) -> Any:
    if not HAS_HELPER:
        pytest.skip("this openai release has no chat.completions.stream")
    with client.chat.completions.stream(**ARGS) as stream:
        assert isinstance(stream, ChatCompletionStream)
        kinds = [event.type for event in stream]
    assert "tool_calls.function.arguments.done" in kinds  # the SDK's own events keep working
    final = stream.get_final_completion()  # the SDK's own ParsedChatCompletion
    assert [tc.function.name for tc in final.choices[0].message.tool_calls or []] == ["get_weather"] * 2
    assert isinstance(stream.toolstitch, ts.StitchedStream)
    assert stream.toolstitch.get_final_completion().choices[0].finish_reason == "tool_calls"
    return stream


@_entry("beta stream helper")
def _beta_helper(client: Any) -> Any:
    with client.beta.chat.completions.stream(**ARGS) as stream:
        stream.until_done()
    return stream


@pytest.mark.parametrize("through", ["client", "with_options", "copy"])
@pytest.mark.parametrize("entry", sorted(SYNC_ENTRIES))
def test_every_sync_entry_point_is_stitched(server: LocalServer, entry: str, through: str) -> None:
    server.enqueue(StreamScript(seed_stream(), fragment=7))
    client = ts.wrap(server.client())
    if through == "with_options":
        client = client.with_options(timeout=30)
    elif through == "copy":
        client = client.copy(max_retries=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnstitchedStreamWarning)
        stream = SYNC_ENTRIES[entry](client)
    assert [c.parsed for c in stream.tool_calls] == EXPECTED
    assert [c.status for c in stream.tool_calls] == ["ready", "ready"]
    assert server.requests[-1]["tools"] == TOOLS


AsyncEntry = Callable[[Any], Awaitable[Any]]
ASYNC_ENTRIES: dict[str, AsyncEntry] = {}


def _aentry(name: str) -> Callable[[AsyncEntry], AsyncEntry]:
    def register(fn: AsyncEntry) -> AsyncEntry:
        ASYNC_ENTRIES[name] = fn
        return fn

    return register


@_aentry("create")
async def _acreate(client: Any) -> Any:
    stream = await client.chat.completions.create(**ARGS, stream=True)
    assert isinstance(stream, openai.AsyncStream) and isinstance(stream, ts.AsyncStitchedStream)
    chunks = [c async for c in stream]
    assert all(isinstance(c, ChatCompletionChunk) for c in chunks)
    return stream


@_aentry("with_raw_response")
async def _araw(client: Any) -> Any:
    raw = await client.chat.completions.with_raw_response.create(**ARGS, stream=True)
    stream = raw.parse()
    assert isinstance(stream, openai.AsyncStream) and isinstance(stream, ts.AsyncStitchedStream)
    await stream.until_done()
    return stream


@_aentry("client.with_raw_response")
async def _aclient_raw(client: Any) -> Any:
    raw = await client.with_raw_response.chat.completions.create(**ARGS, stream=True)
    return await raw.parse().until_done()


@_aentry("chat.with_raw_response")
async def _achat_raw(client: Any) -> Any:
    raw = await client.chat.with_raw_response.completions.create(**ARGS, stream=True)
    return await raw.parse().until_done()


@_aentry("chat.with_streaming_response")
async def _achat_streaming(client: Any) -> Any:
    async with client.chat.with_streaming_response.completions.create(**ARGS, stream=True) as response:
        stream = await response.parse()
        await stream.until_done()
    return stream


@_aentry("with_streaming_response")
async def _astreaming(client: Any) -> Any:
    async with client.chat.completions.with_streaming_response.create(**ARGS, stream=True) as response:
        stream = await response.parse()
        assert isinstance(stream, openai.AsyncStream) and isinstance(stream, ts.AsyncStitchedStream)
        async for _ in stream:
            pass
    return stream


@_aentry("client.with_streaming_response")
async def _aclient_streaming(client: Any) -> Any:
    async with client.with_streaming_response.chat.completions.create(**ARGS, stream=True) as response:
        stream = await response.parse()
        await stream.until_done()
    return stream


@_aentry("stream helper")
async def _ahelper(client: Any) -> Any:
    if not HAS_HELPER:
        pytest.skip("this openai release has no chat.completions.stream")
    async with client.chat.completions.stream(**ARGS) as stream:
        assert isinstance(stream, AsyncChatCompletionStream)
        kinds = [event.type async for event in stream]
    assert "tool_calls.function.arguments.done" in kinds
    assert isinstance(stream.toolstitch, ts.AsyncStitchedStream)
    return stream


@_aentry("beta stream helper")
async def _abeta_helper(client: Any) -> Any:
    try:
        helper = client.beta.chat.completions.stream(**ARGS)
    except ValueError as exc:  # older releases' async beta helper auto-parses: strict tools only
        if "is not strict" not in str(exc):
            raise
        pytest.skip(f"this openai release's async beta helper refuses non-strict tools ({exc})")
    async with helper as stream:
        await stream.until_done()
    return stream


@pytest.mark.parametrize("through", ["client", "with_options", "copy"])
@pytest.mark.parametrize("entry", sorted(ASYNC_ENTRIES))
async def test_every_async_entry_point_is_stitched(server: LocalServer, entry: str, through: str) -> None:
    server.enqueue(StreamScript(seed_stream(), fragment=7))
    client = ts.wrap(server.async_client())
    if through == "with_options":
        client = client.with_options(timeout=30)
    elif through == "copy":
        client = client.copy(max_retries=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnstitchedStreamWarning)
        stream = await ASYNC_ENTRIES[entry](client)
    assert [c.parsed for c in stream.tool_calls] == EXPECTED
    assert [c.status for c in stream.tool_calls] == ["ready", "ready"]


# ------------------------------------------------------------------------- the helper, closely


@needs_helper
def test_the_helper_yields_the_same_events_as_without_toolstitch(server: LocalServer) -> None:
    server.enqueue(StreamScript(seed_stream(), fragment=5), StreamScript(seed_stream(), fragment=5))
    with server.client().chat.completions.stream(**ARGS) as plain:
        expected = [event.model_dump() if hasattr(event, "model_dump") else repr(event) for event in plain]
    with ts.wrap(server.client()).chat.completions.stream(**ARGS) as stream:
        seen = [event.model_dump() if hasattr(event, "model_dump") else repr(event) for event in stream]
    assert seen == expected


@needs_helper
def test_leaving_the_helper_early_leaves_its_calls_incomplete(server: LocalServer) -> None:
    server.enqueue(StreamScript(seed_stream(), delay=0.001))
    with ts.wrap(server.client()).chat.completions.stream(**ARGS) as stream:
        for n, _ in enumerate(stream):
            if n == 6:
                break
    assert stream.tool_calls and all(c.status == "incomplete" for c in stream.tool_calls)
    assert stream.toolstitch.response.is_closed


async def test_leaving_the_async_streaming_response_early_leaves_calls_incomplete(
    server: LocalServer,
) -> None:
    server.enqueue(StreamScript(seed_stream(), delay=0.001))
    client = ts.wrap(server.async_client())
    async with client.chat.completions.with_streaming_response.create(**ARGS, stream=True) as response:
        stream = await response.parse()
        n = 0
        async for _ in stream:
            n += 1
            if n == 6:
                break
    assert stream.tool_calls and all(c.status == "incomplete" for c in stream.tool_calls)


# ------------------------------------------------------------------------- what is left alone


def test_requests_that_do_not_stream_pass_through_untouched(server: LocalServer) -> None:
    server.enqueue(StreamScript(seed_stream()), StreamScript(seed_stream()))
    client = ts.wrap(server.client())
    completion = client.chat.completions.create(**ARGS)
    assert type(completion) is ChatCompletion
    assert "stream" not in server.requests[-1]
    raw = client.chat.completions.with_raw_response.create(**ARGS, stream=False)
    assert type(raw.parse()) is ChatCompletion


def test_reading_a_streamed_body_around_the_parser_warns_once(server: LocalServer) -> None:
    server.enqueue(StreamScript(seed_stream()), StreamScript(seed_stream()))
    client = ts.wrap(server.client())
    streamed = client.chat.completions.with_streaming_response.create(**ARGS, stream=True)
    with pytest.warns(UnstitchedStreamWarning, match="iter_lines"), streamed as response:
        lines = list(response.iter_lines())
    assert any(line.startswith("data: ") for line in lines)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnstitchedStreamWarning)  # once per client and path
        with client.with_options(timeout=9).chat.completions.with_streaming_response.create(
            **ARGS, stream=True
        ) as response:
            list(response.iter_lines())


def test_a_create_that_returns_no_sdk_stream_warns_and_passes_it_on(server: LocalServer) -> None:
    plain = server.client()
    wrapped = ts.wrap(plain)
    sentinel = ["not", "a", "stream"]
    plain.chat.completions.create = lambda **kwargs: sentinel  # type: ignore[method-assign,assignment]
    with pytest.warns(UnstitchedStreamWarning, match="not an openai.Stream"):
        assert wrapped.chat.completions.create(**ARGS, stream=True) is sentinel


def test_parse_to_a_type_of_ones_own_is_theirs_and_warns(server: LocalServer) -> None:
    server.enqueue(StreamScript(seed_stream()))
    client = ts.wrap(server.client())
    raw = client.chat.completions.with_raw_response.create(**ARGS, stream=True)
    with pytest.warns(UnstitchedStreamWarning, match=r"parse\(to=\.\.\.\)"):
        own = raw.parse(to=openai.Stream[ChatCompletionChunk])
    assert not isinstance(own, ts.StitchedStream)
    own.close()
