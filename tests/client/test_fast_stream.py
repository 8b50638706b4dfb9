"""A fast-decoded sync Responses stream runs ``_fast_stream.iterate``: the SDK's own loop, rule for rule.

* The self-check: on the installed release both loops agree on every sample body (or the SDK's loop
  is kept), and loops that break any one rule of the module (a drain after ``[DONE]``,
  ``thread.`` events, the in-band error's message or body, non-mapping payloads) are caught by it.
* Over real HTTP from :class:`toolstitch.testing.LocalServer`: the wrapped stream yields the plain
  client's events and raises the plain client's errors (``event: error``, an ``error`` in a
  payload, a body that is not JSON, ``[DONE]`` with events after it), and closing it early closes
  the response. The async twin and the other options keep the SDK's loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Mapping
from typing import Any

import openai
import pytest

pytest.importorskip("openai.types.responses", reason="this openai release has no Responses API")

import toolstitch as ts
from toolstitch.client import _fast, _fast_stream
from toolstitch.client._fast import same_value
from toolstitch.testing import LocalServer, StreamScript, response_events

TOOLS = [{"type": "function", "name": "f", "parameters": {"type": "object"}}]


def _version() -> tuple[int, ...]:
    return tuple(int(p) for p in openai.__version__.split(".")[:2] if p.isdigit())


@pytest.fixture(scope="module")
def server() -> Iterator[LocalServer]:
    with LocalServer() as srv:
        yield srv


# ----------------------------------------------------------------------------- the self-check


def test_the_loop_runs_where_it_agrees_with_the_installed_release() -> None:
    agrees = all(
        same_value(_fast._loop_outcome(reads, None), _fast._loop_outcome(reads, _fast_stream.iterate))
        for reads in _fast_stream.SAMPLE_BODIES
    )
    assert _fast.loop_status() is agrees
    if _version() >= (3, 57):  # the releases this loop was written from: it must run there
        assert _fast.loop_status()


def _broken(rule: str) -> Any:
    """``iterate`` with one rule broken."""

    def loop(sdk_stream: Any) -> Iterator[Any]:
        response = sdk_stream.response
        process = sdk_stream._client._process_response_data
        cast_to = sdk_stream._cast_to
        try:
            for sse in sdk_stream._iter_events():
                if sse.data.startswith("[DONE]"):
                    if rule == "drain":
                        continue
                    break
                event = sse.event
                if rule != "thread" and event and event.startswith("thread."):
                    yield process(
                        data={"data": sse.json(), "event": event}, cast_to=cast_to, response=response
                    )
                    continue
                data = sse.json()
                if rule != "mapping" and not isinstance(data, Mapping):
                    yield process(data=data, cast_to=cast_to, response=response)
                    continue
                if rule != "error" and data.get("error"):
                    message = data["error"].get("message") if isinstance(data["error"], Mapping) else None
                    if rule == "message" and not message:
                        message = "An error occurred"
                    if not message or not isinstance(message, str):
                        message = "An error occurred during streaming"
                    body = data if rule == "body" else data["error"]
                    raise openai.APIError(message=message, request=response.request, body=body)
                yield process(data=data, cast_to=cast_to, response=response)
        finally:
            response.close()

    return loop


_AGREES = pytest.mark.skipif(
    not _fast.loop_status(), reason="this release's loop differs from the module's: it keeps its own"
)


@_AGREES
@pytest.mark.parametrize("rule", ["drain", "thread", "mapping", "error", "message", "body"])
def test_the_sample_bodies_catch_a_loop_that_breaks_any_rule(rule: str) -> None:
    loop = _broken(rule)
    assert not all(
        same_value(_fast._loop_outcome(reads, None), _fast._loop_outcome(reads, loop))
        for reads in _fast_stream.SAMPLE_BODIES
    )


@_AGREES
def test_the_unbroken_twin_of_those_loops_agrees() -> None:
    """The broken loops above differ only where they say (so each test fails for its rule)."""
    loop = _broken("")
    for reads in _fast_stream.SAMPLE_BODIES:
        assert same_value(_fast._loop_outcome(reads, None), _fast._loop_outcome(reads, loop))


def test_a_release_whose_loop_reads_a_name_it_does_not_know_keeps_its_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_fast_stream, "KNOWN_NAMES", _fast_stream.KNOWN_NAMES - {"stream_mode"})
    assert not _fast._loop_agrees()


@pytest.mark.parametrize(
    ("options", "plain"),
    [
        (None, True),
        (type("O", (), {})(), True),
        (type("O", (), {"stream_mode": "legacy", "synthesize_event_and_data": False})(), True),
        (type("O", (), {"stream_mode": "events"})(), False),
        (type("O", (), {"synthesize_event_and_data": True})(), False),
    ],
)
def test_only_the_plain_loop_s_options_run_it(options: Any, plain: bool) -> None:
    assert _fast_stream.plain_options(options) is plain


# ----------------------------------------------------------------------------- over HTTP


def _outcome(client: Any, *, close_after: int | None = None) -> tuple[list[Any], Any, Any]:
    """The events of one streamed request, then what it raised (type, message, body), and the
    stream it read."""
    stream = client.responses.create(model="m", input="hi", tools=TOOLS, stream=True)
    events: list[Any] = []
    error: Any = None
    try:
        for event in stream:
            events.append(event)
            if close_after is not None and len(events) == close_after:
                stream.close()
                break
    except Exception as exc:
        error = (type(exc), str(exc), getattr(exc, "body", None))
    return events, error, stream


def _same(server: LocalServer, items: list[Any], **kw: Any) -> tuple[list[Any], Any]:
    script = StreamScript.responses(items, **kw)
    server.enqueue(script, script)
    plain = _outcome(openai.OpenAI(base_url=server.base_url, api_key="x", max_retries=0))
    wrapped = _outcome(ts.wrap(server.client()))
    sdk_stream = wrapped[2].sdk_stream
    assert isinstance(sdk_stream._client, _fast._FastClient)
    if _fast.loop_status():
        assert sdk_stream._iterator.gi_code is _fast_stream.iterate.__code__
    assert same_value(wrapped[0], plain[0])
    assert wrapped[1] == plain[1]
    return plain[0], plain[1]


def test_a_tool_calling_stream_gives_the_sdks_events(server: LocalServer) -> None:
    calls = [("call_1", "f", '{"city": "Zürich"}'), ("call_2", "f", "{}")]
    events, error = _same(
        server, response_events(calls, text="Looking.", reasoning="Two.", pieces=3), fragment=5
    )
    assert error is None and len(events) > 10


def test_an_error_event_raises_the_sdks_error(server: LocalServer) -> None:
    items: list[Any] = response_events([("call_1", "f", "{}")])[:3]
    items.append('event: error\ndata: {"error": {"message": "overloaded", "type": "server_error"}}\n\n')
    events, error = _same(server, items)
    assert len(events) == 3 and error[0] is openai.APIError and error[1] == "overloaded"


def test_an_error_in_a_payload_and_a_payload_that_is_not_json_raise_as_the_sdk_raises(
    server: LocalServer,
) -> None:
    head: list[Any] = response_events([("call_1", "f", "{}")])[:2]
    _, error = _same(server, [*head, 'data: {"error": "text", "type": "x"}\n\n'])
    assert error[:2] == (openai.APIError, "An error occurred during streaming")
    _, error = _same(server, [*head, "data: {not json\n\n"])
    assert error is not None and error[0] is not openai.APIError


def test_done_ends_the_stream_even_with_events_after_it(server: LocalServer) -> None:
    events = response_events([("call_1", "f", "{}")])
    got, error = _same(server, [*events[:3], "data: [DONE]\n\n", *events[3:]])
    assert len(got) == 3 and error is None


def test_closing_early_closes_the_response(server: LocalServer) -> None:
    server.enqueue(StreamScript.responses(response_events([("call_1", "f", '{"a": 1}')], pieces=20)))
    events, error, stream = _outcome(ts.wrap(server.client()), close_after=4)
    assert len(events) == 4 and error is None
    assert stream.sdk_stream.response.is_closed
    assert [c.status for c in stream.tool_calls] == ["incomplete"]


def test_the_async_stream_keeps_the_sdks_loop(server: LocalServer) -> None:
    server.enqueue(StreamScript.responses(response_events([("call_1", "f", "{}")])))

    async def main() -> Any:
        async with ts.wrap(
            openai.AsyncOpenAI(base_url=server.base_url, api_key="x", max_retries=0)
        ) as client:
            stream = await client.responses.create(model="m", input="hi", tools=TOOLS, stream=True)
            code = stream.sdk_stream._iterator.ag_code
            _ = [event async for event in stream]
            return code, stream.tool_calls

    code, calls = asyncio.run(main())
    assert code is openai.AsyncStream.__stream__.__code__
    assert [c.status for c in calls] == ["ready"]


def test_a_stream_already_read_keeps_its_loop(server: LocalServer) -> None:
    server.enqueue(StreamScript.responses(response_events([("call_1", "f", "{}")])))
    client = openai.OpenAI(base_url=server.base_url, api_key="x", max_retries=0)
    stream = client.responses.create(model="m", input="hi", tools=TOOLS, stream=True)
    first = next(stream)
    assert _fast.install(stream)
    assert stream._iterator.gi_code is openai.Stream.__stream__.__code__
    assert [first, *stream][-1].type == "response.completed"
