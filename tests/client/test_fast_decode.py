"""``decode="fast"`` gives exactly what the SDK gives: chunk by chunk, error by error.

* The builder: every chunk of the conformance corpus, mutated corpus chunks (the hostile values of
  ``tests/core/test_adversarial_mutations.py``) and hypothesis-made chunk objects either build fast
  into a value equal to ``openai._models.construct_type``'s (same classes, ``__dict__``, extras and
  ``model_fields_set`` at every level) or are left to the SDK.
* The whole stream, over real HTTP from :class:`toolstitch.testing.LocalServer`, sync and async:
  the corpus bodies re-cut into tiny writes, mutated bodies, cut connections, in-band errors and
  invalid UTF-8 give the same chunks and the same exceptions (type, message, body) with
  :func:`toolstitch.client._fast.install` as without.
"""

from __future__ import annotations

import asyncio
import copy
import json
import warnings
from collections.abc import Iterator
from typing import Any

import openai
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from openai._models import construct_type
from openai.types.chat import ChatCompletionChunk

from tests.conftest import examples
from tests.core.test_adversarial_mutations import HOSTILE, STREAMS, _mutate
from tests.corpus import CORPUS, ProviderStream
from toolstitch.client import _fast, _fast_events
from toolstitch.client._fast import build_chunk, same_value
from toolstitch.errors import FastDecodeWarning
from toolstitch.testing import LocalServer, StreamScript, tool_call_chunks


@pytest.fixture(scope="module")
def shared_server() -> Iterator[LocalServer]:
    with LocalServer() as srv:
        yield srv


# ----------------------------------------------------------------------------- the builder


def _sdk(data: Any) -> Any:
    try:
        return construct_type(type_=ChatCompletionChunk, value=data)
    except Exception as exc:
        return exc


def _check_chunk(data: Any) -> bool:
    """The fast builder's chunk equals the SDK's, or the builder declined; True when it built."""
    built = build_chunk(copy.deepcopy(data))
    if built is None:
        return False
    expected = _sdk(copy.deepcopy(data))
    assert not isinstance(expected, Exception), (data, expected)
    assert same_value(built, expected), data
    assert built.model_dump() == expected.model_dump() or "nan" in repr(data)
    return True


def test_self_check_passes_on_the_installed_release() -> None:
    status = _fast.fast_decode_status()
    assert (status.builder, status.decoder, status.reason) == (True, True, "")
    # Responses events build fast wherever the release has the Responses API; the 1.55.3 floor has
    # none, and there nothing is said (tests/client/test_fast_events.py holds them equal).
    assert (status.events, status.events_reason) == (_fast_events.EVENT_TYPE is not None, "")


def test_every_corpus_chunk_builds_equal_to_the_sdk() -> None:
    built = total = 0
    for name, chunks, _ in STREAMS:
        for data in chunks:
            total += 1
            built += _check_chunk(data)
            if name.startswith("openai-python/") or "/gpt-4o" in name:  # OpenAI itself
                assert build_chunk(copy.deepcopy(data)) is not None, (name, data)  # the fast path is taken
    assert built > total * 0.7, (built, total)


def test_sample_chunks_of_the_self_check_build_equal_to_the_sdk() -> None:
    for data in _fast._sample_chunks():
        _check_chunk(data)


@settings(
    max_examples=examples(400), suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
@given(data=st.data())
def test_mutated_corpus_chunks_build_equal_to_the_sdk(data: st.DataObject) -> None:
    _, chunks, _ = STREAMS[data.draw(st.integers(0, len(STREAMS) - 1))]
    for chunk in _mutate(chunks, data):
        _check_chunk(chunk)


scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.integers(-(2**70), 2**70), st.floats(), st.text(max_size=4),
    st.sampled_from(["function", "", "assistant", "stop", "tool_calls", "eos", "chat.completion.chunk"]),
    st.sampled_from([{}, [], [1], {"a": None}, "\ud83d"]),
)  # fmt: skip


def _maybe(valid: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(valid, valid, valid, scalars)


def _obj(required: dict[str, Any], optional: dict[str, Any]) -> st.SearchStrategy[Any]:
    extras = st.dictionaries(
        st.sampled_from(["x", "_x", "_fields_set", "model_config", "__cls"]), scalars, max_size=2
    )
    base = st.fixed_dictionaries(
        {k: _maybe(v) for k, v in required.items()}, optional={k: _maybe(v) for k, v in optional.items()}
    )
    return st.one_of(base, st.tuples(base, extras).map(lambda t: {**t[0], **t[1]}))


text = st.one_of(st.none(), st.text(max_size=6))
function = _obj({}, {"name": text, "arguments": text})
tool_call = _obj(
    {"index": st.integers(0, 3)},
    {"id": text, "type": st.sampled_from(["function", None, ""]), "function": function},
)
usage = _obj(
    {
        "prompt_tokens": st.integers(0, 9),
        "completion_tokens": st.integers(0, 9),
        "total_tokens": st.integers(),
    },
    {
        "prompt_tokens_details": _obj({}, {"cached_tokens": st.integers()}),
        "completion_tokens_details": st.none(),
    },
)
delta = _obj(
    {},
    {
        "role": st.sampled_from(["assistant", "model", None]),
        "content": text,
        "refusal": text,
        "tool_calls": st.one_of(st.none(), st.lists(tool_call, max_size=3)),
        "function_call": function,
        "reasoning_content": text,
    },
)
logprob = _obj(
    {"token": st.text(max_size=2), "logprob": st.one_of(st.floats(), st.integers()), "bytes": st.none()}, {}
)
choice = _obj(
    {"index": st.integers(0, 2), "delta": delta},
    {
        "finish_reason": st.sampled_from([None, "stop", "tool_calls", "length", "eos", ""]),
        "logprobs": st.one_of(st.none(), _obj({}, {"content": st.lists(logprob, max_size=2)})),
    },
)
chunk_objects = _obj(
    {
        "id": st.text(max_size=3),
        "object": st.just("chat.completion.chunk"),
        "created": st.integers(0, 2**40),
        "model": st.text(max_size=3),
        "choices": st.lists(choice, max_size=3),
    },
    {
        "usage": st.one_of(st.none(), usage),
        "system_fingerprint": text,
        "service_tier": st.sampled_from([None, "default", "auto", "weird"]),
    },
)


@settings(max_examples=examples(1500), suppress_health_check=[HealthCheck.too_slow])
@given(data=chunk_objects)
def test_generated_chunks_build_equal_to_the_sdk(data: Any) -> None:
    _check_chunk(data)


@pytest.mark.parametrize("data", HOSTILE[:20], ids=range(20))
def test_hostile_top_level_values_are_left_to_the_sdk(data: Any) -> None:
    assert build_chunk(data) is None


def test_a_quirky_chunk_falls_back_and_a_plain_one_does_not() -> None:
    plain = tool_call_chunks([("call_1", "f", "{}")])
    assert all(build_chunk(copy.deepcopy(c)) is not None for c in plain)
    quirky = copy.deepcopy(plain[1])
    del quirky["choices"][0]["delta"]["tool_calls"][0]["index"]  # Mistral, Gemini: no index
    assert build_chunk(quirky) is None


# ----------------------------------------------------------------------------- over HTTP


REQUEST: dict[str, Any] = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}


def _error(exc: BaseException) -> tuple[Any, ...]:
    return (type(exc), str(exc), getattr(exc, "body", None), getattr(exc, "message", None))


def _compare(expected: list[Any], got: list[Any]) -> None:
    assert len(got) == len(expected)
    for a, b in zip(expected, got, strict=True):
        if isinstance(a, BaseException):
            assert isinstance(b, BaseException) and _error(a) == _error(b)
        else:
            assert same_value(a, b)


def _read_sync(server: LocalServer, fast: bool, installs: bool = True, **client: Any) -> list[Any]:
    out: list[Any] = []
    with server.client(max_retries=0, **client) as c:
        try:
            stream = c.chat.completions.create(**REQUEST)
            if fast:
                assert _fast.install(stream) is installs
            out.extend(stream)
        except Exception as exc:
            out.append(exc)
    return out


def _read_async(server: LocalServer, fast: bool) -> list[Any]:
    async def main() -> list[Any]:
        out: list[Any] = []
        async with server.async_client(max_retries=0) as c:
            try:
                stream = await c.chat.completions.create(**REQUEST)
                if fast:
                    assert _fast.install(stream)
                async for chunk in stream:
                    out.append(chunk)
            except Exception as exc:
                out.append(exc)
        return out

    return asyncio.run(main())


def _both_ways(server: LocalServer, script: StreamScript) -> list[Any]:
    """The script read plainly and with fast decoding, sync and async; all four must agree."""
    server.enqueue(script, script, script, script)
    expected = _read_sync(server, False)
    _compare(expected, _read_sync(server, True))
    _compare(expected, _read_async(server, False))
    _compare(expected, _read_async(server, True))
    return expected


@pytest.mark.parametrize("stream", CORPUS, ids=lambda s: s.name)
def test_corpus_bodies_over_http_give_the_sdk_chunks_and_errors(
    shared_server: LocalServer, stream: ProviderStream
) -> None:
    for fragment in (None, 3):
        _both_ways(shared_server, StreamScript.from_sse(stream.body, fragment=fragment))


@settings(
    max_examples=examples(60),
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.function_scoped_fixture,
        HealthCheck.data_too_large,
    ],
)
@given(data=st.data())
def test_mutated_corpus_bodies_over_http_give_the_sdk_chunks_and_errors(
    shared_server: LocalServer, data: st.DataObject
) -> None:
    _, chunks, _ = STREAMS[data.draw(st.integers(0, len(STREAMS) - 1))]
    items = [f"data: {json.dumps(c)}\n\n" for c in _mutate(chunks, data)]
    small = sum(len(i) for i in items) < 20_000
    fragment = data.draw(st.sampled_from([None, 1, 7])) if small else None
    cut_after = data.draw(st.one_of(st.none(), st.integers(0, len(items))))
    _both_ways(shared_server, StreamScript(items, fragment=fragment, cut_after=cut_after))


ENVELOPE = '"object":"chat.completion.chunk","created":1,"model":"m","choices":[]'
ODD_BODIES = {
    "in-band error": 'data: {"id":"c","choices":[]}\n\ndata: {"error": {"message": "busy", "code": 5}}\n\n',
    "error without message": 'data: {"error": {"code": 1}}\n\n',
    "error event": 'event: error\ndata: {"error": {"message": "bad"}}\n\n',
    "thread event": 'event: thread.run\ndata: {"error": "x"}\n\n',
    "not json": "data: {nope\n\n",
    "empty data after id": "id: 1\n\n\n",
    "done variants": 'data: {"a":1}\r\n\r\ndata: [DONE] trailing\r\n\r\ndata: {"b":2}\n\n',
    "comments and crlf": ': hi\r\nevent: delta\r\ndata:{"id":"c",' + ENVELOPE + "}\r\n\r\n",
    "multi-line data": 'data: {"id":"c",\ndata: "choices":[]}\n\n',
    "list": "data: [1, 2]\n\n",
    "cut mid event": 'data: {"id":"c",' + ENVELOPE + '}\n\ndata: {"id',
    "nan": 'data: {"id":"c",' + ENVELOPE + ',"x":NaN}\n\n',
    "duplicate keys": 'data: {"id":"c","id":"d",' + ENVELOPE + "}\n\n",
    "lone surrogate": 'data: {"id":"\\ud800",' + ENVELOPE + "}\n\n",
}


@pytest.mark.parametrize("name", sorted(ODD_BODIES))
@pytest.mark.parametrize("fragment", [None, 1])
def test_odd_bodies_over_http_give_the_sdk_chunks_and_errors(
    shared_server: LocalServer, name: str, fragment: int | None
) -> None:
    body = ODD_BODIES[name]
    _both_ways(shared_server, StreamScript([body], fragment=fragment, done=False))


def test_invalid_utf8_raises_the_sdk_error_after_the_same_chunks(shared_server: LocalServer) -> None:
    good = tool_call_chunks([("call_1", "f", '{"a": 1}')])
    body = "".join(f"data: {json.dumps(c)}\n\n" for c in good[:2]).encode() + b"data: \xff\n\n"

    class Raw(StreamScript):
        def writes(self) -> list[bytes]:
            return [body]

    outcome = _both_ways(shared_server, Raw([], done=False))
    assert isinstance(outcome[-1], UnicodeDecodeError) and len(outcome) == 3


def test_a_strictly_validating_client_keeps_the_sdk_decoding(shared_server: LocalServer) -> None:
    shared_server.enqueue(StreamScript(tool_call_chunks([("call_1", "f", "{}")])))
    out = _read_sync(shared_server, True, installs=False, _strict_response_validation=True)
    assert all(isinstance(c, ChatCompletionChunk) for c in out)


def test_a_release_that_fails_the_self_check_keeps_the_sdk_decoding_and_warns_once(
    shared_server: LocalServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    failed = _fast._Status(False, False, "openai 0.0: its chunks differ from the fast builder's")
    monkeypatch.setattr(_fast, "fast_decode_status", lambda: failed)
    _fast._warn_once.cache_clear()
    script = StreamScript(tool_call_chunks([("call_1", "f", "{}")]))
    shared_server.enqueue(script, script)
    with pytest.warns(FastDecodeWarning, match="openai 0.0"):
        first = _read_sync(shared_server, True, installs=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _compare(first, _read_sync(shared_server, True, installs=False))
    _fast._warn_once.cache_clear()


def test_installing_twice_or_on_something_else_is_harmless(shared_server: LocalServer) -> None:
    shared_server.enqueue(StreamScript(tool_call_chunks([("call_1", "f", "{}")])))
    with shared_server.client() as c:
        stream = c.chat.completions.create(**REQUEST)
        assert _fast.install(stream) and _fast.install(stream)
        assert _fast.real_client(stream._client) is c
        assert stream._client.api_key == c.api_key
        assert len(list(stream)) == 5
    assert not _fast.install(object())
    assert isinstance(openai.Stream, type)


# ----------------------------------------------------------------------------- raw bytes (ts.stitch)


def _from_bytes(reads: list[bytes], decode: str, is_async: bool) -> list[Any]:
    out: list[Any] = []
    if not is_async:
        try:
            out.extend(_fast.stream_from_bytes(iter(reads), decode=decode))  # type: ignore[arg-type]
        except Exception as exc:
            out.append(exc)
        return out

    async def source() -> Any:
        for r in reads:
            yield r

    async def main() -> None:
        try:
            async for chunk in _fast.stream_from_bytes(source(), decode=decode):  # type: ignore[arg-type]
                out.append(chunk)
        except Exception as exc:
            out.append(exc)

    asyncio.run(main())
    return out


def _writes(script: StreamScript) -> list[bytes]:
    return [w if isinstance(w, bytes) else w.encode() for w in script.writes()]


@pytest.mark.parametrize("stream", CORPUS, ids=lambda s: s.name)
def test_raw_corpus_bytes_give_what_the_sdk_gives_over_http(
    shared_server: LocalServer, stream: ProviderStream
) -> None:
    script = StreamScript.from_sse(stream.body, fragment=4)
    shared_server.enqueue(script)
    expected = _read_sync(shared_server, False)
    for decode in ("sdk", "fast"):
        for is_async in (False, True):
            got = _from_bytes(_writes(script), decode, is_async)
            # The request behind an in-band APIError differs (there was none): compare the rest.
            _compare([_no_request(x) for x in expected], [_no_request(x) for x in got])


def _no_request(value: Any) -> Any:
    if isinstance(value, openai.APIError):
        return (type(value), value.message, value.body, value.code, value.type, value.param)
    return value


@pytest.mark.parametrize("name", sorted(ODD_BODIES))
def test_raw_odd_bytes_decode_fast_as_the_sdk_does(name: str) -> None:
    body = ODD_BODIES[name].encode()
    reads = [body[k : k + 3] for k in range(0, len(body), 3)]
    expected = _from_bytes(reads, "sdk", False)
    for is_async in (False, True):
        _compare(expected, _from_bytes(reads, "fast", is_async))
    assert isinstance(_fast.stream_from_bytes(iter(reads)), openai.Stream)
    with pytest.raises(ValueError, match="decode"):
        _fast.stream_from_bytes(iter(reads), decode="turbo")  # type: ignore[arg-type]


def test_a_client_that_overrides_the_sdk_processing_keeps_it(shared_server: LocalServer) -> None:
    class Custom(openai.OpenAI):
        def _process_response_data(self, *, data: object, cast_to: Any, response: Any) -> Any:
            return ("mine", data)

    shared_server.enqueue(StreamScript(tool_call_chunks([("call_1", "f", "{}")])))
    with Custom(api_key="sk-test", base_url=shared_server.base_url, max_retries=0) as c:
        stream = c.chat.completions.create(**REQUEST)
        assert not _fast.install(stream)
        assert all(item[0] == "mine" for item in stream)
