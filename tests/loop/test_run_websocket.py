"""``ts.run(api="responses", transport="websocket")`` and ``incremental=True``: each step continues
the response before, over one connection or over HTTP, with every guarantee of the stateless loop.

Real sockets: the SDK's ``client.responses.connect()`` against :class:`~toolstitch.testing.LocalServer`
in WebSocket mode, which keeps responses per connection (and stored ones across connections) and
checks every request's input against the response it continues, as OpenAI answers it
(``check_history=True``). Tool runs are counted inside the tools, so "never run" and "run once" are
observed where they happen.
"""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path
from typing import Any

import openai
import pytest

pytest.importorskip("websockets", reason="WebSocket mode needs the openai[realtime] extra")
if not hasattr(getattr(openai.OpenAI(api_key="x"), "responses", None), "connect"):
    pytest.skip("this openai release has no client.responses.connect()", allow_module_level=True)

import toolstitch as ts
from toolstitch.loop._run import CallDispatched, RetryPolicy, RunEvent
from toolstitch.testing import LocalServer, StreamScript, response_events

FAST = RetryPolicy(attempts=3, initial=0.0, maximum=0.0, jitter=0.0)
ran: list[tuple[str, Any]] = []
lock = threading.Lock()


@ts.tool(read_only=True)
def lookup(key: str) -> str:
    """Read a value."""
    with lock:
        ran.append(("lookup", key))
    return f"value of {key}"


@ts.tool
def book(slot: str) -> str:
    """Book a slot (not read-only: it runs only after its response completed)."""
    with lock:
        ran.append(("book", slot))
    return "booked"


@ts.tool(confirm=True)
def cancel(order: str) -> str:
    """Cancel an order."""
    with lock:
        ran.append(("cancel", order))
    return "cancelled"


@pytest.fixture(autouse=True)
def _clear() -> None:
    ran.clear()


@pytest.fixture
def ws() -> Any:
    with LocalServer(websocket=True, check_history=True) as server:
        yield server


def step(n: int, *keys: str, tool: str = "lookup", **kw: Any) -> list[dict[str, Any]]:
    """Response ``resp_{n}``: one call per key, or the answer when there is none."""
    if not keys:
        return response_events(text=f"answer {n}", id=f"resp_{n}", **kw)
    field = "slot" if tool == "book" else "order" if tool == "cancel" else "key"
    made = [(f"call_{n}_{k}", tool, json.dumps({field: k})) for k in keys]
    return response_events(calls=made, id=f"resp_{n}", pieces=3, **kw)


def sent(server: LocalServer) -> list[tuple[int, str | None]]:
    """Each request's input items and the response it continued."""
    out = []
    for body in server.requests:
        given = body.get("input")
        out.append((len(given) if isinstance(given, list) else 1, body.get("previous_response_id")))
    return out


def run(server: LocalServer, **kw: Any) -> ts.RunResult:
    """``ts.run`` over WebSocket by default, on ``server``, with ``kw`` overriding."""
    options: dict[str, Any] = dict(
        model="m",
        input="go",
        toolbox=[lookup, book, cancel],
        api="responses",
        transport="websocket",
        retry=FAST,
    )
    return ts.run(server.client(), **{**options, **kw})


def test_steps_continue_over_one_connection(ws: LocalServer) -> None:
    ws.enqueue(*(StreamScript.responses(e) for e in (step(1, "a", "b"), step(2, "c"), step(3))))
    events: list[RunEvent] = []
    result = run(ws, store=False, on_event=events.append)
    assert result.stop_reason == "done" and result.output_text == "answer 3"
    assert ws.websocket_connections == 1
    assert sent(ws) == [(1, None), (2, "resp_1"), (1, "resp_2")]  # only the new items
    assert sorted(ran) == [("lookup", "a"), ("lookup", "b"), ("lookup", "c")]
    assert sum(1 for e in events if isinstance(e, CallDispatched) and e.eager) == 3  # early starts
    # The run keeps the whole history, valid as a stateless request.
    assert ts.validate_input(result.input) == []
    kinds = [i.get("type", "message") for i in result.input]
    assert kinds.count("function_call") == 3 and kinds.count("function_call_output") == 3


def test_the_async_twin(ws: LocalServer) -> None:
    ws.enqueue(*(StreamScript.responses(e) for e in (step(1, "a"), step(2, "b"), step(3))))

    async def main() -> ts.RunResult:
        return await ts.arun(
            ws.async_client(), model="m", input="go", toolbox=[lookup], api="responses", transport="websocket"
        )

    result = asyncio.run(main())
    assert result.stop_reason == "done" and len(result.steps) == 3
    assert sent(ws) == [(1, None), (1, "resp_1"), (1, "resp_2")]
    assert ws.websocket_connections == 1


def test_cut_arguments_never_run(ws: LocalServer) -> None:
    cut = step(1, "x", tool="book", status="incomplete")
    ws.enqueue(StreamScript.responses(cut), StreamScript.responses(step(2)))
    result = run(ws)
    assert ran == []
    assert result.steps[0].results[0].reason == "incomplete"  # answered, never run


def test_a_forgotten_response_sends_the_step_whole(ws: LocalServer) -> None:
    forgets = threading.Event()

    @ts.tool(read_only=True)
    def slow(key: str) -> str:
        """Read, after which the server loses its state."""
        ws.forget()
        forgets.set()
        return key

    ws.enqueue(StreamScript.responses(step(1, "a", tool="slow")), StreamScript.responses(step(2)))
    result = run(ws, toolbox=[slow])
    assert forgets.is_set() and result.stop_reason == "done"
    # Sent continuing resp_1, refused (previous_response_not_found), sent again whole.
    assert sent(ws) == [(1, None), (1, "resp_1"), (3, None)]
    assert ws.websocket_connections == 1


def test_a_drop_after_the_calls_closed_runs_no_tool_twice(ws: LocalServer, tmp_path: Path) -> None:
    first = step(1, "a", "b")
    closed = max(i for i, e in enumerate(first) if e["type"] == "response.output_item.done")
    ws.enqueue(
        StreamScript.responses(first, cut_after=closed + 1),  # both calls whole, then the drop
        StreamScript.responses(step(1, "a", "b")),  # the retry: the same calls
        StreamScript.responses(step(2)),
    )
    ledger = ts.SQLiteLedger(str(tmp_path / "ledger.db"))
    result = run(ws, ledger=ledger)
    assert result.stop_reason == "done"
    assert sorted(ran) == [("lookup", "a"), ("lookup", "b")]  # started early once, adopted by the retry
    assert ws.websocket_connections == 2  # the run reconnected
    ws.enqueue(StreamScript.responses(step(2)))
    again = run(ws, ledger=ledger, input=result.input[:3])  # the same calls, resumed: the ledger answers
    assert again.stop_reason == "done"
    assert sorted(ran) == [("lookup", "a"), ("lookup", "b")]


def test_a_drop_before_a_call_that_is_not_read_only_never_runs_it(ws: LocalServer) -> None:
    first = step(1, "x", tool="book")
    ws.enqueue(
        StreamScript.responses(first, cut_after=len(first) - 1),  # no response.completed
        StreamScript.responses(step(1, "x", tool="book")),
        StreamScript.responses(step(2)),
    )
    result = run(ws)
    assert result.stop_reason == "done"
    assert ran == [("book", "x")]  # from the retry's completed response only


def test_hostile_events_in_a_run(ws: LocalServer) -> None:
    reordered = [dict(e) for e in step(1, "x", tool="book")]
    deltas = [i for i, e in enumerate(reordered) if e["type"] == "response.function_call_arguments.delta"]
    reordered[deltas[0]], reordered[deltas[1]] = reordered[deltas[1]], reordered[deltas[0]]
    unknown = step(2, "y", tool="book")
    unknown.insert(2, {"type": "response.something_new", "sequence_number": 2})
    error = step(3, "z", tool="book")
    at = next(i for i, e in enumerate(error) if e["type"] == "response.function_call_arguments.done")
    error = [*error[: at + 1], {"type": "error", "sequence_number": 50, "error": {"message": "overloaded"}}]
    ws.enqueue(
        *(StreamScript.responses(e) for e in (reordered, unknown, error, step(3, "w", tool="book"), step(4)))
    )
    result = run(ws)
    assert result.stop_reason == "done"
    # The reordered call was refused, the unknown event ignored, the failed response retried.
    assert ran == [("book", "y"), ("book", "w")]
    assert result.steps[0].results[0].reason in ("not_ready", "invalid_arguments")


def test_a_run_past_the_connections_lifetime(tmp_path: Path) -> None:
    @ts.tool(read_only=True)
    def wait(key: str) -> str:
        """Outlives the connection."""
        threading.Event().wait(0.5)
        return key

    with LocalServer(websocket=True, check_history=True, websocket_lifetime=0.3) as server:
        server.enqueue(*(StreamScript.responses(e) for e in (step(1, "a", tool="wait"), step(2))))
        result = run(server, toolbox=[wait], store=False)
        assert result.stop_reason == "done"
        assert server.websocket_connections == 2
        assert sent(server)[-1] == (3, None)  # the new connection had not seen resp_1: sent whole


def test_incremental_over_http(ws: LocalServer) -> None:
    ws.enqueue(*(StreamScript.responses(e) for e in (step(1, "a"), step(2, "b"), step(3))))
    result = run(ws, transport="http", incremental=True)
    assert result.stop_reason == "done"
    assert sent(ws) == [(1, None), (1, "resp_1"), (1, "resp_2")]
    assert ws.websocket_connections == 0
    assert all(body.get("stream") is True for body in ws.requests)


def test_incremental_over_http_after_the_server_forgot(ws: LocalServer) -> None:
    @ts.tool(read_only=True)
    def forget(key: str) -> str:
        """The server loses what it stored."""
        ws.forget()
        return key

    ws.enqueue(StreamScript.responses(step(1, "a", tool="forget")), StreamScript.responses(step(2)))
    result = run(ws, toolbox=[forget], transport="http", incremental=True)
    assert result.stop_reason == "done"
    assert sent(ws) == [(1, None), (1, "resp_1"), (3, None)]


def test_the_default_stays_stateless_over_http(ws: LocalServer) -> None:
    ws.enqueue(*(StreamScript.responses(e) for e in (step(1, "a"), step(2))))
    run(ws, transport="http")
    assert sent(ws) == [(1, None), (3, None)]


def test_approvals_wait_and_resume_over_websocket(ws: LocalServer) -> None:
    ws.enqueue(StreamScript.responses(step(1, "o1", tool="cancel")), StreamScript.responses(step(2)))
    ledger = ts.MemoryLedger()
    first = run(ws, ledger=ledger)
    assert first.stop_reason == "awaiting_approval" and ran == []
    call_id = first.pending[0].id
    second = run(ws, ledger=ledger, input=first.input, approvals={call_id: True})
    assert second.stop_reason == "done" and ran == [("cancel", "o1")]
    assert sent(ws)[-1][1] is None  # a new run holds no response to continue: the history whole


def test_a_connection_the_caller_opened_is_used_and_left_open(ws: LocalServer) -> None:
    ws.enqueue(*(StreamScript.responses(e) for e in (step(1, "a"), step(2), step(3))))
    client = ts.wrap(ws.client())
    with client.responses.connect() as connection:
        result = ts.run(
            client,
            model="m",
            input="go",
            toolbox=[lookup],
            api="responses",
            transport="websocket",
            connection=connection,
        )
        assert result.stop_reason == "done"
        again = connection.create(model="m", input="more")  # still open
        assert again.get_final_response().output_text == "answer 3"
    assert ws.websocket_connections == 1


@pytest.mark.parametrize(
    ("options", "error", "says"),
    [
        (dict(api="chat", messages=[{"role": "user", "content": "x"}], input=None), ValueError, "api="),
        (dict(transport="carrier-pigeon"), ValueError, "transport must be"),
        (dict(transport="http", incremental=True, store=False), ValueError, "store=False"),
        (dict(background=True), ValueError, "background"),
        (dict(transport="http", connection=object()), ValueError, "connection="),
        (dict(previous_response_id="resp_x"), TypeError, "previous_response_id"),
    ],
)
def test_refused_before_anything_is_sent(
    ws: LocalServer, options: dict[str, Any], error: type[Exception], says: str
) -> None:
    with pytest.raises(error, match=says):
        run(ws, **options)
    assert ws.requests == []


def test_a_connection_that_cannot_be_opened_is_an_api_connection_error(ws: LocalServer) -> None:
    import socket

    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    client = ws.client(websocket_base_url=f"ws://127.0.0.1:{port}/v1")
    with pytest.raises(openai.APIConnectionError, match="could not open"):
        ts.run(
            client,
            model="m",
            input="go",
            toolbox=[lookup],
            api="responses",
            transport="websocket",
            retry=FAST,
        )
    assert ran == [] and ws.requests == []


def test_a_connection_of_the_other_kind_is_refused(ws: LocalServer) -> None:
    client = ts.wrap(ws.client())
    with client.responses.connect() as connection:

        async def main() -> None:
            await ts.arun(
                ws.async_client(),
                model="m",
                input="go",
                toolbox=[lookup],
                api="responses",
                transport="websocket",
                connection=connection,
            )

        with pytest.raises(TypeError, match="AsyncOpenAI"):
            asyncio.run(main())
    assert ws.requests == []
