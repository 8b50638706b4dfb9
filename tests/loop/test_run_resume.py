"""``ts.run(..., api="responses", background=True)``: a dropped connection is resumed, not re-sent.

Over real HTTP against the local server, which keeps background responses and answers
``GET /responses/{id}?stream=true&starting_after=N``: the loop's stream resumes itself, so the model
is asked once per step, every tool runs once, and the answer is the one an unbroken run gets.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import openai
import pytest

import toolstitch as ts
from tests.loop._resume_worker import toolbox
from toolstitch.client._resume import can_resume
from toolstitch.loop._run import RetryPolicy
from toolstitch.testing import LocalServer, StreamScript, response_events, sse_body
from toolstitch.tools import Toolbox, tool

ROOT = Path(__file__).resolve().parents[2]

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


# --------------------------------------------------------------------------- across processes


def test_a_run_whose_process_died_mid_stream_is_resumed_in_another(
    server: LocalServer, tmp_path: Path
) -> None:
    """Process A records the background response's id in the ledger, then dies while its stream
    waits mid-call. Process B (this one), the same run with the same ledger, resumes that response
    from the recorded sequence number: no second generation, the tool runs once, in B."""
    db, effects = tmp_path / "ledger.db", tmp_path / "effects.txt"
    effects.write_text("")
    first = response_events([("call_1", "get_weather", '{"city": "Paris"}')], id="resp_1", background=True)
    answer = response_events(text="Sunny in Paris.", id="resp_2", background=True)
    middle = len(sse_body(first[:5], done=False)) + 4  # inside the call's arguments
    server.enqueue(StreamScript.responses(first, cut_after_bytes=middle, stall=120))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}
    child = subprocess.Popen(
        [sys.executable, "-m", "tests.loop._resume_worker", server.base_url, str(db), str(effects)],
        cwd=ROOT,
        env=env,
    )
    try:
        with ts.SQLiteLedger(db, scope="conv") as ledger:
            for _ in range(600):  # until A recorded the response (it reads events; its stream stalls)
                if db.exists() and _recorded(ledger) is not None:
                    break
                time.sleep(0.05)
            record = _recorded(ledger)
            assert record is not None and record["response_id"] == "resp_1"
        child.kill()
        child.wait(timeout=30)
        server.enqueue(StreamScript.responses(answer))
        with ts.SQLiteLedger(db, scope="conv") as ledger:
            result = ts.run(
                server.client(),
                model="m",
                input="Weather in Paris?",
                toolbox=toolbox(str(effects)),
                api="responses",
                background=True,
                ledger=ledger,
            )
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(timeout=30)
    assert [(c.id, c.status) for c in result.steps[0].calls] == [("call_1", "ready")], [
        (c.error, c.anomalies) for c in result.steps[0].calls
    ]
    assert result.output_text == "Sunny in Paris."
    assert len(server.requests) == 2  # A's request for step 0, B's for step 1: step 0 not asked again
    assert server.retrieves[-1] == {
        "id": "resp_1",
        "stream": True,
        "starting_after": str(record["starting_after"]),
    }
    lines = effects.read_text().splitlines()
    assert [line.rsplit(" ", 1)[0] for line in lines] == ["get_weather Paris"]
    assert lines[0].rsplit(" ", 1)[1] == str(os.getpid())  # it ran in B


def _recorded(ledger: ts.SQLiteLedger) -> dict[str, Any] | None:
    """The background response the ledger holds for step 0 of the run, if any."""
    for entry in ledger.entries():
        if entry.key.startswith("background-response:") and isinstance(entry.value, dict):
            return entry.value
    return None
