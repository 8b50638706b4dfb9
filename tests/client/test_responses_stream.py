"""The Responses API on a wrapped client, over real HTTP with the real ``openai`` client.

``client.responses.create(stream=True)`` (sync and async, through ``with_raw_response``,
``with_streaming_response`` and the SDK's ``responses.stream(...)`` helper) against the project's
local server, which sends the events as OpenAI does (``event:`` and ``data:`` lines, no
``[DONE]``). The SDK's event objects must pass through unchanged; the calls must be stitched and
checked against the request; every way this API fails must leave them not ``ready``.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import openai
import pytest

pytest.importorskip("openai.types.responses", reason="this openai release has no Responses API")
from openai._models import construct_type
from openai.types.responses import Response, ResponseStreamEvent

import toolstitch as ts
from tests.core.test_responses import TIME, TOOLS, WEATHER
from toolstitch.errors import (
    ContractViolation,
    IncompleteStreamError,
    UnknownTool,
    UnsafeToolCallError,
    UnstitchedStreamWarning,
)
from toolstitch.events import StreamEnded, ToolCallReady
from toolstitch.testing import LocalServer, StreamScript, response_events, sse_body

CALLS = [("call_1", "get_weather", '{"city": "Zürich"}'), ("call_2", "get_time", '{"tz": "Europe/Zurich"}')]
EVENTS = response_events(CALLS, text="Looking that up.", reasoning="Two tools.")


def script(events: list[Any] = EVENTS, **kw: Any) -> StreamScript:
    return StreamScript.responses(events, **kw)


def test_create_stream_yields_the_sdks_events_unchanged_and_stitches_the_calls(server: LocalServer) -> None:
    server.enqueue(script(), script())
    plain = list(server.client().responses.create(model="m", input="hi", tools=TOOLS, stream=True))
    client = ts.wrap(server.client())
    with client.responses.create(model="m", input="hi", tools=TOOLS, stream=True) as stream:
        assert isinstance(stream, openai.Stream)
        assert isinstance(stream, ts.StitchedResponseStream)
        seen = list(stream)
    assert [type(e) for e in seen] == [type(e) for e in plain]
    assert [e.model_dump() for e in seen] == [e.model_dump() for e in plain]
    calls = stream.tool_calls
    assert [(c.id, c.name, c.status) for c in calls] == [
        ("call_1", "get_weather", "ready"),
        ("call_2", "get_time", "ready"),
    ]
    assert calls[0].parsed == {"city": "Zürich"}
    response = stream.get_final_response()
    assert isinstance(response, Response)
    assert response.model_dump() == plain[-1].response.model_dump()  # type: ignore[union-attr]
    assert stream.anomalies == []


async def test_the_async_twin(server: LocalServer) -> None:
    server.enqueue(script())
    client = ts.wrap(server.async_client())
    stream = await client.responses.create(model="m", input="hi", tools=TOOLS, stream=True)
    assert isinstance(stream, openai.AsyncStream)
    async with stream:
        kinds = [e.type async for e in stream]
    assert kinds[-1] == "response.completed"
    assert [c.status for c in stream.tool_calls] == ["ready", "ready"]
    response = await stream.get_final_response()
    assert response.status == "completed"


def test_events_yields_toolstitch_events(server: LocalServer) -> None:
    server.enqueue(script())
    stream = ts.wrap(server.client()).responses.create(model="m", input="hi", tools=TOOLS, stream=True)
    events = list(stream.events())
    assert sum(isinstance(e, ToolCallReady) for e in events) == 2
    assert isinstance(events[-1], StreamEnded) and events[-1].error is None


async def test_async_events(server: LocalServer) -> None:
    server.enqueue(script())
    stream = await ts.wrap(server.async_client()).responses.create(
        model="m", input="hi", tools=TOOLS, stream=True
    )
    events = [e async for e in stream.events()]
    assert sum(isinstance(e, ToolCallReady) for e in events) == 2


def test_fragmented_writes_give_the_same_calls(server: LocalServer) -> None:
    server.enqueue(script(fragment=7))
    stream = ts.wrap(server.client()).responses.create(model="m", input="hi", tools=TOOLS, stream=True)
    assert [c.arguments for c in stream.until_done().tool_calls] == [CALLS[0][2], CALLS[1][2]]
    assert all(c.ready for c in stream.tool_calls)


def test_a_done_marker_some_servers_send_is_harmless(server: LocalServer) -> None:
    server.enqueue(script(done=True))
    stream = ts.wrap(server.client()).responses.create(model="m", input="hi", tools=TOOLS, stream=True)
    assert all(c.ready for c in stream.until_done().tool_calls)


# --------------------------------------------------------------------------- failing closed


@pytest.mark.parametrize("cut", [5, 20, 27, len(EVENTS) - 1])
def test_a_dropped_connection_leaves_no_call_ready(server: LocalServer, cut: int) -> None:
    server.enqueue(script(cut_after=cut))
    stream = ts.wrap(server.client()).responses.create(model="m", input="hi", tools=TOOLS, stream=True)
    with pytest.raises(openai.APIConnectionError):
        list(stream)
    assert not any(c.ready for c in stream.tool_calls)
    with pytest.raises(IncompleteStreamError):
        stream.get_final_response()


def test_closing_early_leaves_no_call_ready(server: LocalServer) -> None:
    server.enqueue(script())
    with ts.wrap(server.client()).responses.create(model="m", input="hi", tools=TOOLS, stream=True) as stream:
        for event in stream:
            if event.type == "response.function_call_arguments.done":
                break
    assert stream.tool_calls and not any(c.ready for c in stream.tool_calls)
    assert all(c.status == "incomplete" for c in stream.tool_calls)


def test_an_error_event_leaves_no_call_ready(server: LocalServer) -> None:
    events = [
        *EVENTS[:20],
        {"type": "error", "code": "server_error", "message": "overloaded", "sequence_number": 20},
    ]
    server.enqueue(script(events))
    stream = ts.wrap(server.client()).responses.create(model="m", input="hi", tools=TOOLS, stream=True)
    seen = list(stream)
    assert seen[-1].type == "error"  # the SDK's own event, passed through
    assert not any(c.ready for c in stream.tool_calls)
    with pytest.raises(IncompleteStreamError, match="overloaded"):
        stream.get_final_response()


def test_an_in_band_error_object_is_the_sdks_api_error(server: LocalServer) -> None:
    server.enqueue(script([*EVENTS[:20], {"error": {"message": "quota", "type": "server_error"}}]))
    stream = ts.wrap(server.client()).responses.create(model="m", input="hi", tools=TOOLS, stream=True)
    with pytest.raises(openai.APIError, match="quota"):
        list(stream)
    assert not any(c.ready for c in stream.tool_calls)


@pytest.mark.parametrize("status", ["incomplete", "failed"])
def test_a_response_that_did_not_complete_leaves_no_call_ready(server: LocalServer, status: str) -> None:
    server.enqueue(script(response_events(CALLS, status=status)))
    stream = ts.wrap(server.client()).responses.create(model="m", input="hi", tools=TOOLS, stream=True)
    list(stream)
    assert [c.status for c in stream.tool_calls] == ["incomplete", "incomplete"]


def test_a_tampered_done_item_refuses_its_call_over_http(server: LocalServer) -> None:
    events = json.loads(json.dumps(EVENTS))
    done = [e for e in events if e["type"] == "response.output_item.done"][-1]
    done["item"]["arguments"] = '{"tz": "UTC"}'
    server.enqueue(script(events))
    stream = ts.wrap(server.client()).responses.create(model="m", input="hi", tools=TOOLS, stream=True)
    assert [c.status for c in stream.until_done().tool_calls] == ["ready", "invalid"]


# --------------------------------------------------------------------------- the request's contract


def test_tools_not_offered_are_refused(server: LocalServer) -> None:
    server.enqueue(script())
    stream = ts.wrap(server.client()).responses.create(model="m", input="hi", tools=[WEATHER], stream=True)
    calls = stream.until_done().tool_calls
    assert [c.status for c in calls] == ["ready", "invalid"]
    assert isinstance(calls[1].error, UnknownTool)


def test_a_request_without_tools_refuses_every_call(server: LocalServer) -> None:
    server.enqueue(script())
    stream = ts.wrap(server.client()).responses.create(model="m", input="hi", stream=True)
    assert all(isinstance(c.error, UnknownTool) for c in stream.until_done().tool_calls)


def test_tools_from_a_generator_are_read_once_and_sent(server: LocalServer) -> None:
    server.enqueue(script())
    stream = ts.wrap(server.client()).responses.create(
        model="m", input="hi", tools=(t for t in TOOLS), stream=True
    )
    assert all(c.ready for c in stream.until_done().tool_calls)
    assert [t["name"] for t in server.requests[-1]["tools"]] == ["get_weather", "get_time"]


def test_extra_body_is_the_contract_the_server_reads(server: LocalServer) -> None:
    server.enqueue(script())
    stream = ts.wrap(server.client()).responses.create(
        model="m", input="hi", tools=TOOLS, extra_body={"tools": [TIME]}, stream=True
    )
    assert [c.status for c in stream.until_done().tool_calls] == ["invalid", "ready"]


def test_tool_choice_and_parallel_tool_calls_are_enforced(server: LocalServer) -> None:
    server.enqueue(script(), script())
    client = ts.wrap(server.client())
    forced = client.responses.create(
        model="m", input="hi", tools=TOOLS, tool_choice={"type": "function", "name": "get_time"}, stream=True
    )
    assert [c.status for c in forced.until_done().tool_calls] == ["invalid", "ready"]
    assert isinstance(forced.tool_calls[0].error, ContractViolation)
    single = client.responses.create(
        model="m", input="hi", tools=TOOLS, parallel_tool_calls=False, stream=True
    )
    assert [c.status for c in single.until_done().tool_calls] == ["ready", "invalid"]


def test_an_unreadable_contract_refuses_every_call(server: LocalServer) -> None:
    server.enqueue(script())
    stream = ts.wrap(server.client()).responses.create(
        model="m", input="hi", tools=TOOLS, extra_body={"tools": "all of them"}, stream=True
    )
    assert all(isinstance(c.error, ContractViolation) for c in stream.until_done().tool_calls)


# --------------------------------------------------------------------------- the other paths


def test_with_raw_response_parses_to_a_stitched_stream(server: LocalServer) -> None:
    server.enqueue(script(), script())
    client = ts.wrap(server.client())
    for responses in (client.responses.with_raw_response, client.with_raw_response.responses):
        raw = responses.create(model="m", input="hi", tools=TOOLS, stream=True)
        assert raw.headers.get("content-type", "").startswith("text/event-stream")
        stream = raw.parse()
        assert isinstance(stream, ts.StitchedResponseStream)
        assert all(c.ready for c in stream.until_done().tool_calls)


def test_with_streaming_response_parses_to_a_stitched_stream(server: LocalServer) -> None:
    server.enqueue(script(), script())
    client = ts.wrap(server.client())
    for responses in (client.responses.with_streaming_response, client.with_streaming_response.responses):
        with responses.create(model="m", input="hi", tools=TOOLS, stream=True) as raw:
            stream = raw.parse()
            assert all(c.ready for c in stream.until_done().tool_calls)


async def test_async_raw_and_streaming_responses(server: LocalServer) -> None:
    server.enqueue(script(), script())
    client = ts.wrap(server.async_client())
    raw = await client.responses.with_raw_response.create(model="m", input="hi", tools=TOOLS, stream=True)
    stream = raw.parse()  # the SDK's raw response of an async client parses without awaiting
    assert isinstance(stream, ts.AsyncStitchedResponseStream)
    await stream.until_done()
    assert all(c.ready for c in stream.tool_calls)
    async with client.responses.with_streaming_response.create(
        model="m", input="hi", tools=TOOLS, stream=True
    ) as managed:
        stream = await managed.parse()
        await stream.until_done()
        assert all(c.ready for c in stream.tool_calls)


def test_the_sdks_stream_helper_is_stitched(server: LocalServer) -> None:
    server.enqueue(script())
    client = ts.wrap(server.client())
    with client.responses.stream(model="m", input="hi", tools=TOOLS) as stream:
        kinds = [event.type for event in stream]
        assert "response.function_call_arguments.delta" in kinds
        assert [c.status for c in stream.tool_calls] == ["ready", "ready"]
        final = stream.get_final_response()  # the SDK's own helper's
        assert final.status == "completed"
        assert stream.toolstitch.get_final_response().id == final.id


async def test_the_async_stream_helper_is_stitched(server: LocalServer) -> None:
    server.enqueue(script())
    client = ts.wrap(server.async_client())
    async with client.responses.stream(model="m", input="hi", tools=[WEATHER]) as stream:
        async for _ in stream:
            pass
        assert [c.status for c in stream.tool_calls] == ["ready", "invalid"]


def test_a_stream_resumed_by_id_is_the_sdks_with_a_warning(server: LocalServer) -> None:
    client = ts.wrap(server.client())
    with pytest.warns(UnstitchedStreamWarning, match="response_id"):
        manager = client.responses.stream(response_id="resp_test")
    assert type(manager).__module__.startswith("openai.")


def test_a_request_that_does_not_stream_is_the_sdks(server: LocalServer) -> None:
    server.enqueue(script())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        response = ts.wrap(server.client()).responses.create(model="m", input="hi", tools=TOOLS)
    assert type(response) is Response
    calls = ts.calls_of(response, tools=TOOLS)
    assert [(c.id, c.status) for c in calls] == [("call_1", "ready"), ("call_2", "ready")]
    assert [c.status for c in ts.calls_of(response, tools=[TIME])] == ["invalid", "ready"]
    assert [c.status for c in ts.calls_of(response.model_dump(), tools=TOOLS)] == ["ready", "ready"]


def test_recording_a_responses_stream_says_which_reader(server: LocalServer, tmp_path: Path) -> None:
    server.enqueue(script())
    client = ts.wrap(server.client(), record=tmp_path)
    list(client.responses.create(model="m", input="hi", tools=TOOLS, stream=True))
    (path,) = tmp_path.glob("*.jsonl")
    records = [json.loads(line) for line in path.read_text().splitlines()]
    header = records[0]
    assert header["type"] == "header"
    assert json.dumps(header).count('"api": "responses"') == 1
    assert sum(r["type"] == "chunk" for r in records) == len(EVENTS)


def test_a_body_as_openai_sends_it_is_read_whole(server: LocalServer) -> None:
    """Raw SSE as OpenAI sent it in 2025: ``obfuscation`` on every delta, a reasoning item without
    summary, usage without the ``cache_write_tokens`` a newer SDK declares required. The response
    is built as the SDK builds its own (no validation error, no anomaly)."""
    events = json.loads(json.dumps(response_events(CALLS[:1], reasoning="")))
    for event in events:
        if event["type"].endswith(".delta"):
            event["obfuscation"] = "Zq9"
    del events[-1]["response"]["usage"]["input_tokens_details"]["cache_write_tokens"]
    body = sse_body(events, done=False).decode()
    server.enqueue(StreamScript.from_sse(body, fragment=7))
    stream = ts.wrap(server.client()).responses.create(model="m", input="hi", tools=TOOLS, stream=True)
    assert [c.status for c in stream.until_done().tool_calls] == ["ready"]
    response = stream.get_final_response()
    assert isinstance(response, Response) and response.usage is not None
    assert response.output[-1].call_id == "call_1"  # type: ignore[union-attr]
    assert stream.anomalies == []


# --------------------------------------------------------------------------- ts.stitch and the guard


def test_stitch_reads_responses_events_from_anywhere() -> None:
    events = response_events(CALLS)
    for source in (events, [construct_type(type_=ResponseStreamEvent, value=e) for e in events]):
        stream = ts.stitch(source, tools=TOOLS, api="responses")
        assert isinstance(stream, ts.StitchedResponseStream)
        assert list(stream) == list(source)  # the events as given, unchanged
        assert [c.status for c in stream.tool_calls] == ["ready", "ready"]
        assert stream.get_final_response().status == "completed"
    stream = ts.stitch(
        events, tools=[TIME], tool_choice={"type": "function", "name": "get_time"}, api="responses"
    )
    assert [c.status for c in stream.until_done().tool_calls] == ["invalid", "ready"]


async def test_stitch_reads_an_async_source() -> None:
    async def source() -> Any:
        for event in response_events(CALLS, status="incomplete"):
            yield event

    stream = ts.stitch(source(), tools=TOOLS, api="responses")
    assert isinstance(stream, ts.AsyncStitchedResponseStream)
    await stream.until_done()
    assert [c.status for c in stream.tool_calls] == ["incomplete", "incomplete"]


def test_the_guard_refuses_a_response_with_a_call_that_is_not_ready(server: LocalServer) -> None:
    server.enqueue(script(), script())
    client = ts.wrap(server.client(), guard=True)
    with pytest.raises(UnsafeToolCallError):
        list(client.responses.create(model="m", input="hi", tools=[WEATHER], stream=True))
    stream = client.responses.create(model="m", input="hi", tools=TOOLS, stream=True)
    assert [c.status for c in stream.until_done().tool_calls] == ["ready", "ready"]
    with pytest.raises(UnsafeToolCallError):
        list(ts.stitch(response_events(CALLS), tools=[WEATHER], api="responses", guard=True))
