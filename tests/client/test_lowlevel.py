"""The wrapped client's own low-level calls, ``post(...)`` and ``request(...)``, sync and async, with the
real SDK over real HTTP: a streamed chat-completions call is stitched (its body is the contract), one
that cannot be stitched warns once, everything else passes untouched; and an instrumentation that
patches ``request`` through the wrapper does not make the SDK's own requests warn or stitch twice."""

from __future__ import annotations

import functools
import json
import warnings
from collections.abc import Iterator
from typing import Any

import openai
import pytest
from openai._legacy_response import LegacyAPIResponse
from openai._models import FinalRequestOptions
from openai._response import APIResponse
from openai.types.chat import ChatCompletion, ChatCompletionChunk

import toolstitch as ts
from tests.client.instrumented import astitched, stitched
from tests.client.test_dropin import ARGS, ASYNC_ENTRIES, EXPECTED, MESSAGES, SYNC_ENTRIES, TOOLS
from tests.core.test_accumulator import seed_stream
from toolstitch.errors import UnstitchedStreamWarning
from toolstitch.testing import LocalServer, StreamScript

STREAM = {"stream": True, "stream_cls": openai.Stream[ChatCompletionChunk]}
ASTREAM = {"stream": True, "stream_cls": openai.AsyncStream[ChatCompletionChunk]}
BODY = {**ARGS, "stream": True}
RAW = {"headers": {"X-Stainless-Raw-Response": "true"}}  # what with_raw_response sends


@pytest.fixture
def no_unstitched_warning() -> Iterator[None]:
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnstitchedStreamWarning)
        yield


def final_options(body: dict[str, Any], **extra: Any) -> FinalRequestOptions:
    return FinalRequestOptions.construct(method="post", url="/chat/completions", json_data=body, **extra)


def test_a_streamed_post_to_chat_completions_is_stitched(
    server: LocalServer, no_unstitched_warning: None
) -> None:
    server.enqueue(StreamScript(seed_stream(), fragment=7))
    client = ts.wrap(server.client())
    stream = client.post("/chat/completions", body=BODY, cast_to=ChatCompletion, **STREAM)
    assert isinstance(stream, ts.StitchedStream) and isinstance(stream, openai.Stream)
    with stream:
        assert all(isinstance(c, ChatCompletionChunk) for c in stream)
    assert [c.parsed for c in stream.tool_calls] == EXPECTED
    assert [c.status for c in stream.tool_calls] == ["ready", "ready"]
    assert server.requests[-1]["tools"] == TOOLS


async def test_a_streamed_async_post_to_chat_completions_is_stitched(
    server: LocalServer, no_unstitched_warning: None
) -> None:
    server.enqueue(StreamScript(seed_stream(), fragment=7))
    client = ts.wrap(server.async_client())
    stream = await client.post("/chat/completions", body=BODY, cast_to=ChatCompletion, **ASTREAM)
    assert isinstance(stream, ts.AsyncStitchedStream) and isinstance(stream, openai.AsyncStream)
    await stream.until_done()
    assert [c.parsed for c in stream.tool_calls] == EXPECTED
    assert [c.status for c in stream.tool_calls] == ["ready", "ready"]


def test_a_streamed_request_to_chat_completions_is_stitched(
    server: LocalServer, no_unstitched_warning: None
) -> None:
    server.enqueue(StreamScript(seed_stream(), fragment=7))
    client = ts.wrap(server.client())
    stream = client.request(ChatCompletion, final_options(BODY), **STREAM)
    assert isinstance(stream, ts.StitchedStream)
    stream.until_done()
    assert [c.status for c in stream.tool_calls] == ["ready", "ready"]


async def test_a_streamed_async_request_to_chat_completions_is_stitched(
    server: LocalServer, no_unstitched_warning: None
) -> None:
    server.enqueue(StreamScript(seed_stream(), fragment=7))
    client = ts.wrap(server.async_client())
    stream = await client.request(ChatCompletion, options=final_options(BODY), **ASTREAM)
    assert isinstance(stream, ts.AsyncStitchedStream)
    await stream.until_done()
    assert [c.parsed for c in stream.tool_calls] == EXPECTED


def test_the_body_is_the_contract_with_extra_json_over_it(server: LocalServer) -> None:
    server.enqueue(*(StreamScript(seed_stream()) for _ in range(3)))
    client = ts.wrap(server.client())
    bare = {"model": "test-model", "messages": MESSAGES, "stream": True}
    offered_none = client.post("/chat/completions", body=bare, cast_to=ChatCompletion, **STREAM)
    offered_none.until_done()
    assert [c.status for c in offered_none.tool_calls] == ["invalid", "invalid"]  # rule 10
    extra = {"extra_json": {"tools": TOOLS}}
    through_extra = client.post(
        "/chat/completions", body=bare, options=extra, cast_to=ChatCompletion, **STREAM
    )
    through_extra.until_done()
    assert server.requests[-1]["tools"] == TOOLS
    assert [c.status for c in through_extra.tool_calls] == ["ready", "ready"]
    # A body field named extra_body is sent as a field; it is not merged, so it offers nothing.
    shadow = {**bare, "extra_body": {"tools": TOOLS}}
    stream = client.request(ChatCompletion, final_options(shadow), **STREAM)
    stream.until_done()
    assert [c.status for c in stream.tool_calls] == ["invalid", "invalid"]


@pytest.mark.parametrize("header", ["true", "stream"])  # with_raw_response's, with_streaming_response's
@pytest.mark.parametrize("call", ["post", "request"])
def test_a_raw_streamed_response_is_the_sdks_and_its_parse_is_stitched(
    server: LocalServer, call: str, header: str
) -> None:
    # LiteLLM's client= path posts so: a raw response asked for by header, then parse().
    server.enqueue(StreamScript(seed_stream()))
    client = ts.wrap(server.client())
    raw_header = {"headers": {"X-Stainless-Raw-Response": header}}
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnstitchedStreamWarning)
        if call == "post":
            raw = client.post(
                "/chat/completions", body=BODY, options=raw_header, cast_to=ChatCompletion, **STREAM
            )
        else:
            raw = client.request(ChatCompletion, final_options(BODY, **raw_header), **STREAM)
        assert isinstance(raw, LegacyAPIResponse if header == "true" else APIResponse)
        assert raw.headers["content-type"].startswith("text/event-stream")
        stream = raw.parse()
        assert raw.parse() is stream  # parsed once, as the SDK caches its own parse
    assert isinstance(stream, ts.StitchedStream)
    final = stream.get_final_completion().choices[0].message.tool_calls or []
    assert [json.loads(c.function.arguments) for c in final] == EXPECTED  # type: ignore[union-attr]
    assert [c.parsed for c in stream.tool_calls] == EXPECTED
    assert [c.status for c in stream.tool_calls] == ["ready", "ready"]


@pytest.mark.parametrize("call", ["post", "request"])
async def test_an_async_raw_streamed_response_s_parse_is_stitched(server: LocalServer, call: str) -> None:
    server.enqueue(StreamScript(seed_stream()))
    client = ts.wrap(server.async_client())
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnstitchedStreamWarning)
        if call == "post":
            raw = await client.post(
                "/chat/completions", body=BODY, options=RAW, cast_to=ChatCompletion, **ASTREAM
            )
        else:
            raw = await client.request(ChatCompletion, final_options(BODY, **RAW), **ASTREAM)
        assert isinstance(raw, LegacyAPIResponse)
        stream = raw.parse()  # LegacyAPIResponse.parse is sync, also for an async client
    assert isinstance(stream, ts.AsyncStitchedStream)
    await stream.get_final_completion()
    assert [c.parsed for c in stream.tool_calls] == EXPECTED


async def test_an_async_body_that_cannot_be_read_warns_and_is_passed_on(server: LocalServer) -> None:
    plain = server.async_client()
    wrapped = ts.wrap(plain)
    sent: list[Any] = []

    async def post(path: str, **kwargs: Any) -> Any:
        sent.append(kwargs["body"])
        return "the SDK's result"

    plain.post = post  # type: ignore[method-assign,assignment]
    # JSON text is read (see test_contract_round2); bytes that are not one JSON object cannot be.
    with pytest.warns(UnstitchedStreamWarning, match="body .bytes. is not JSON") as caught:
        result = await wrapped.post("/chat/completions", body=b"{,}", cast_to=ChatCompletion, **ASTREAM)
    assert result == "the SDK's result" and sent == [b"{,}"]
    assert caught[0].filename == __file__


def test_calls_that_do_not_stream_or_are_not_chat_completions_are_untouched(
    server: LocalServer, no_unstitched_warning: None
) -> None:
    server.enqueue(StreamScript(seed_stream()))
    plain = server.client()
    client = ts.wrap(plain)
    completion = client.post("/chat/completions", body=ARGS, cast_to=ChatCompletion)
    assert type(completion) is ChatCompletion
    sentinel = object()
    plain.post = lambda path, **kwargs: sentinel  # type: ignore[method-assign,assignment]
    for path in ("/completions", "/responses", "/chat/completions/chatcmpl-1/messages"):
        assert client.post(path, body={}, cast_to=object, **STREAM) is sentinel  # left alone
    plain.request = lambda *args, **kwargs: sentinel  # type: ignore[method-assign,assignment]
    assert client.request(object, "not options", **STREAM) is sentinel


@pytest.mark.parametrize("url", ["https://api.example.test/v1/chat/completions", "chat/completions/"])
def test_a_chat_completions_path_is_known_in_any_spelling(url: str, no_unstitched_warning: None) -> None:
    from toolstitch.client._lowlevel import _is_chat

    assert _is_chat(url)
    assert not _is_chat("/chat/completions-like") and not _is_chat(None) and not _is_chat("http://[")


def _patch_request_through(wrapped: Any, seen: list[str]) -> None:
    """What logfire's instrument_openai(wrapped) does: read ``request`` from the wrapper, set its own
    wrapper of it (functools.wraps) on the client."""
    original = wrapped.request
    if isinstance(wrapped, openai.AsyncOpenAI):

        @functools.wraps(original)
        async def apatched(*args: Any, **kwargs: Any) -> Any:
            seen.append("request")
            return await original(*args, **kwargs)

        wrapped.request = apatched
    else:

        @functools.wraps(original)
        def patched(*args: Any, **kwargs: Any) -> Any:
            seen.append("request")
            return original(*args, **kwargs)

        wrapped.request = patched


@pytest.mark.parametrize("entry", sorted(SYNC_ENTRIES))
def test_request_patched_through_the_wrapper_neither_warns_nor_stitches_twice(
    server: LocalServer, entry: str
) -> None:
    server.enqueue(StreamScript(seed_stream(), fragment=7), StreamScript(seed_stream(), fragment=7))
    plain = server.client()
    wrapped = ts.wrap(plain)
    seen: list[str] = []
    _patch_request_through(wrapped, seen)
    stream = stitched(SYNC_ENTRIES[entry], wrapped)  # any UnstitchedStreamWarning fails here
    assert [c.parsed for c in stream.tool_calls] == EXPECTED
    assert seen == ["request"]
    with plain.chat.completions.create(**ARGS, stream=True) as own:  # the plain client stays plain
        assert not isinstance(own, ts.StitchedStream)
        list(own)


@pytest.mark.parametrize("entry", sorted(ASYNC_ENTRIES))
async def test_async_request_patched_through_the_wrapper_neither_warns_nor_stitches_twice(
    server: LocalServer, entry: str
) -> None:
    server.enqueue(StreamScript(seed_stream(), fragment=7))
    wrapped = ts.wrap(server.async_client())
    seen: list[str] = []
    _patch_request_through(wrapped, seen)
    stream = await astitched(ASYNC_ENTRIES[entry], wrapped)
    assert [c.status for c in stream.tool_calls] == ["ready", "ready"]
    assert seen == ["request"]
