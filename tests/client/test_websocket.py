"""``ts.wrap(client).responses.connect()``: the SDK's WebSocket connection, each response checked.

Real sockets only: the SDK's own ``client.responses.connect()`` (websockets, the ``openai[realtime]``
extra) against :class:`~toolstitch.testing.LocalServer` serving the Responses API's WebSocket mode on
127.0.0.1. What is checked is what a user of the low-level path relies on: ``connection.create(...)``
gives the calls of that response only, ``ready`` only when whole and agreeing; the SDK's connection
and its session helpers work unchanged; whatever ends a response early (an ``error`` event, a drop,
a silent server, a message that is not JSON, ``response.incomplete``) leaves no call ``ready``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

import openai
import pytest

pytest.importorskip("websockets", reason="WebSocket mode needs the openai[realtime] extra")
if not hasattr(getattr(openai.OpenAI(api_key="x"), "responses", None), "connect"):
    pytest.skip("this openai release has no client.responses.connect()", allow_module_level=True)

import toolstitch as ts
from toolstitch.testing import ErrorReply, LocalServer, StreamScript, response_events

TOOLS = [
    {
        "type": "function",
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    }
]


def calls(n: int, city: str = "Paris", **kw: Any) -> list[dict[str, Any]]:
    return response_events(
        calls=[(f"call_{n}", "get_weather", json.dumps({"city": city}))], id=f"resp_{n}", **kw
    )


@pytest.fixture
def ws() -> Any:
    with LocalServer(websocket=True, check_history=True) as server:
        yield server


def test_two_responses_on_one_connection(ws: LocalServer) -> None:
    ws.enqueue(
        StreamScript.responses(calls(1)), StreamScript.responses(response_events(text="21 C", id="resp_2"))
    )
    client = ts.wrap(ws.client())
    with client.responses.connect() as connection:
        assert isinstance(connection, openai.resources.responses.responses.ResponsesConnection)
        first = connection.create(model="m", input="weather?", tools=TOOLS)
        events = list(first)  # the SDK's own event objects, unchanged
        assert type(events[0]).__name__ == "ResponseWsCreated"
        assert [(c.id, c.status, c.arguments) for c in first.tool_calls] == [
            ("call_1", "ready", '{"city": "Paris"}')
        ]
        assert first.get_final_response().id == "resp_1"
        output = [{"type": "function_call_output", "call_id": "call_1", "output": "21"}]
        second = connection.create(model="m", input=output, previous_response_id="resp_1", tools=TOOLS)
        assert second.get_final_response().output_text == "21 C"
        assert second.tool_calls == []
    assert ws.websocket_connections == 1
    assert [r.get("previous_response_id") for r in ws.requests] == [None, "resp_1"]
    assert all("stream" not in r for r in ws.requests)  # WebSocket mode takes no stream field


def test_the_async_twin(ws: LocalServer) -> None:
    ws.enqueue(StreamScript.responses(calls(1)), StreamScript.responses(calls(2, "Rome")))

    async def main() -> list[tuple[str | None, str]]:
        client = ts.wrap(ws.async_client())
        async with client.responses.connect() as connection:
            first = await connection.create(model="m", input="a", tools=TOOLS)
            async for _ in first:
                pass
            second = await connection.create(model="m", input="b", tools=TOOLS)
            response = await second.get_final_response()
            assert response.id == "resp_2"
            return [(c.id, c.status) for c in [*first.tool_calls, *second.tool_calls]]

    assert asyncio.run(main()) == [("call_1", "ready"), ("call_2", "ready")]


def test_a_stream_closed_early_leaves_the_next_response_whole(ws: LocalServer) -> None:
    ws.enqueue(StreamScript.responses(calls(1), delay=0.002), StreamScript.responses(calls(2, "Rome")))
    client = ts.wrap(ws.client())
    with client.responses.connect() as connection:
        first = connection.create(model="m", input="a", tools=TOOLS)
        for event in first:
            if event.type == "response.output_item.added":
                break
        first.close()
        assert first.tool_calls[0].status == "incomplete"
        second = connection.create(model="m", input="b", tools=TOOLS)
        assert second.get_final_response().id == "resp_2"
        assert [(c.id, c.status, c.arguments) for c in second.tool_calls] == [
            ("call_2", "ready", '{"city": "Rome"}')
        ]


def test_the_sdk_connection_and_its_session_helpers_work_unchanged(ws: LocalServer) -> None:
    session_helpers = pytest.importorskip("openai.lib.responses_websocket")

    ws.enqueue(StreamScript.responses(calls(1)), StreamScript.responses(calls(2)))
    client = ts.wrap(ws.client())
    with client.responses.connect() as connection:
        connection.send({"type": "response.create", "model": "m", "input": "a"})
        kinds = []
        for event in connection:  # the SDK's iteration, passed through
            kinds.append(event.type)
            if event.type == "response.completed":
                break
        assert kinds[0] == "response.created"
        limits = session_helpers.ResponsesWebSocketLimits(
            max_lanes=2, max_events_per_lane=64, max_events=64, max_bytes_per_lane=2**20, max_bytes=2**20
        )
        with session_helpers.ResponsesWebSocketSession(connection, limits=limits) as session:
            session.default.send({"type": "response.create", "model": "m", "input": "b"})
            assert session.default.get_final_response().id == "resp_2"


def test_an_error_event_is_raised_as_the_sdk_raises_it_over_http(ws: LocalServer) -> None:
    ws.enqueue(ErrorReply(429), StreamScript.responses(calls(2)))
    client = ts.wrap(ws.client())
    with client.responses.connect() as connection:
        stream = connection.create(model="m", input="a", tools=TOOLS)
        with pytest.raises(openai.RateLimitError):
            stream.get_final_response()
        with pytest.raises(openai.BadRequestError, match="not found"):
            connection.create(model="m", input="b", previous_response_id="resp_unknown").get_final_response()
        assert connection.create(model="m", input="c", tools=TOOLS).get_final_response().id == "resp_2"


def test_an_error_mid_response_leaves_no_call_ready(ws: LocalServer) -> None:
    events = calls(1)
    cut = next(i for i, e in enumerate(events) if e["type"] == "response.function_call_arguments.done")
    hostile = [*events[: cut + 2], {"type": "error", "sequence_number": 99, "error": {"message": "boom"}}]
    ws.enqueue(StreamScript.responses(hostile))
    client = ts.wrap(ws.client())
    with client.responses.connect() as connection:
        stream = connection.create(model="m", input="a", tools=TOOLS)
        with pytest.raises(openai.APIError, match="boom"):
            list(stream)
        assert [c.status for c in stream.tool_calls] == ["incomplete"]


def test_cut_arguments_are_never_ready(ws: LocalServer) -> None:
    ws.enqueue(StreamScript.responses(calls(1, status="incomplete")))
    client = ts.wrap(ws.client())
    with client.responses.connect() as connection:
        stream = connection.create(model="m", input="a", tools=TOOLS)
        assert stream.get_final_response().status == "incomplete"
        assert [c.status for c in stream.tool_calls] == ["incomplete"]


def test_hostile_messages(ws: LocalServer) -> None:
    """Out-of-order sequence numbers, an unknown event, a message that is not JSON."""
    events = calls(1)
    reordered = [dict(e) for e in events]
    deltas = [i for i, e in enumerate(reordered) if e["type"] == "response.function_call_arguments.delta"]
    a, b = deltas[0], deltas[1]
    reordered[a], reordered[b] = reordered[b], reordered[a]
    unknown = [*events[:2], {"type": "response.brand_new_thing", "sequence_number": 2, "x": 1}, *events[2:]]
    not_json = [*events[:3], "{not json"]
    ws.enqueue(*(StreamScript.responses(e) for e in (reordered, unknown, not_json)))
    client = ts.wrap(ws.client())
    with client.responses.connect() as connection:
        first = connection.create(model="m", input="a", tools=TOOLS)
        first.get_final_response()
        assert first.tool_calls[0].status != "ready"  # its pieces came out of order
        assert first.anomalies
        second = connection.create(model="m", input="b", tools=TOOLS)
        kinds = [e.type for e in second]
        assert "response.brand_new_thing" in kinds  # passed through, unchanged
        assert [c.status for c in second.tool_calls] == ["ready"]
        third = connection.create(model="m", input="c", tools=TOOLS)
        with pytest.raises(openai.APIError, match="not JSON"):
            list(third)
        assert [c.status for c in third.tool_calls] == ["incomplete"]


def test_a_dropped_connection_is_an_api_connection_error(ws: LocalServer) -> None:
    events = calls(1)
    ws.enqueue(StreamScript.responses(events, cut_after=len(events) - 1))
    client = ts.wrap(ws.client())
    with client.responses.connect() as connection:
        stream = connection.create(model="m", input="a", tools=TOOLS)
        with pytest.raises(openai.APIConnectionError):
            stream.get_final_response()
        assert [c.status for c in stream.tool_calls] == ["incomplete"]  # no response.completed came
        assert connection.broken


def test_a_silent_server_times_out(ws: LocalServer) -> None:
    ws.enqueue(StreamScript.responses(calls(1)[:3], stall=5.0))
    client = ts.wrap(ws.client(timeout=0.3))
    with client.responses.connect() as connection:
        stream = connection.create(model="m", input="a", tools=TOOLS)
        with pytest.raises(openai.APITimeoutError):
            stream.get_final_response()
        assert connection.broken


def test_the_guard_refuses_a_response_whose_call_is_not_ready(ws: LocalServer) -> None:
    ws.enqueue(StreamScript.responses(calls(1, city="x", status="incomplete")))
    client = ts.wrap(ws.client(), guard=True)
    with client.responses.connect() as connection:
        stream = connection.create(model="m", input="a", tools=TOOLS)
        with pytest.raises(ts.errors.UnsafeToolCallError):
            list(stream)


def test_a_response_never_read_does_not_leak_into_the_next(ws: LocalServer) -> None:
    ws.enqueue(StreamScript.responses(calls(1)), StreamScript.responses(calls(2, "Rome")))
    client = ts.wrap(ws.client())
    with client.responses.connect() as connection:
        connection.create(model="m", input="a", tools=TOOLS)  # sent, never read
        second = connection.create(model="m", input="b", tools=TOOLS)
        assert second.get_final_response().id == "resp_2"
        assert [(c.id, c.arguments) for c in second.tool_calls] == [("call_2", '{"city": "Rome"}')]


def test_the_late_end_of_a_failed_response_is_not_the_next_ones(ws: LocalServer) -> None:
    events = calls(1)
    failed = {
        "type": "response.failed",
        "sequence_number": 98,
        "response": {**events[-1]["response"], "status": "failed"},
    }
    hostile = [*events[:4], {"type": "error", "sequence_number": 97, "error": {"message": "boom"}}, failed]
    ws.enqueue(StreamScript.responses(hostile), StreamScript.responses(calls(2, "Rome")))
    client = ts.wrap(ws.client())
    with client.responses.connect() as connection:
        with pytest.raises(openai.APIError, match="boom"):
            connection.create(model="m", input="a", tools=TOOLS).get_final_response()
        second = connection.create(model="m", input="b", tools=TOOLS)
        assert second.get_final_response().id == "resp_2"
        assert [c.status for c in second.tool_calls] == ["ready"]


def test_the_read_timeout_keeps_no_thread_while_nothing_is_read(ws: LocalServer) -> None:
    import time

    ws.enqueue(StreamScript.responses(calls(1)))
    client = ts.wrap(ws.client(timeout=0.1))
    with client.responses.connect() as connection:
        connection.create(model="m", input="a", tools=TOOLS).get_final_response()
        watchdog = connection._watchdog
        deadline = time.monotonic() + 5
        while watchdog._alive and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not watchdog._alive  # idle: its thread ended; the next read starts another
        assert not connection.broken


@pytest.mark.parametrize(
    "garbage",
    [
        "[" * 100_000 + "]" * 100_000,
        "[1, 2]",
        "null",
        '"text"',
        '{"type": 5}',
        '{"type": "error", "error": [1]}',
    ],
    ids=["nested-deep", "a-list", "null", "a-string", "a-number-type", "an-error-of-no-shape"],
)
def test_messages_of_no_shape_leave_no_call_ready(ws: LocalServer, garbage: str) -> None:
    events = calls(1)
    ws.enqueue(StreamScript.responses([*events[:3], garbage, *events[3:]]))
    client = ts.wrap(ws.client(timeout=5))
    with client.responses.connect() as connection:
        stream = connection.create(model="m", input="a\ud800", tools=TOOLS)  # a lone surrogate sent too
        with contextlib.suppress(openai.APIError):  # the SDK's error, never our own
            stream.get_final_response()
        assert [c.status for c in stream.tool_calls] != ["ready"]


def test_two_readers_of_one_connection_are_refused(ws: LocalServer) -> None:
    ws.enqueue(StreamScript.responses(calls(1), first_delay=0.5), StreamScript.responses(calls(2)))

    async def main() -> list[Any]:
        client = ts.wrap(ws.async_client())
        async with client.responses.connect() as connection:
            first = await connection.create(model="m", input="a", tools=TOOLS)
            second = await connection.create(model="m", input="b", tools=TOOLS)
            return await asyncio.gather(
                first.get_final_response(), second.get_final_response(), return_exceptions=True
            )

    outcomes = asyncio.run(main())
    refused = [o for o in outcomes if isinstance(o, RuntimeError)]
    assert len(refused) == 1 and "one response at a time" in str(refused[0])
