"""``ts.run(..., api="responses", background=True)``: a dropped connection is resumed, not re-sent.

Over real HTTP against the local server, which keeps background responses and answers
``GET /responses/{id}?stream=true&starting_after=N``: the loop's stream resumes itself, so the model
is asked once per step, every tool runs once, and the answer is the one an unbroken run gets.
"""

from __future__ import annotations

from typing import Any

import openai
import pytest

import toolstitch as ts
from toolstitch.client._resume import can_resume
from toolstitch.loop._run import RetryPolicy
from toolstitch.testing import LocalServer, StreamScript, response_events, sse_body
from toolstitch.tools import Toolbox, tool

_SDK = getattr(openai.OpenAI(api_key="x", base_url="http://127.0.0.1:9"), "responses", None)
pytestmark = pytest.mark.skipif(
    _SDK is None or not can_resume(_SDK.retrieve), reason="this openai release cannot stream retrieve"
)

ran: list[tuple[str, Any]] = []


@tool
def get_weather(city: str) -> dict[str, Any]:
    """Current weather for a city (not read-only: it must never run twice)."""
    ran.append(("get_weather", city))
    return {"city": city, "temp": 21}


@tool(read_only=True)
def get_time(tz: str) -> str:
    """The time in a time zone."""
    ran.append(("get_time", tz))
    return "12:00"


BOX = Toolbox([get_weather, get_time])
CALLS = [("call_1", "get_weather", '{"city": "Paris"}'), ("call_2", "get_time", '{"tz": "CET"}')]
FIRST = response_events(CALLS, reasoning="Two tools.", id="resp_1", background=True)
SECOND = response_events(text="21 degrees at noon.", id="resp_2", background=True)
RETRY = RetryPolicy(attempts=3, initial=0.0, maximum=0.0, jitter=0.0)


@pytest.fixture(autouse=True)
def _clear() -> None:
    ran.clear()


def cut_inside_second_call() -> int:
    second = next(n for n, e in enumerate(FIRST) if e.get("item", {}).get("call_id") == "call_2")
    return len(sse_body(FIRST[: second + 2], done=False)) + 5


def test_a_cut_step_is_resumed_not_asked_again(server: LocalServer) -> None:
    server.check_history = True
    server.enqueue(
        StreamScript.responses(FIRST, cut_after_bytes=cut_inside_second_call()),
        StreamScript.responses(SECOND),
    )
    result = ts.run(
        server.client(),
        model="m",
        input="Weather?",
        toolbox=BOX,
        api="responses",
        background=True,
        retry=RETRY,
    )
    assert result.output_text == "21 degrees at noon."
    assert sorted(ran) == [("get_time", "CET"), ("get_weather", "Paris")]  # each tool once
    assert len(server.requests) == 2  # one generation per step: the cut was resumed, not re-sent
    assert [r["id"] for r in server.retrieves] == ["resp_1"]
    assert result.steps[0].timings.attempts == 1


async def test_the_async_loop_resumes_too(server: LocalServer) -> None:
    server.check_history = True
    server.enqueue(
        StreamScript.responses(FIRST, cut_after_bytes=cut_inside_second_call()),
        StreamScript.responses(SECOND),
    )
    result = await ts.arun(
        server.async_client(), model="m", input="Weather?", toolbox=BOX, api="responses", background=True
    )
    assert result.output_text == "21 degrees at noon."
    assert sorted(ran) == [("get_time", "CET"), ("get_weather", "Paris")]
    assert len(server.requests) == 2 and len(server.retrieves) == 1


def test_without_background_the_loop_asks_again_as_before(server: LocalServer) -> None:
    """What a cut costs without resume: the whole response is generated a second time."""
    plain_first = response_events(CALLS, reasoning="Two tools.", id="resp_1")
    plain_second = response_events(text="21 degrees at noon.", id="resp_2")
    server.enqueue(
        StreamScript.responses(plain_first, cut_after_bytes=cut_inside_second_call()),
        StreamScript.responses(plain_first),
        StreamScript.responses(plain_second),
    )
    result = ts.run(server.client(), model="m", input="Weather?", toolbox=BOX, api="responses", retry=RETRY)
    assert result.output_text == "21 degrees at noon."
    assert len(server.requests) == 3 and server.retrieves == []
    assert result.steps[0].timings.attempts == 2
