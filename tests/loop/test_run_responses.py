"""``ts.run(..., api="responses")``: the tool loop over the Responses API, over real HTTP.

The local server plays the model and checks every request's ``input`` the way OpenAI answers it
(``check_history=True``: an output without its call, a call left unanswered, is a 400), an
implementation written apart from the package's own validator, which checks the result again.
"""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest

pytest.importorskip("openai.types.responses", reason="this openai release has no Responses API")

import toolstitch as ts
from toolstitch.errors import ApprovalError, RequestError
from toolstitch.loop._run import CallDispatched, ResponseReceived, RetryPolicy, RunEvent
from toolstitch.testing import LocalServer, StreamScript, response_events
from toolstitch.tools import Toolbox, tool

FAST = RetryPolicy(attempts=3, initial=0.0, maximum=0.0, jitter=0.0)
ran: list[tuple[str, Any]] = []


@tool
def get_weather(city: str) -> dict[str, Any]:
    """Current weather for a city."""
    ran.append(("get_weather", city))
    return {"city": city, "temp": 21}


@tool(read_only=True, eager=True)
def get_time(tz: str) -> str:
    """The time in a time zone."""
    ran.append(("get_time", tz))
    return "12:00"


@tool(confirm=True)
def delete_file(path: str) -> str:
    """Delete a file."""
    ran.append(("delete_file", path))
    return "deleted"


BOX = Toolbox([get_weather, get_time, delete_file])


@pytest.fixture(autouse=True)
def _clear() -> None:
    ran.clear()


def model(server: LocalServer, *turns: list[dict[str, Any]]) -> None:
    server.check_history = True
    for n, events in enumerate(turns):
        for event in events:
            if event.get("type", "").startswith("response.") and isinstance(event.get("response"), dict):
                event["response"]["id"] = f"resp_{n}"
        server.enqueue(StreamScript.responses(events))


def calls_turn(*calls: tuple[str, str, str]) -> list[dict[str, Any]]:
    return response_events(list(calls), reasoning="Let me use the tools.")


def test_the_loop_runs_calls_and_asks_again_until_text(server: LocalServer) -> None:
    model(
        server,
        calls_turn(("call_1", "get_weather", '{"city": "Paris"}'), ("call_2", "get_time", '{"tz": "CET"}')),
        response_events(text="It is 21 degrees and noon."),
    )
    result = ts.run(server.client(), model="m", input="Weather and time?", toolbox=BOX, api="responses")
    assert result.stop_reason == "done"
    assert result.output_text == "It is 21 degrees and noon."
    assert sorted(ran) == [("get_time", "CET"), ("get_weather", "Paris")]
    kinds = [i.get("type", i.get("role")) for i in result.input]
    assert kinds == [
        "user",
        "reasoning",
        "function_call",
        "function_call",
        "function_call_output",
        "function_call_output",
        "message",
    ]
    assert ts.validate_input(result.input) == []
    second = server.requests[1]
    assert second["stream"] is True
    assert [t["name"] for t in second["tools"]] == ["get_weather", "get_time", "delete_file"]
    assert all("function" not in t for t in second["tools"])  # the flat shape
    outputs = [i for i in second["input"] if i.get("type") == "function_call_output"]
    assert {
        o["call_id"]: json.loads(o["output"]) if o["output"].startswith("{") else o["output"] for o in outputs
    } == {
        "call_1": {"city": "Paris", "temp": 21},
        "call_2": "12:00",
    }


async def test_arun_is_the_async_twin(server: LocalServer) -> None:
    model(server, calls_turn(("call_1", "get_weather", '{"city": "Oslo"}')), response_events(text="Cold."))
    result = await ts.arun(server.async_client(), model="m", input="Weather?", toolbox=BOX, api="responses")
    assert result.output_text == "Cold."
    assert ran == [("get_weather", "Oslo")]
    assert ts.validate_input(result.input) == []


def test_run_events_pulls_the_same_events(server: LocalServer) -> None:
    model(server, calls_turn(("call_1", "get_time", '{"tz": "UTC"}')), response_events(text="Noon."))
    events = list(ts.run_events(server.client(), model="m", input="Time?", toolbox=BOX, api="responses"))
    finished = events[-1]
    assert finished.result.output_text == "Noon."  # type: ignore[union-attr]
    received = [e for e in events if isinstance(e, ResponseReceived)]
    assert [i["type"] for i in received[0].message["items"]] == ["reasoning", "function_call"]


def test_an_invalid_call_is_answered_with_an_error_and_never_runs(server: LocalServer) -> None:
    model(
        server,
        calls_turn(("call_1", "get_weather", '{"town": "Paris"}')),
        calls_turn(("call_2", "get_weather", '{"city": "Paris"}')),
        response_events(text="21 degrees."),
    )
    result = ts.run(server.client(), model="m", input="Weather?", toolbox=BOX, api="responses")
    assert result.output_text == "21 degrees."
    assert ran == [("get_weather", "Paris")]
    first_output = next(i for i in result.input if i.get("type") == "function_call_output")
    assert first_output["call_id"] == "call_1" and "Error" in first_output["output"]


def test_a_response_that_fails_is_asked_again(server: LocalServer) -> None:
    model(
        server,
        response_events([("call_1", "get_weather", '{"city": "Rome"}')], status="failed"),
        calls_turn(("call_1", "get_weather", '{"city": "Rome"}')),
        response_events(text="Warm."),
    )
    events: list[RunEvent] = []
    result = ts.run(
        server.client(),
        model="m",
        input="Weather?",
        toolbox=BOX,
        api="responses",
        retry=FAST,
        on_event=events.append,
    )
    assert result.output_text == "Warm."
    assert ran == [("get_weather", "Rome")]  # once: the failed response's call never ran


def test_a_dropped_stream_runs_nothing_and_is_retried(server: LocalServer) -> None:
    server.check_history = True
    server.enqueue(
        StreamScript.responses(calls_turn(("call_1", "get_weather", '{"city": "Rome"}')), cut_after=8)
    )
    model(server, calls_turn(("call_1", "get_weather", '{"city": "Rome"}')))
    server.enqueue(StreamScript.responses(response_events(text="Warm.", id="resp_9")))
    result = ts.run(server.client(), model="m", input="Weather?", toolbox=BOX, api="responses", retry=FAST)
    assert result.output_text == "Warm."
    assert ran == [("get_weather", "Rome")]


def test_eager_dispatch_starts_a_read_only_call_while_streaming(server: LocalServer) -> None:
    model(server, calls_turn(("call_1", "get_time", '{"tz": "UTC"}')), response_events(text="Noon."))
    events: list[RunEvent] = []
    ts.run(
        server.client(),
        model="m",
        input="Time?",
        toolbox=BOX,
        api="responses",
        eager=True,
        on_event=events.append,
    )
    dispatched = [e for e in events if isinstance(e, CallDispatched)]
    assert [e.eager for e in dispatched] == [True]
    assert ran == [("get_time", "UTC")]


def test_approvals_wait_and_resume_from_the_stored_input(server: LocalServer) -> None:
    model(server, calls_turn(("call_1", "delete_file", '{"path": "/tmp/x"}')))
    ledger = ts.MemoryLedger()
    first = ts.run(server.client(), model="m", input="Clean up", toolbox=BOX, api="responses", ledger=ledger)
    assert first.stop_reason == "awaiting_approval"
    assert [c.id for c in first.pending] == ["call_1"]
    assert ran == []
    stored = json.loads(json.dumps(first.input))
    with pytest.raises(ApprovalError):
        ts.run(
            server.client(),
            model="m",
            input=stored,
            toolbox=BOX,
            api="responses",
            ledger=ledger,
            approvals={"call_9": True},
        )
    server.enqueue(StreamScript.responses(response_events(text="Deleted.", id="resp_7")))
    done = ts.run(
        server.client(),
        model="m",
        input=stored,
        toolbox=BOX,
        api="responses",
        ledger=ledger,
        approvals={"call_1": True},
    )
    assert done.output_text == "Deleted."
    assert ran == [("delete_file", "/tmp/x")]
    assert ts.validate_input(done.input) == []


def test_a_reused_call_id_gets_a_fresh_one(server: LocalServer) -> None:
    model(
        server,
        calls_turn(("call_0", "get_time", '{"tz": "UTC"}')),
        calls_turn(("call_0", "get_time", '{"tz": "CET"}')),
        response_events(text="Done."),
    )
    result = ts.run(server.client(), model="m", input="Times?", toolbox=BOX, api="responses")
    assert result.output_text == "Done."
    call_ids = [i["call_id"] for i in result.input if i.get("type") == "function_call"]
    assert len(set(call_ids)) == 2
    assert ts.validate_input(result.input) == []


def test_the_arguments_are_checked_before_anything_is_sent(server: LocalServer) -> None:
    with pytest.raises(TypeError, match="input="):
        ts.run(server.client(), model="m", messages=[], toolbox=BOX, api="responses")
    with pytest.raises(TypeError, match="previous_response_id"):
        ts.run(server.client(), model="m", input="x", toolbox=BOX, api="responses", previous_response_id="r")
    with pytest.raises(RequestError):
        ts.run(
            server.client(),
            model="m",
            input=[{"type": "function_call_output", "call_id": "x", "output": "y"}],
            toolbox=BOX,
            api="responses",
        )
    with pytest.raises(ValueError, match="api"):
        ts.run(server.client(), model="m", messages=[], toolbox=BOX, api="completions")  # type: ignore[arg-type]
    assert server.requests == []


def test_the_chat_loop_is_unchanged_by_the_new_keywords(server: LocalServer) -> None:
    with pytest.raises(TypeError, match="input="):
        ts.run(server.client(), model="m", input="x", toolbox=BOX)
    with pytest.raises(openai.OpenAIError):
        ts.run(
            server.client(), model="m", messages=[{"role": "user", "content": "hi"}], toolbox=BOX, retry=FAST
        )
