"""The order of a run's events, as ``docs/streaming.md`` ("The order of events") writes it down.

Observed on real runs (``ts.run_events`` and ``on_event``, the real client, the local server): an
eager (``read_only``) call is dispatched right after the fragment that completed its arguments, so
its ``CallDispatched`` comes before its ``ArgumentsComplete`` and ``ToolCallReady``; a call whose
arguments end in the chunk that finishes the choice, and a call to a tool that is not
``read_only``, are dispatched after ``ResponseReceived``. Every ``CallFinished`` comes after
``ResponseReceived``, however early the tool finished.
"""

from __future__ import annotations

from typing import Any

import pytest

import toolstitch as ts
from toolstitch.events import CallDispatched, StreamEvent
from toolstitch.testing import LocalServer, StreamScript, chunk, tool_call_chunks


@ts.tool(read_only=True)
def get_weather(city: str) -> str:
    """Current weather in a city (read-only: it may start while the model writes)."""
    return f"sunny in {city}"


@ts.tool
def book_table(city: str) -> str:
    """Book a table (not read-only: it waits for the seal)."""
    return f"booked in {city}"


USER = [{"role": "user", "content": "Oslo?"}]
ANSWER = [chunk(delta={"content": "Done."}), chunk(delta={}, finish_reason="stop")]
STEP_1 = "StepStarted ContentDelta ChoiceFinished StreamEnded ResponseReceived StepFinished RunFinished"
ARGUMENTS = "StepStarted ToolCallStarted ArgumentsDelta ArgumentsDelta ArgumentsDelta"


def names(event: Any) -> str:
    """The event's class (a stream event's own class), with ``eager`` for ``CallDispatched``."""
    inner = event.event if isinstance(event, StreamEvent) else event
    name = type(inner).__name__
    return f"{name}(eager)" if isinstance(inner, CallDispatched) and inner.eager else name


def calls(tool: str, *, finish_with_last_fragment: bool = False, delay: float = 0.0) -> StreamScript:
    chunks = tool_call_chunks([("call_1", tool, '{"city": "Oslo"}')])
    if finish_with_last_fragment:  # the last argument fragment and finish_reason in one chunk
        chunks[-2]["choices"][0]["finish_reason"] = chunks[-1]["choices"][0]["finish_reason"]
        del chunks[-1]
    return StreamScript(chunks, delay=delay)


def observed(server: LocalServer, first: StreamScript) -> str:
    server.enqueue(first, StreamScript(ANSWER))
    with ts.Toolbox([get_weather, book_table]) as box:
        pulled = [names(e) for e in ts.run_events(server.client(), model="m", messages=USER, toolbox=box)]
    server.enqueue(first, StreamScript(ANSWER))
    pushed: list[str] = []
    with ts.Toolbox([get_weather, book_table]) as box:
        ts.run(
            server.client(), model="m", messages=USER, toolbox=box, on_event=lambda e: pushed.append(names(e))
        )
    assert pushed == pulled[:-1] and pulled[-1] == "RunFinished"  # the same events, the same order
    return " ".join(pulled)


@pytest.mark.parametrize("delay", [0.0, 0.05], ids=["fast", "slow-stream"])
def test_an_eager_call_is_dispatched_before_it_is_ready(server: LocalServer, delay: float) -> None:
    assert observed(server, calls("get_weather", delay=delay)) == (
        f"{ARGUMENTS} CallDispatched(eager) ArgumentsComplete ToolCallReady ChoiceFinished StreamEnded "
        f"ResponseReceived CallFinished StepFinished {STEP_1}"
    )


def test_arguments_ending_with_the_finish_are_dispatched_after_the_response(server: LocalServer) -> None:
    assert observed(server, calls("get_weather", finish_with_last_fragment=True)) == (
        f"{ARGUMENTS} ArgumentsComplete ToolCallReady ChoiceFinished StreamEnded "
        f"ResponseReceived CallDispatched CallFinished StepFinished {STEP_1}"
    )


def test_a_call_that_is_not_read_only_is_dispatched_after_the_response(server: LocalServer) -> None:
    assert observed(server, calls("book_table")) == (
        f"{ARGUMENTS} ArgumentsComplete ToolCallReady ChoiceFinished StreamEnded "
        f"ResponseReceived CallDispatched CallFinished StepFinished {STEP_1}"
    )
