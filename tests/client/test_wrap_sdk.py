"""``ts.wrap`` with the real ``openai`` client over real HTTP against the local test server."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import openai
import pytest
from openai.types.chat import ChatCompletion, ChatCompletionChunk

import toolstitch as ts
from tests.conftest import WEATHER_TOOLS as TOOLS
from tests.core.test_accumulator import seed_stream
from toolstitch.testing import ErrorReply, LocalServer, StreamScript, chunk, tool_call_chunks

MESSAGES = [{"role": "user", "content": "Weather in Shenzhen and Shanghai?"}]
EXPECTED = [{"city": "深圳"}, {"city": "上海", "unit": '"u"'}]


def create(client: Any, **extra: Any) -> Any:
    return client.chat.completions.create(
        model="test-model", messages=MESSAGES, tools=TOOLS, stream=True, **extra
    )


@pytest.mark.parametrize("fragment", [None, 1, 5])
def test_sync_stream_yields_the_sdks_chunks_and_merges_calls(
    server: LocalServer, fragment: int | None
) -> None:
    server.enqueue(StreamScript(seed_stream(), fragment=fragment))
    server.enqueue(StreamScript(seed_stream(), fragment=fragment))
    plain = [c.model_dump() for c in create(server.client())]

    client = ts.wrap(server.client())
    seen: list[Any] = []
    with create(client) as stream:
        assert isinstance(stream, ts.StitchedStream)
        for c in stream:
            assert isinstance(c, ChatCompletionChunk)
            seen.append(c)
    assert [c.model_dump() for c in seen] == plain  # the same chunks, unchanged, in order
    completion = stream.get_final_completion()
    assert isinstance(completion, ChatCompletion)
    assert [c.parsed for c in stream.tool_calls] == EXPECTED
    assert [c.status for c in stream.tool_calls] == ["ready", "ready"]
    assert completion.choices[0].finish_reason == "tool_calls"
    assert server.requests[-1]["tools"] == TOOLS


def test_chunks_are_the_very_objects_the_sdk_yields(server: LocalServer) -> None:
    server.enqueue(StreamScript(seed_stream()))
    sdk_stream = server.client().chat.completions.create(model="m", messages=MESSAGES, stream=True)
    yielded: list[Any] = []

    class Spy:
        def __iter__(self) -> Iterator[Any]:
            for c in sdk_stream:
                yielded.append(c)
                yield c

        def close(self) -> None:
            sdk_stream.close()

    stream = ts.StitchedStream(Spy(), ts.Accumulator())
    assert all(a is b for a, b in zip(list(stream), yielded, strict=True))


async def test_async_stream(server: LocalServer) -> None:
    server.enqueue(StreamScript(seed_stream(), fragment=3))
    client = ts.wrap(server.async_client())
    stream = await create(client)
    assert isinstance(stream, ts.AsyncStitchedStream)
    async with stream:
        count = 0
        async for c in stream:
            assert isinstance(c, ChatCompletionChunk)
            count += 1
    assert count == len(seed_stream())
    completion = await stream.get_final_completion()
    assert completion.choices[0].message.tool_calls is not None
    assert [c.parsed for c in stream.tool_calls] == EXPECTED


async def test_async_get_final_completion_drains_the_stream(server: LocalServer) -> None:
    server.enqueue(StreamScript(seed_stream()))
    stream = await create(ts.wrap(server.async_client()))
    completion = await stream.get_final_completion()
    assert [tc.function.arguments for tc in completion.choices[0].message.tool_calls or []] == [
        '{"city":"深圳"}',
        '{"city":"上海","unit":"\\"u\\""}',
    ]


def test_get_final_completion_drains_the_stream(server: LocalServer) -> None:
    server.enqueue(StreamScript(seed_stream()))
    stream = create(ts.wrap(server.client()))
    completion = stream.get_final_completion()
    assert len(completion.choices[0].message.tool_calls or []) == 2


def test_azure_client_is_wrapped_too(server: LocalServer) -> None:
    server.enqueue(StreamScript(seed_stream()))
    azure = openai.AzureOpenAI(
        azure_endpoint=server.base_url.removesuffix("/v1"),
        api_key="test",
        api_version="2024-10-21",
        max_retries=0,
    )
    stream = create(ts.wrap(azure))
    assert isinstance(stream, ts.StitchedStream)
    stream.get_final_completion()
    assert [c.parsed for c in stream.tool_calls] == EXPECTED


def test_everything_else_passes_through(server: LocalServer) -> None:
    original = server.client()
    client = ts.wrap(original)
    assert client.api_key == original.api_key
    assert client.base_url == original.base_url
    assert client.unwrapped is original
    assert [m.id for m in client.models.list()] == ["test-model"]

    server.enqueue(StreamScript(seed_stream()))
    completion = client.chat.completions.create(model="m", messages=MESSAGES)  # not streamed
    assert isinstance(completion, ChatCompletion)

    server.enqueue(StreamScript(seed_stream()))
    stream = create(client.with_options(timeout=5))  # still intercepted after with_options
    assert isinstance(stream, ts.StitchedStream)
    stream.get_final_completion()
    assert ts.wrap(client) is client


def test_wrap_refuses_what_is_not_a_client() -> None:
    with pytest.raises(TypeError, match=r"openai\.OpenAI"):
        ts.wrap(object())  # type: ignore[arg-type]


def test_closing_partway_closes_the_response_and_leaves_calls_incomplete(server: LocalServer) -> None:
    server.enqueue(StreamScript(seed_stream(), delay=0.001))
    with create(ts.wrap(server.client())) as stream:
        for n, _ in enumerate(stream):
            if n == 4:
                break
    assert stream.response.is_closed
    assert stream.tool_calls and all(c.status == "incomplete" for c in stream.tool_calls)
    with pytest.raises(ts.IncompleteStreamError):
        stream.get_final_completion()


def test_in_band_error_reaches_the_caller_unchanged(server: LocalServer) -> None:
    items: list[Any] = seed_stream()[:5]
    items.append('event: error\ndata: {"error": {"message": "overloaded", "type": "server_error"}}\n\n')
    server.enqueue(StreamScript(items, done=False))
    stream = create(ts.wrap(server.client()))
    with pytest.raises(openai.APIError, match="overloaded"):
        for _ in stream:
            pass
    assert [c.status for c in stream.tool_calls] == ["incomplete", "incomplete"]
    assert isinstance(stream.accumulator.error, openai.APIError)
    with pytest.raises(ts.IncompleteStreamError):
        stream.get_final_completion()


def test_dropped_connection_reaches_the_caller_unchanged(server: LocalServer) -> None:
    server.enqueue(StreamScript(seed_stream(), cut_after=6))
    stream = create(ts.wrap(server.client()))
    with pytest.raises(openai.APIConnectionError):
        for _ in stream:
            pass
    assert all(c.status == "incomplete" for c in stream.tool_calls)
    assert not any(c.ready for c in stream.tool_calls)


async def test_async_dropped_connection(server: LocalServer) -> None:
    server.enqueue(StreamScript(seed_stream(), cut_after=6, fragment=2))
    stream = await create(ts.wrap(server.async_client()))
    with pytest.raises(openai.APIConnectionError):
        async for _ in stream:
            pass
    assert all(c.status == "incomplete" for c in stream.tool_calls)


def test_http_errors_are_the_sdks(server: LocalServer) -> None:
    server.enqueue(ErrorReply(500))
    with pytest.raises(openai.InternalServerError):
        create(ts.wrap(server.client()))


def test_schema_is_checked_with_the_requests_tools(server: LocalServer) -> None:
    server.enqueue(StreamScript(tool_call_chunks([("call_1", "get_weather", '{"town": "Oslo"}')], pieces=4)))
    stream = create(ts.wrap(server.client()))
    stream.get_final_completion()
    (call,) = stream.tool_calls
    assert call.status == "invalid"
    assert isinstance(call.error, ts.errors.SchemaViolation)
    assert call.error.raw == '{"town": "Oslo"}'


def test_usage_from_a_final_chunk_with_empty_choices(server: LocalServer) -> None:
    usage = {"prompt_tokens": 10, "completion_tokens": 4, "total_tokens": 14}
    items = [
        *tool_call_chunks([("call_1", "get_weather", '{"city": "Oslo"}')]),
        chunk(choices=[], usage=usage),
    ]
    server.enqueue(StreamScript(items))
    stream = create(ts.wrap(server.client()), stream_options={"include_usage": True})
    completion = stream.get_final_completion()
    assert completion.usage is not None and completion.usage.total_tokens == 14


def test_text_tool_calls_are_recovered_only_when_asked(server: LocalServer) -> None:
    text = 'Let me check. <tool_call>{"name": "get_weather", "arguments": {"city": "Oslo"}}</tool_call>'
    items = [chunk(delta={"role": "assistant", "content": text[:20]}), chunk(delta={"content": text[20:]})]
    items.append(chunk(delta={}, finish_reason="stop"))
    server.enqueue(StreamScript(items), StreamScript(items))

    plain = create(ts.wrap(server.client()))
    plain.get_final_completion()
    assert plain.tool_calls == []

    stream = create(ts.wrap(server.client(), recover_text_tool_calls=True))
    stream.get_final_completion()
    (call,) = stream.tool_calls
    assert (call.name, call.parsed, call.status) == ("get_weather", {"city": "Oslo"}, "ready")
    assert call.id
    assert "tool_call_in_content" in {a.code for a in stream.anomalies}


def test_wrapping_a_wrapped_client_with_new_options_applies_them(server: LocalServer) -> None:
    original = server.client()
    once = ts.wrap(original)
    assert ts.wrap(once) is once
    tight = ts.wrap(once, limits=ts.Limits(max_argument_bytes=5))
    assert tight is not once and tight.unwrapped is original
    server.enqueue(StreamScript(seed_stream()))
    stream = create(tight)
    stream.get_final_completion()
    assert all(isinstance(c.error, ts.errors.LimitExceeded) for c in stream.tool_calls)
