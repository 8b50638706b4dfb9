"""The run loop with the real ``openai`` client over real HTTP (``toolstitch.testing.LocalServer``).

The server plays the model: its ``handler`` answers from the request's messages, as a model would.
It also rejects a broken history the way OpenAI does (``check_history=True``), so every multi-step
test is checked by an independent implementation of the history rules, and again by
``validate_history`` on the returned messages.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import openai
import pytest

import toolstitch as ts
from tests.tools._support import Recorder, calls_reply, text_reply, tool_messages_of, user
from toolstitch.history import validate_history
from toolstitch.loop._run import (
    CallDispatched,
    CallFinished,
    RequestRetried,
    ResponseReceived,
    RetryPolicy,
    RunEvent,
    RunResult,
    StepFinished,
    StepStarted,
    arun,
    run,
)
from toolstitch.testing import ErrorReply, LocalServer, StreamScript, chunk, tool_call_chunks
from toolstitch.tools import Toolbox, tool
from toolstitch.tools._ledger import SQLiteLedger

FAST = RetryPolicy(attempts=3, initial=0.0, maximum=0.0, jitter=0.0)  # retries without waiting
HANDSHAKE = 10.0

ran = Recorder()
slow_cancelled = threading.Event()
meeting = threading.Barrier(2, timeout=HANDSHAKE)


@tool
def get_weather(city: str, unit: Literal["c", "f"] = "c") -> dict[str, Any]:
    """Current weather for a city."""
    ran.add("get_weather", (city, unit))
    return {"city": city, "temp": 21, "unit": unit}


@tool(read_only=True)
def get_time(tz: str) -> str:
    """The time in a time zone."""
    ran.add("get_time", tz)
    return "12:00"


@tool(read_only=True)
def meet_weather(city: str) -> str:
    meeting.wait()  # only returns once meet_time runs at the same time
    ran.add("meet_weather", city)
    return f"sunny in {city}"


@tool(read_only=True)
def meet_time(tz: str) -> str:
    meeting.wait()
    ran.add("meet_time", tz)
    return f"noon in {tz}"


@tool(timeout=0.05)
async def slow_report() -> str:
    try:
        await asyncio.sleep(3600)
    except asyncio.CancelledError:
        slow_cancelled.set()
        raise
    return "never"


@tool
def explode(reason: str) -> None:
    ran.add("explode", reason)
    raise RuntimeError(f"exploded: {reason}")


@tool
def charge(amount: int) -> str:
    ran.add("charge", amount)
    return f"charged {amount}"


@tool(read_only=True)
def lookup(q: str) -> str:
    ran.add("lookup", q)
    return f"found {q}"


def delete_everything() -> None:  # not a tool: the model must never reach it by name
    ran.add("delete_everything")


@pytest.fixture(autouse=True)
def _reset() -> None:
    ran.calls.clear()
    slow_cancelled.clear()
    meeting.reset()


@pytest.fixture
def server() -> Iterator[LocalServer]:
    with LocalServer(check_history=True) as srv:
        yield srv


@pytest.fixture
def box() -> Iterator[Toolbox]:
    with Toolbox([get_weather, get_time, meet_weather, meet_time, slow_report, explode, charge, lookup]) as b:
        yield b


def checked(result: RunResult) -> RunResult:
    """Every history a run returns must be one the next request accepts."""
    assert validate_history(result.messages) == []
    return result


def roles(result: RunResult) -> list[str]:
    return [m["role"] for m in result.messages]


def tool_contents(result: RunResult) -> list[str]:
    return [m["content"] for m in result.messages if m["role"] == "tool"]


PARALLEL = [
    ("call_w", "meet_weather", '{"city": "Paris"}'),
    ("call_t", "meet_time", '{"tz": "Europe/Paris"}'),
]


def parallel_then_answer(body: dict[str, Any]) -> StreamScript:
    results = tool_messages_of(body)
    if not results:
        return calls_reply(PARALLEL)
    return text_reply("Done: " + " / ".join(m["content"] for m in results))


# ----------------------------------------------------------------------------- the happy path


def test_two_step_conversation_with_parallel_calls(server: LocalServer, box: Toolbox) -> None:
    server.handler = parallel_then_answer
    events: list[RunEvent] = []
    with server.client() as client:
        result = checked(
            run(client, model="m", messages=user("weather and time?"), toolbox=box, on_event=events.append)
        )
    assert result.stop_reason == "done"
    assert roles(result) == ["user", "assistant", "tool", "tool", "assistant"]
    # Both tools waited for each other at a barrier: they ran concurrently, and their results are
    # appended in declared order.
    assert sorted(ran.names()) == ["meet_time", "meet_weather"]
    assert [m.get("tool_call_id") for m in result.messages if m["role"] == "tool"] == ["call_w", "call_t"]
    assert tool_contents(result) == ["sunny in Paris", "noon in Europe/Paris"]
    assert result.completion is not None
    assert result.completion.choices[0].message.content == "Done: sunny in Paris / noon in Europe/Paris"
    assert server.requests[0]["tools"] == box.definitions()
    assert len(result.steps) == 2
    first = result.steps[0]
    assert [c.status for c in first.calls] == ["ready", "ready"]
    assert [r.status for r in first.results] == ["ok", "ok"]
    assert first.timings.attempts == 1 and first.timings.streaming is not None
    assert first.timings.execution is not None
    assert all(r.timings.execution is not None for r in first.results)
    kinds = [type(e).__name__ for e in events if getattr(e, "step", None) == 0 or isinstance(e, StepFinished)]
    # The step's stream events (StreamEvent, see tests/loop/test_run_events.py) come between the two.
    kinds = [k for k in kinds if k != "StreamEvent"]
    # Both tools are read_only: each starts while the stream is still open (eager by default),
    # before the response is received.
    assert kinds[:4] == ["StepStarted", "CallDispatched", "CallDispatched", "ResponseReceived"]
    assert kinds.count("CallDispatched") == 2 and kinds.count("CallFinished") == 2
    assert isinstance(events[-1], StepFinished) and events[-1].step.index == 1


async def test_two_step_conversation_with_parallel_calls_async(server: LocalServer, box: Toolbox) -> None:
    server.handler = parallel_then_answer
    async with server.async_client() as client:
        result = checked(await arun(client, model="m", messages=user(), toolbox=box))
    assert result.stop_reason == "done"
    assert roles(result) == ["user", "assistant", "tool", "tool", "assistant"]
    assert tool_contents(result) == ["sunny in Paris", "noon in Europe/Paris"]


def test_a_wrapped_client_works_and_the_wrong_flavour_is_refused(server: LocalServer, box: Toolbox) -> None:
    server.handler = lambda body: text_reply("hello")
    with server.client() as client:
        result = checked(run(ts.wrap(client), model="m", messages=user(), toolbox=box))
        assert result.stop_reason == "done" and result.steps[0].calls == []
    with pytest.raises(TypeError, match="arun"):
        run(server.async_client(), model="m", messages=user(), toolbox=box)


# ----------------------------------------------------------------------------- corrections


def invalid_then_corrected(body: dict[str, Any]) -> StreamScript:
    results = tool_messages_of(body)
    if not results:
        return calls_reply([("call_1", "get_weather", '{"city": "Oslo", "unit": "kelvin"}')])
    if len(results) == 1:
        # The "model" reads the refusal and fixes exactly what it names.
        assert "invalid arguments for get_weather" in results[0]["content"]
        assert "unit: Input should be 'c' or 'f' (got 'kelvin')" in results[0]["content"]
        return calls_reply([("call_2", "get_weather", '{"city": "Oslo", "unit": "f"}')])
    return text_reply("It is 21F in Oslo.")


def test_invalid_arguments_then_a_corrected_call(server: LocalServer, box: Toolbox) -> None:
    server.handler = invalid_then_corrected
    with server.client() as client:
        result = checked(run(client, model="m", messages=user(), toolbox=box))
    assert result.stop_reason == "done"
    assert ran.calls == [("get_weather", ("Oslo", "f"))]  # the invalid call never reached the function
    assert result.steps[0].results[0].reason == "invalid_arguments"
    assert result.steps[1].results[0].ok


async def test_invalid_arguments_then_a_corrected_call_async(server: LocalServer, box: Toolbox) -> None:
    server.handler = invalid_then_corrected
    async with server.async_client() as client:
        result = checked(await arun(client, model="m", messages=user(), toolbox=box))
    assert result.stop_reason == "done" and ran.calls == [("get_weather", ("Oslo", "f"))]


def test_corrective_rounds_are_bounded_per_tool(server: LocalServer, box: Toolbox) -> None:
    server.handler = lambda body: calls_reply(
        [(f"call_{len(body['messages'])}", "get_weather", '{"city": 7}')]
    )
    with server.client() as client:
        result = checked(run(client, model="m", messages=user(), toolbox=box, max_corrections=2))
    assert result.stop_reason == "max_corrections"
    assert len(server.requests) == 3  # the first try and two corrective rounds
    assert ran.calls == []


def test_max_steps_stops_a_model_that_keeps_calling(server: LocalServer, box: Toolbox) -> None:
    server.handler = lambda body: calls_reply([(f"c{len(body['messages'])}", "get_time", '{"tz": "UTC"}')])
    with server.client() as client:
        result = checked(run(client, model="m", messages=user(), toolbox=box, max_steps=3))
    assert result.stop_reason == "max_steps" and ran.count("get_time") == 3
    assert roles(result)[-1] == "tool"


# ----------------------------------------------------------------------------- refusals and failures


def test_an_unknown_tool_name_is_answered_not_executed(server: LocalServer, box: Toolbox) -> None:
    def handler(body: dict[str, Any]) -> StreamScript:
        if not tool_messages_of(body):
            return calls_reply([("call_x", "delete_everything", "{}")])
        return text_reply("Sorry.")

    server.handler = handler
    with server.client() as client:
        result = checked(run(client, model="m", messages=user(), toolbox=box))
    assert ran.calls == []
    [message] = tool_contents(result)
    assert "there is no tool named 'delete_everything'" in message and "get_weather" in message
    assert result.steps[0].results[0].reason == "unknown_tool"


def test_a_tool_over_its_timeout_is_reported_and_the_run_goes_on(server: LocalServer, box: Toolbox) -> None:
    def handler(body: dict[str, Any]) -> StreamScript:
        if not tool_messages_of(body):
            return calls_reply([("call_s", "slow_report", "{}"), ("call_t", "get_time", '{"tz": "UTC"}')])
        return text_reply("The report timed out; it is 12:00.")

    server.handler = handler
    with server.client() as client:
        result = checked(run(client, model="m", messages=user(), toolbox=box))
    assert result.stop_reason == "done"
    assert [r.status for r in result.steps[0].results] == ["timeout", "ok"]
    assert "slow_report did not finish within its timeout (0.05s)" in tool_contents(result)[0]
    assert slow_cancelled.wait(HANDSHAKE)  # the async tool was cancelled, not left running


async def test_a_tool_over_its_timeout_is_cancelled_async(server: LocalServer, box: Toolbox) -> None:
    server.handler = lambda body: (
        text_reply("ok") if tool_messages_of(body) else calls_reply([("call_s", "slow_report", "{}")])
    )
    async with server.async_client() as client:
        result = checked(await arun(client, model="m", messages=user(), toolbox=box))
    assert result.steps[0].results[0].status == "timeout"
    assert slow_cancelled.is_set()


def explode_then_answer(body: dict[str, Any]) -> StreamScript:
    if not tool_messages_of(body):
        return calls_reply([("call_e", "explode", '{"reason": "disk full"}')])
    return text_reply("The tool failed.")


def test_a_tool_that_raises_becomes_an_error_result(server: LocalServer, box: Toolbox) -> None:
    server.handler = explode_then_answer
    with server.client() as client:
        result = checked(run(client, model="m", messages=user(), toolbox=box))
    assert result.stop_reason == "done"
    [content] = tool_contents(result)
    assert content.startswith("Error: explode failed (RuntimeError)") and "disk full" not in content
    assert isinstance(result.steps[0].results[0].exception, RuntimeError)


def test_raise_tool_errors_lets_the_exception_out_of_run(server: LocalServer, box: Toolbox) -> None:
    server.handler = explode_then_answer
    with server.client() as client, pytest.raises(RuntimeError, match="disk full"):
        run(client, model="m", messages=user(), toolbox=box, raise_tool_errors=True)


# ----------------------------------------------------------------------------- broken streams and retries


CHARGE = [("call_c", "charge", '{"amount": 5}')]


def test_a_stream_cut_mid_call_executes_nothing(server: LocalServer, box: Toolbox) -> None:
    # Three tries, each cut inside the arguments: the run fails, and nothing ran.
    server.handler = lambda body: calls_reply(CHARGE, cut_after=3)
    with server.client() as client, pytest.raises(openai.APIConnectionError):
        run(client, model="m", messages=user(), toolbox=box, retry=FAST)
    assert ran.calls == [] and len(server.requests) == 3


def test_a_stream_cut_once_is_retried_and_runs_once(server: LocalServer, box: Toolbox) -> None:
    server.enqueue(
        StreamScript(tool_call_chunks([("call_c", "charge", '{"amount": 99}')]), cut_after=3),
        calls_reply(CHARGE),
        text_reply("Charged."),
    )
    events: list[RunEvent] = []
    with server.client() as client:
        result = checked(
            run(client, model="m", messages=user(), toolbox=box, retry=FAST, on_event=events.append)
        )
    assert ran.calls == [("charge", 5)]  # the arguments of the cut stream never ran
    assert result.steps[0].timings.attempts == 2
    [retried] = [e for e in events if isinstance(e, RequestRetried)]
    assert retried.attempt == 1 and isinstance(retried.error, openai.APIConnectionError)


async def test_a_stream_cut_mid_call_executes_nothing_async(server: LocalServer, box: Toolbox) -> None:
    server.handler = lambda body: calls_reply(CHARGE, cut_after=3)
    async with server.async_client() as client:
        with pytest.raises(openai.APIConnectionError):
            await arun(client, model="m", messages=user(), toolbox=box, retry=FAST)
    assert ran.calls == [] and len(server.requests) == 3


def test_a_retry_after_a_500_executes_nothing_twice(server: LocalServer, box: Toolbox) -> None:
    server.enqueue(ErrorReply(500), calls_reply(CHARGE), ErrorReply(503), text_reply("Charged 5."))
    with server.client() as client:
        result = checked(run(client, model="m", messages=user(), toolbox=box, retry=FAST))
    assert ran.calls == [("charge", 5)]
    assert [s.timings.attempts for s in result.steps] == [2, 2]
    assert roles(result) == ["user", "assistant", "tool", "assistant"]


async def test_a_retry_after_a_500_executes_nothing_twice_async(server: LocalServer, box: Toolbox) -> None:
    server.enqueue(ErrorReply(500), calls_reply(CHARGE), ErrorReply(500), text_reply("Charged 5."))
    async with server.async_client() as client:
        result = checked(await arun(client, model="m", messages=user(), toolbox=box, retry=FAST))
    assert ran.calls == [("charge", 5)]
    assert [s.timings.attempts for s in result.steps] == [2, 2]


def test_an_in_band_error_and_a_429_are_retried(server: LocalServer, box: Toolbox) -> None:
    in_band = StreamScript([chunk(delta={"role": "assistant"}), {"error": {"message": "overloaded"}}])
    server.enqueue(in_band, ErrorReply(429), text_reply("fine"))
    with server.client() as client:
        result = checked(run(client, model="m", messages=user(), toolbox=box, retry=FAST))
    assert result.steps[0].timings.attempts == 3


def test_client_errors_are_not_retried(server: LocalServer, box: Toolbox) -> None:
    server.enqueue(ErrorReply(400))
    with server.client() as client, pytest.raises(openai.BadRequestError):
        run(client, model="m", messages=user(), toolbox=box, retry=FAST)
    assert len(server.requests) == 1


def test_a_stream_that_fails_after_its_calls_were_sealed_is_not_retried(
    server: LocalServer, box: Toolbox
) -> None:
    # Every chunk (finish_reason included) arrives, then the connection drops before [DONE].
    chunks = tool_call_chunks(CHARGE)
    server.enqueue(StreamScript(chunks, cut_after=len(chunks)))
    with server.client() as client, pytest.raises(openai.APIConnectionError):
        run(client, model="m", messages=user(), toolbox=box, retry=FAST)
    assert len(server.requests) == 1 and ran.calls == []


# ----------------------------------------------------------------------------- eager dispatch


LOOKUP_THEN_WEATHER = [
    ("call_l", "lookup", '{"q": "hotels in Rome"}'),
    ("call_w", "get_weather", '{"city": "Rome", "unit": "c"}'),
]


def slow_stream(calls: list[tuple[str, str, str]], **kw: Any) -> StreamScript:
    # interleave=False: the first call's arguments complete while the second is still streaming.
    return StreamScript(tool_call_chunks(calls, interleave=False, pieces=4), delay=0.01, **kw)


def test_eager_dispatch_starts_read_only_calls_while_the_stream_is_still_open(
    server: LocalServer, box: Toolbox
) -> None:
    server.enqueue(slow_stream(LOOKUP_THEN_WEATHER), text_reply("Rome it is."))
    seen: list[tuple[str | None, bool, str]] = []

    def on_event(event: RunEvent) -> None:
        if isinstance(event, CallDispatched):
            seen.append((event.call.name, event.eager, event.call.status))

    with server.client() as client:
        result = checked(run(client, model="m", messages=user(), toolbox=box, eager=True, on_event=on_event))
    # lookup (read-only) started before its call was sealed; get_weather (not read-only) waited.
    assert seen == [("lookup", True, "open"), ("get_weather", False, "ready")]
    lookup_result, weather_result = result.steps[0].results
    assert lookup_result.timings.eager and lookup_result.ok and not weather_result.timings.eager
    assert ran.count("lookup") == 1
    assert tool_contents(result)[0] == "found hotels in Rome"


def test_eager_results_of_a_failed_stream_are_discarded(server: LocalServer, box: Toolbox) -> None:
    first = tool_call_chunks(
        [("call_l", "lookup", '{"q": "first"}'), ("call_w", "get_weather", '{"city": "Rome"}')],
        interleave=False,
    )
    first_cut = StreamScript(first, cut_after=len(first) - 2, delay=0.01)  # lookup complete, then cut
    server.enqueue(first_cut, slow_stream([("call_l", "lookup", '{"q": "second"}')]), text_reply("done"))
    dispatched: list[RunEvent] = []
    with server.client() as client:
        result = checked(
            run(
                client,
                model="m",
                messages=user(),
                toolbox=box,
                eager=True,
                retry=FAST,
                on_event=lambda e: dispatched.append(e) if isinstance(e, CallDispatched) else None,
            )
        )
    assert [(e.call.arguments, e.eager) for e in dispatched if isinstance(e, CallDispatched)] == [
        ('{"q": "first"}', True),
        ('{"q": "second"}', True),
    ]
    assert tool_contents(result) == ["found second"]  # the first stream's result was not used
    assert [r.value for r in result.steps[0].results] == ["found second"]


async def test_eager_dispatch_async(server: LocalServer, box: Toolbox) -> None:
    server.enqueue(slow_stream(LOOKUP_THEN_WEATHER), text_reply("Rome it is."))
    eager_states: list[str] = []

    def on_event(event: RunEvent) -> None:
        if isinstance(event, CallDispatched) and event.eager:
            eager_states.append(event.call.status)

    async with server.async_client() as client:
        result = checked(
            await arun(client, model="m", messages=user(), toolbox=box, eager=True, on_event=on_event)
        )
    assert eager_states == ["open"]
    assert result.steps[0].results[0].timings.eager and ran.count("lookup") == 1


# ----------------------------------------------------------------------------- idempotency across restarts


def test_a_resumed_run_does_not_repeat_finished_calls(
    server: LocalServer, box: Toolbox, tmp_path: Path
) -> None:
    def handler(body: dict[str, Any]) -> StreamScript:
        if not tool_messages_of(body):
            return calls_reply(
                [("call_c", "charge", '{"amount": 5}'), ("call_e", "explode", '{"reason": "x"}')]
            )
        return text_reply("Charged; the other tool failed.")

    server.handler = handler
    saved: list[Any] = []

    def save(event: RunEvent) -> None:  # an application persisting each assistant turn
        if isinstance(event, ResponseReceived):
            saved.append(event.message)

    path = tmp_path / "ledger.sqlite"
    with server.client() as client:
        with SQLiteLedger(path) as ledger, pytest.raises(RuntimeError):
            run(client, model="m", messages=user(), toolbox=box, ledger=ledger, on_event=save,
                raise_tool_errors=True)  # fmt: skip
        assert ran.names() == ["charge", "explode"]
        # "After a restart": the saved history and the ledger file are all that is left.
        with SQLiteLedger(path) as ledger:
            result = checked(run(client, model="m", messages=user() + saved, toolbox=box, ledger=ledger))
    assert ran.names() == ["charge", "explode"]  # nothing ran a second time
    resumed = result.steps[0]
    assert resumed.completion is None and [r.reused for r in resumed.results] == [True, True]
    assert tool_contents(result)[0] == "charged 5"
    assert tool_contents(result)[1].startswith("Error: explode failed (RuntimeError)")
    assert result.stop_reason == "done" and len(server.requests) == 2


def test_a_provider_reusing_ids_across_turns_gets_each_call_run(server: LocalServer, box: Toolbox) -> None:
    # TGI and SGLang send "0" for every call (provider quirk Q39): the ledger must not answer the
    # second turn's call with the first turn's result, and the history must stay valid.
    def handler(body: dict[str, Any]) -> StreamScript:
        answered = len(tool_messages_of(body))
        if answered < 2:
            return calls_reply([("0", "get_time", '{"tz": "UTC"}')])
        return text_reply("twice")

    server.handler = handler
    with server.client() as client:
        result = checked(run(client, model="m", messages=user(), toolbox=box))
    assert ran.count("get_time") == 2
    assert [r.reused for s in result.steps for r in s.results] == [False, False]
    # The history answers each turn's call under its own id (a repeated id is rejected: H06).
    first, second = (m["tool_calls"][0]["id"] for m in result.messages if m.get("tool_calls"))
    assert first == "0" and second != "0"
    assert [m["tool_call_id"] for m in result.messages if m["role"] == "tool"] == [first, second]
    assert [c.id for s in result.steps for c in s.calls] == ["0", "0"]  # the calls keep what was sent


def test_events_carry_the_latency_breakdown(server: LocalServer, box: Toolbox) -> None:
    server.handler = parallel_then_answer
    events: list[RunEvent] = []
    with server.client() as client:
        run(client, model="m", messages=user(), toolbox=box, on_event=events.append)
    finished = [e for e in events if isinstance(e, CallFinished)]
    assert len(finished) == 2
    for event in finished:
        t = event.result.timings
        assert t.streaming is not None and t.arguments is not None and t.execution is not None
        assert t.validation >= 0.0 and t.confirmation == 0.0
    steps = [e.step for e in events if isinstance(e, StepFinished)]
    assert [s.index for s in steps] == [0, 1]
    first = steps[0].timings
    assert first.first_chunk is not None and first.arguments is not None and first.total > 0
    assert first.validation > 0 and first.confirmation == 0.0
    assert isinstance(events[0], StepStarted)
    body = json.dumps(server.requests[1]["messages"])
    assert "sunny in Paris" in body


async def test_cancelling_arun_cancels_running_async_tools(server: LocalServer) -> None:
    started = asyncio.Event()
    cancelled = asyncio.Event()

    @tool
    async def long_job() -> str:
        started.set()
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "never"

    server.handler = lambda body: calls_reply([("call_j", "long_job", "{}")])
    with Toolbox([long_job]) as box:
        async with server.async_client() as client:
            task = asyncio.ensure_future(arun(client, model="m", messages=user(), toolbox=box))
            await asyncio.wait_for(started.wait(), HANDSHAKE)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
    assert cancelled.is_set()
