"""``run_events``/``arun_events``: the run loop's events pulled by an iterator, with the real SDK.

The events are those ``on_event`` receives, in the same order, ending with ``RunFinished``; a
reader that stops early stops the run (no tool starts after it went away, no thread is left
behind); an error of the run is raised from the iteration.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

import toolstitch as ts
from tests.tools._support import Recorder, calls_reply, text_reply
from toolstitch.errors import RequestError
from toolstitch.events import (
    ArgumentsDelta,
    CallDispatched,
    CallFinished,
    ContentDelta,
    RequestRetried,
    ResponseReceived,
    RunFinished,
    StepFinished,
    StepStarted,
    StreamEnded,
    StreamEvent,
    ToolCallIncomplete,
    ToolCallReady,
    ToolCallStarted,
)
from toolstitch.loop._run import RetryPolicy
from toolstitch.testing import LocalServer, StreamScript, tool_call_chunks
from toolstitch.tools import Toolbox, tool

ran = Recorder()


@tool
def get_weather(city: str) -> dict[str, Any]:
    """Current weather for a city."""
    ran.add("get_weather", city)
    return {"city": city, "temp": 21}


CALLS = [("call_1", "get_weather", '{"city": "Zürich"}'), ("call_2", "get_weather", '{"city": "東京"}')]
USER = [{"role": "user", "content": "Weather in Zürich and Tokyo?"}]


def model(body: dict[str, Any]) -> Any:
    """Calls first; once the request carries their results, the answer."""
    if any(m.get("role") == "tool" for m in body.get("messages") or []):
        return text_reply("Sunny in both.")
    return calls_reply(CALLS)


@pytest.fixture
def live() -> Any:
    with LocalServer(handler=model, check_history=True) as server:
        yield server


def shape(events: list[Any]) -> list[tuple[str, Any]]:
    """Comparable facts of each event (the objects differ from one run to the next)."""
    out: list[tuple[str, Any]] = []
    for e in events:
        name = type(e).__name__
        if isinstance(e, StreamEvent):
            out.append((name, (e.step, type(e.event).__name__)))
        elif isinstance(e, CallDispatched):
            out.append((name, (e.step, e.call.id)))
        elif isinstance(e, CallFinished):
            out.append((name, (e.step, e.result.call.id)))
        elif isinstance(e, StepFinished):
            out.append((name, e.step.index))
        elif isinstance(e, RunFinished):
            out.append((name, e.result.stop_reason))
        else:
            out.append((name, getattr(e, "step", None)))
    return out


def settled(events: list[Any]) -> list[tuple[str, Any]]:
    """``shape`` with each run of tool-execution events sorted: parallel tools start and finish
    in whatever order the threads reach them, so only the set within a run is deterministic."""
    out: list[tuple[str, Any]] = []
    run: list[tuple[str, Any]] = []
    for item in shape(events):
        if item[0] in {"CallDispatched", "CallFinished"}:
            run.append(item)
            continue
        out.extend(sorted(run, key=repr))
        run = []
        out.append(item)
    out.extend(sorted(run, key=repr))
    return out


def no_worker_left() -> bool:
    return not any(t.name == "toolstitch-run-events" for t in threading.enumerate())


def test_the_iterator_yields_what_on_event_receives_then_the_result(live: LocalServer) -> None:
    box = Toolbox([get_weather])
    pushed: list[Any] = []
    result = ts.run(live.client(), model="m", messages=USER, toolbox=box, on_event=pushed.append)
    pulled = list(ts.run_events(live.client(), model="m", messages=USER, toolbox=box))
    assert isinstance(pulled[-1], RunFinished)
    assert settled(pulled[:-1]) == settled(pushed)
    assert pulled[-1].result.stop_reason == result.stop_reason == "done"
    assert pulled[-1].result.messages[-1]["content"] == "Sunny in both."
    kinds = [type(e) for e in pulled]
    assert kinds[0] is StepStarted and ResponseReceived in kinds and CallFinished in kinds
    assert no_worker_left()


def test_stopping_early_stops_the_run_before_any_tool_starts(live: LocalServer) -> None:
    box = Toolbox([get_weather])
    before = ran.count("get_weather")
    events = ts.run_events(live.client(), model="m", messages=USER, toolbox=box)
    for event in events:
        if isinstance(event, StepStarted):
            break
    events.close()  # what a `for` loop left by `break` does when the generator is collected
    assert no_worker_left()
    assert ran.count("get_weather") == before
    assert len(live.requests) <= 1  # the first request at most: no second step was asked for


def test_an_error_of_the_run_is_raised_from_the_iteration(live: LocalServer) -> None:
    bad = [{"role": "tool", "tool_call_id": "nobody", "content": "x"}]  # answers no call
    with pytest.raises(RequestError):
        list(ts.run_events(live.client(), model="m", messages=bad, toolbox=Toolbox([get_weather])))
    assert no_worker_left()


def test_on_event_is_refused() -> None:
    with pytest.raises(TypeError, match="on_event"):
        next(ts.run_events(None, model="m", messages=USER, toolbox=Toolbox([]), on_event=print))


def test_the_async_twin_yields_the_same_events(live: LocalServer) -> None:
    box = Toolbox([get_weather])
    pushed: list[Any] = []
    ts.run(live.client(), model="m", messages=USER, toolbox=box, on_event=pushed.append)

    async def pull() -> list[Any]:
        return [e async for e in ts.arun_events(live.async_client(), model="m", messages=USER, toolbox=box)]

    pulled = asyncio.run(pull())
    assert isinstance(pulled[-1], RunFinished) and pulled[-1].result.stop_reason == "done"
    assert settled(pulled[:-1]) == settled(pushed)


def test_closing_the_async_iterator_cancels_the_run(live: LocalServer) -> None:
    box = Toolbox([get_weather])
    before = ran.count("get_weather")

    async def pull_one() -> Any:
        events = ts.arun_events(live.async_client(), model="m", messages=USER, toolbox=box)
        first = await events.__anext__()
        await events.aclose()
        await asyncio.sleep(0)
        return first, [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]

    first, left = asyncio.run(pull_one())
    assert isinstance(first, StepStarted)
    assert left == [] and ran.count("get_weather") == before


def test_an_error_of_the_async_run_is_raised_from_the_iteration(live: LocalServer) -> None:
    bad = [{"role": "tool", "tool_call_id": "nobody", "content": "x"}]

    async def pull() -> None:
        async for _ in ts.arun_events(
            live.async_client(), model="m", messages=bad, toolbox=Toolbox([get_weather])
        ):
            pass

    with pytest.raises(RequestError):
        asyncio.run(pull())


def test_every_stream_event_reaches_on_event_in_order_tagged_with_its_step(live: LocalServer) -> None:
    events: list[Any] = []
    box = Toolbox([get_weather])
    ts.run(live.client(), model="m", messages=USER, toolbox=box, on_event=events.append)
    step = 0
    for e in events:  # every stream event lies between its step's start and its response
        if isinstance(e, StepStarted):
            step, streaming = e.step, True
        elif isinstance(e, ResponseReceived):
            assert e.step == step
            streaming = False
        elif isinstance(e, StreamEvent):
            assert streaming and e.step == step
    streamed = [(e.step, e.event) for e in events if isinstance(e, StreamEvent)]
    one, two = [e.step for e in events if isinstance(e, StepStarted)]
    first = [ev for s, ev in streamed if s == one]
    assert [type(ev) for ev in first].count(ToolCallStarted) == 2
    assert [type(ev) for ev in first].count(ToolCallReady) == 2 and isinstance(first[-1], StreamEnded)
    for call_id, _, arguments in CALLS:  # the argument text, piece by piece, exactly as it arrived
        pieces = [ev.text for ev in first if isinstance(ev, ArgumentsDelta) and ev.call.id == call_id]
        assert len(pieces) > 1 and "".join(pieces) == arguments
    ready_at = max(i for i, ev in enumerate(first) if isinstance(ev, ToolCallReady))
    dispatched_at = next(i for i, e in enumerate(events) if isinstance(e, CallDispatched))
    last_of_step_1 = max(i for i, e in enumerate(events) if isinstance(e, StreamEvent) and e.step == one)
    assert ready_at < len(first) and last_of_step_1 < dispatched_at  # tools start after their stream
    second = [ev for s, ev in streamed if s == two]
    assert "".join(ev.text for ev in second if isinstance(ev, ContentDelta)) == "Sunny in both."


def test_a_retried_attempt_streams_again_after_request_retried() -> None:
    attempts = [StreamScript(tool_call_chunks(CALLS), cut_after=4), StreamScript(tool_call_chunks(CALLS))]

    def flaky(body: dict[str, Any]) -> Any:
        if any(m.get("role") == "tool" for m in body.get("messages") or []):
            return text_reply("Sunny in both.")
        return attempts.pop(0)

    fast = RetryPolicy(attempts=2, initial=0.0, maximum=0.0, jitter=0.0)
    with LocalServer(handler=flaky) as server:
        events = list(
            ts.run_events(
                server.client(), model="m", messages=USER, toolbox=Toolbox([get_weather]), retry=fast
            )
        )
    retried = next(i for i, e in enumerate(events) if isinstance(e, RequestRetried))
    before = [e.event for e in events[:retried] if isinstance(e, StreamEvent)]
    assert any(isinstance(ev, ToolCallIncomplete) for ev in before)
    assert isinstance(before[-1], StreamEnded) and before[-1].error is not None
    step = events[retried].step
    after = [e.event for e in events[retried:] if isinstance(e, StreamEvent) and e.step == step]
    assert sum(isinstance(ev, ToolCallReady) for ev in after) == 2
    assert isinstance(events[-1], RunFinished) and events[-1].result.stop_reason == "done"


def test_stopping_mid_stream_closes_it_and_runs_nothing(live: LocalServer) -> None:
    before = ran.count("get_weather")
    events = ts.run_events(live.client(), model="m", messages=USER, toolbox=Toolbox([get_weather]))
    for event in events:
        if isinstance(event, StreamEvent) and isinstance(event.event, ArgumentsDelta):
            break
    events.close()
    assert no_worker_left() and ran.count("get_weather") == before and len(live.requests) == 1


started = threading.Event()
release = threading.Event()


@tool
def slow_weather(city: str) -> str:
    """Waits for the test before it answers (so the reader can leave while it runs)."""
    started.set()
    assert release.wait(30)
    ran.add("slow_weather", city)
    return f"sunny in {city}"


def test_stopping_while_a_tool_runs_lets_it_finish_and_asks_nothing_more() -> None:
    def model(body: dict[str, Any]) -> Any:
        if any(m.get("role") == "tool" for m in body.get("messages") or []):
            return text_reply("Sunny.")
        return calls_reply([("call_s", "slow_weather", '{"city": "Oslo"}')])

    started.clear()
    release.clear()
    with LocalServer(handler=model) as server:
        events = ts.run_events(server.client(), model="m", messages=USER, toolbox=Toolbox([slow_weather]))
        for event in events:
            if isinstance(event, CallDispatched):
                break
        assert started.wait(30)
        closer = threading.Thread(target=events.close)
        closer.start()
        release.set()  # the running tool finishes; close() returns once the worker is gone
        closer.join(30)
        assert not closer.is_alive() and no_worker_left()
        assert ran.count("slow_weather") == 1
        assert len(server.requests) == 1  # no second request after the reader left


def test_stopping_at_a_response_runs_none_of_its_calls(live: LocalServer) -> None:
    """The loop acts on a response only once the reader asked for the event after it."""
    before = ran.count("get_weather")
    events = ts.run_events(live.client(), model="m", messages=USER, toolbox=Toolbox([get_weather]))
    for event in events:
        if isinstance(event, ResponseReceived):
            assert event.message["tool_calls"]
            break
    events.close()
    assert no_worker_left() and ran.count("get_weather") == before and len(live.requests) == 1


def faithful(events: list[tuple[str, str, Any]]) -> None:
    """Each ArgumentsDelta was read while the call held exactly the text up to that delta."""
    so_far: dict[str, str] = {}
    assert events
    for call_id, text, arguments in events:
        so_far[call_id] = so_far.get(call_id, "") + text
        assert arguments == so_far[call_id]


LONG = [("call_l", "get_weather", '{"city": "' + "Llanfairpwllgwyngyll" * 5 + '"}')]


def long_model(body: dict[str, Any]) -> Any:
    if any(m.get("role") == "tool" for m in body.get("messages") or []):
        return text_reply("Rainy.")
    return StreamScript(tool_call_chunks(LONG, pieces=40))


def test_the_reader_sees_each_call_as_it_stood_at_its_event() -> None:
    seen: list[tuple[str, str, Any]] = []
    with LocalServer(handler=long_model) as server:
        for event in ts.run_events(server.client(), model="m", messages=USER, toolbox=Toolbox([get_weather])):
            if isinstance(event, StreamEvent) and isinstance(event.event, ArgumentsDelta):
                call = event.event.call
                seen.append((call.id or "", event.event.text, call.arguments))
    faithful(seen)


def test_the_async_reader_sees_each_call_as_it_stood_at_its_event() -> None:
    seen: list[tuple[str, str, Any]] = []

    async def pull(server: LocalServer) -> None:
        box = Toolbox([get_weather])
        async for event in ts.arun_events(server.async_client(), model="m", messages=USER, toolbox=box):
            if isinstance(event, StreamEvent) and isinstance(event.event, ArgumentsDelta):
                call = event.event.call
                seen.append((call.id or "", event.event.text, call.arguments))

    with LocalServer(handler=long_model) as server:
        asyncio.run(pull(server))
    faithful(seen)
