"""Timings: monotonic instants with one documented wall-clock anchor, and ``as_dict()`` everywhere."""

from __future__ import annotations

import json
import math
import time
from typing import Any

import toolstitch as ts
from tests.tools._support import calls_reply, text_reply, tool_messages_of, user
from toolstitch.metrics import CLOCK_ANCHOR, CallMetrics, StepTimings, wall_clock
from toolstitch.testing import LocalServer, StreamScript


def test_the_anchor_places_monotonic_instants_on_the_unix_time_line() -> None:
    mono, wall = CLOCK_ANCHOR
    assert wall_clock(mono) == wall
    assert math.isclose(wall_clock(mono + 2.5) - wall, 2.5)
    # The anchor was read at import: it is in the past of both clocks.
    assert mono <= time.monotonic() and wall <= time.time()


def test_as_dict_is_plain_json_with_instants_as_unix_time() -> None:
    metrics = CallMetrics(
        fragments=3, bytes=10, opened_at=CLOCK_ANCHOR[0] + 1.0, sealed_at=CLOCK_ANCHOR[0] + 1.5
    )
    data = metrics.as_dict()
    assert data["fragments"] == 3 and data["first_argument_at"] is None
    assert data["opened_at"] == CLOCK_ANCHOR[1] + 1.0 and math.isclose(
        data["sealed_at"] - data["opened_at"], 0.5
    )
    assert StepTimings(first_chunk=0.25, attempts=2).as_dict()["first_chunk"] == 0.25  # durations as they are
    acc = ts.Accumulator()
    acc.feed({"id": "x", "choices": [{"index": 0, "delta": {"content": "hi"}, "finish_reason": "stop"}]})
    stream = json.loads(json.dumps(acc.metrics.as_dict()))
    assert stream["chunks"] == 1 and stream["time_to_first_chunk"] >= 0
    assert math.isclose(
        stream["first_chunk_at"] - stream["started_at"], stream["time_to_first_chunk"], abs_tol=1e-6
    )


def weather(body: dict[str, Any]) -> StreamScript:
    if not tool_messages_of(body):
        return calls_reply([("call_1", "get_time", '{"tz": "UTC"}')])
    return text_reply("noon")


def test_every_timing_of_a_run_has_as_dict(server: LocalServer) -> None:
    server.handler = weather

    @ts.tool
    def get_time(tz: str) -> str:
        return "12:00"

    before = time.time()
    with server.client() as client, ts.Toolbox([get_time]) as box:
        result = ts.run(client, model="m", messages=user(), toolbox=box)
    after = time.time()
    step = result.steps[0]
    [call], [res] = step.calls, step.results
    dumped = json.loads(
        json.dumps(
            {"step": step.timings.as_dict(), "call": call.metrics.as_dict(), "result": res.timings.as_dict()}
        )
    )
    assert set(dumped["step"]) >= {"first_chunk", "arguments", "streaming", "execution", "total", "attempts"}
    # Instants are on the Unix time line, in the order they happened.
    c, r = dumped["call"], dumped["result"]
    instants = [c["opened_at"], c["arguments_complete_at"], c["sealed_at"], r["started_at"], r["finished_at"]]
    assert instants == sorted(instants)
    assert all(before - 60 <= t <= after + 60 for t in instants)  # slack: the system clock may be stepped
    assert r["execution"] == res.timings.execution and r["eager"] is False
