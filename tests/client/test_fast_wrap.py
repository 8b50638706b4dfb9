"""``ts.wrap(client, decode="fast")``: the same stitched stream, chunk for chunk, as ``decode="sdk"``.

Over real HTTP from :class:`toolstitch.testing.LocalServer`, sync and async, on every corpus body
and on the streaming paths wrap intercepts: the chunks (compared with ``same_value``: class,
``__dict__``, extras and ``model_fields_set`` at every level), the calls and their statuses, the
final completion, the error raised, and the recording are identical.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import toolstitch as ts
from tests.conftest import offered
from tests.corpus import CORPUS, ProviderStream
from toolstitch.client._fast import same_value
from toolstitch.testing import LocalServer, StreamScript, tool_call_chunks

REQUEST: dict[str, Any] = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}


@pytest.fixture(scope="module")
def shared_server() -> Iterator[LocalServer]:
    with LocalServer() as srv:
        yield srv


def _request(stream: ProviderStream) -> dict[str, Any]:
    return {**REQUEST, "tools": stream.recorded_tools or offered(["get_weather", "f", "g"])}


def _final(stream: Any) -> Any:
    try:
        return stream.get_final_completion().model_dump()
    except Exception as exc:
        return (type(exc), str(exc))


def _outcome(stream: Any, chunks: list[Any], error: BaseException | None, final: Any) -> dict[str, Any]:
    return {
        "chunks": chunks,
        "error": None if error is None else (type(error), str(error), getattr(error, "body", None)),
        "calls": [(c.index, c.id, c.name, c.arguments, c.status, repr(c.error)) for c in stream.tool_calls],
        "anomalies": [a.code for a in stream.anomalies],
        "final": final,
    }


def _sync(
    server: LocalServer, decode: str, request: dict[str, Any], record: Path | None = None
) -> dict[str, Any]:
    with server.client(max_retries=0) as raw:
        client = ts.wrap(raw, decode=decode, record=record)  # type: ignore[call-overload]
        stream = client.chat.completions.create(**request)
        chunks: list[Any] = []
        error = None
        try:
            chunks.extend(stream)
        except Exception as exc:
            error = exc
        return _outcome(stream, chunks, error, _final(stream))


def _async(server: LocalServer, decode: str, request: dict[str, Any]) -> dict[str, Any]:
    async def main() -> dict[str, Any]:
        async with server.async_client(max_retries=0) as raw:
            client = ts.wrap(raw, decode=decode)  # type: ignore[call-overload]
            stream = await client.chat.completions.create(**request)
            chunks: list[Any] = []
            error = None
            try:
                async for chunk in stream:
                    chunks.append(chunk)
            except Exception as exc:
                error = exc
            try:
                final: Any = (await stream.get_final_completion()).model_dump()
            except Exception as exc:
                final = (type(exc), str(exc))
            return _outcome(stream, chunks, error, final)

    return asyncio.run(main())


def _assert_same(expected: dict[str, Any], got: dict[str, Any]) -> None:
    assert same_value(expected.pop("chunks"), got.pop("chunks"))
    assert got == expected


@pytest.mark.parametrize("stream", CORPUS, ids=lambda s: s.name)
def test_corpus_streams_stitch_the_same_with_fast_decoding(
    shared_server: LocalServer, stream: ProviderStream
) -> None:
    script = StreamScript.from_sse(stream.body, fragment=5)
    request = _request(stream)
    shared_server.enqueue(script, script, script, script)
    expected = _sync(shared_server, "sdk", request)
    _assert_same(dict(expected), _sync(shared_server, "fast", request))
    _assert_same(dict(expected), _async(shared_server, "sdk", request))
    _assert_same(dict(expected), _async(shared_server, "fast", request))


def test_cut_and_in_band_error_streams_raise_the_same(shared_server: LocalServer) -> None:
    chunks = tool_call_chunks([("call_1", "f", '{"a": 1}'), ("call_2", "g", "{}")], pieces=4)
    request = {**REQUEST, "tools": offered(["f", "g"])}
    for script in (
        StreamScript(chunks, cut_after=5),
        StreamScript([*chunks[:4], {"error": {"message": "overloaded"}}], done=False),
    ):
        shared_server.enqueue(script, script, script, script)
        expected = _sync(shared_server, "sdk", request)
        assert expected["error"] is not None
        _assert_same(dict(expected), _sync(shared_server, "fast", request))
        _assert_same(dict(expected), _async(shared_server, "sdk", request))
        _assert_same(dict(expected), _async(shared_server, "fast", request))


def test_the_recording_sees_the_same_chunks(shared_server: LocalServer, tmp_path: Path) -> None:
    script = StreamScript(tool_call_chunks([("call_1", "f", '{"a": "é"}')], pieces=6), fragment=3)
    request = {**REQUEST, "tools": offered(["f"])}
    shared_server.enqueue(script, script)
    recorded = []
    for decode in ("sdk", "fast"):
        folder = tmp_path / decode
        _sync(shared_server, decode, request, record=folder)
        (file,) = folder.iterdir()
        lines = [json.loads(line) for line in file.read_text(encoding="utf-8").splitlines()]
        recorded.append([line["chunk"] for line in lines if line["type"] == "chunk"])
    assert recorded[0] == recorded[1] and len(recorded[0]) == 9


def test_other_streaming_paths_decode_fast_too(shared_server: LocalServer) -> None:
    script = StreamScript(tool_call_chunks([("call_1", "f", '{"a": 1}')], pieces=3))
    request = {**REQUEST, "tools": offered(["f"])}
    shared_server.enqueue(script, script, script)
    with shared_server.client(max_retries=0) as raw:
        client = ts.wrap(raw, decode="fast")
        expected = list(raw.chat.completions.create(**request))
        stream = client.chat.completions.with_raw_response.create(**request).parse()
        assert same_value(expected, list(stream))
        assert type(stream.sdk_stream._client).__name__ == "_FastClient"
        with client.chat.completions.with_streaming_response.create(**request) as response:
            assert same_value(expected, list(response.parse()))
        assert [c.status for c in stream.tool_calls] == ["ready"]


def test_decode_is_checked_and_part_of_the_options(shared_server: LocalServer) -> None:
    with shared_server.client() as raw:
        with pytest.raises(ValueError, match="decode"):
            ts.wrap(raw, decode="turbo")  # type: ignore[call-overload]
        fast = ts.wrap(raw)  # decode="fast" is the default: wrapping again with it changes nothing
        assert ts.wrap(fast) is fast and ts.wrap(fast, decode="fast") is fast
        plain = ts.wrap(fast, decode="sdk")
        assert plain is not fast and plain.unwrapped is raw


def test_a_stream_inside_an_instrumentation_proxy_decodes_fast(shared_server: LocalServer) -> None:
    class Proxy:  # the shape of a wrapt proxy (OpenTelemetry's instrumentations use one)
        def __init__(self, wrapped: Any) -> None:
            self.__wrapped__ = wrapped

        def __iter__(self) -> Any:
            return iter(self.__wrapped__)

        def close(self) -> None:
            self.__wrapped__.close()

    script = StreamScript(tool_call_chunks([("call_1", "f", '{"a": 1}')], pieces=3))
    shared_server.enqueue(script, script)
    request = {**REQUEST, "tools": offered(["f"])}
    with shared_server.client(max_retries=0) as raw:
        expected = list(raw.chat.completions.create(**request))
        sdk_create = raw.chat.completions.create
        raw.chat.completions.create = lambda *a, **k: Proxy(sdk_create(*a, **k))  # type: ignore[method-assign]
        stream = ts.wrap(raw, decode="fast").chat.completions.create(**request)
        assert type(stream.sdk_stream.__wrapped__._client).__name__ == "_FastClient"
        assert same_value(expected, list(stream))
        assert [c.status for c in stream.tool_calls] == ["ready"]
