"""Warm-ups (``@tool(warm=fn)``, issue 30 item 2) in ``ts.run``/``ts.arun``, over real HTTP.

A warm-up starts when the request offering its tool is sent, runs once per toolbox, a call waits
for it, and one that fails or runs out of time is recorded while the tool runs cold.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import pytest

import toolstitch as ts
from tests.tools._support import calls_reply, text_reply, user
from toolstitch.events import CallDispatched, RunEvent
from toolstitch.testing import LocalServer, StreamScript
from toolstitch.tools import Toolbox, tool

HANDSHAKE = 10.0


class Setup:
    """A warm-up whose progress a test can see and steer."""

    def __init__(self, fail: bool = False, hold: bool = False) -> None:
        self.runs = 0
        self.started = threading.Event()
        self.finished = threading.Event()
        self.release = threading.Event()
        self.fail, self.hold = fail, hold
        if not hold:
            self.release.set()

    def __call__(self) -> None:
        self.runs += 1
        self.started.set()
        self.release.wait(HANDSHAKE)
        if self.fail:
            raise ConnectionError("no route to the hotel API")
        self.finished.set()


def make_tool(setup: Any, name: str = "search") -> ts.Tool:
    def search(city: str) -> str:
        """Search hotels."""
        return "warm" if setup.finished.is_set() else "cold"

    return tool(read_only=True, warm=setup, name=name)(search)


@pytest.fixture
def server() -> Iterator[LocalServer]:
    with LocalServer(check_history=True) as srv:
        yield srv


CALL = [("c1", "search", '{"city": "Rome"}')]


def test_the_warm_up_starts_when_the_request_is_sent_and_the_call_waits_for_it(server: LocalServer) -> None:
    setup = Setup(hold=True)
    seen_at_request: list[bool] = []

    def handler(body: dict[str, Any]) -> StreamScript:
        if len(seen_at_request) == 0:
            # The request has just arrived: no chunk was sent yet, and the warm-up already runs.
            seen_at_request.append(setup.started.wait(HANDSHAKE))
            return calls_reply(CALL)
        return text_reply("done")

    server.handler = handler

    def on_event(event: RunEvent) -> None:
        if isinstance(event, CallDispatched):
            setup.release.set()  # the call has been started: it must wait for the warm-up

    with Toolbox([make_tool(setup)]) as box:
        result = ts.run(server.client(), model="m", messages=user(), toolbox=box, on_event=on_event)
        warm = box.warm_state("search")
    assert seen_at_request == [True]
    assert [r.value for r in result.steps[0].results] == ["warm"]
    assert warm is not None and warm.status == "ok" and warm.duration is not None
    assert warm.as_dict()["status"] == "ok"


def test_a_warm_up_runs_once_per_toolbox(server: LocalServer) -> None:
    setup = Setup()
    server.enqueue(calls_reply(CALL), text_reply("one"), calls_reply(CALL), text_reply("two"))
    with Toolbox([make_tool(setup)]) as box:
        for _ in range(2):
            result = ts.run(server.client(), model="m", messages=user(), toolbox=box)
            assert [r.value for r in result.steps[0].results] == ["warm"]
    assert setup.runs == 1


def test_a_failed_warm_up_is_recorded_and_the_tool_runs_cold(
    server: LocalServer, caplog: pytest.LogCaptureFixture
) -> None:
    setup = Setup(fail=True)
    server.enqueue(calls_reply(CALL), text_reply("done"))
    with Toolbox([make_tool(setup)]) as box:
        result = ts.run(server.client(), model="m", messages=user(), toolbox=box)
        warm = box.warm_state("search")
    assert [r.status for r in result.steps[0].results] == ["ok"]
    assert [r.value for r in result.steps[0].results] == ["cold"]
    assert warm is not None and warm.status == "failed" and isinstance(warm.error, ConnectionError)
    assert "warm-up of tool 'search' raised ConnectionError" in caplog.text


def test_a_warm_up_out_of_time_is_recorded_and_the_tool_runs_cold(server: LocalServer) -> None:
    setup = Setup(hold=True)
    server.enqueue(calls_reply(CALL), text_reply("done"))
    try:
        with Toolbox([make_tool(setup)], warm_timeout=0.05) as box:
            result = ts.run(server.client(), model="m", messages=user(), toolbox=box)
            warm = box.warm_state("search")
            assert warm is not None and warm.status == "timeout"
    finally:
        setup.release.set()
    assert [r.value for r in result.steps[0].results] == ["cold"]


def test_execute_starts_a_warm_up_nobody_started(server: LocalServer) -> None:
    from tests.tools._support import sealed

    setup = Setup()
    with Toolbox([make_tool(setup)]) as box:
        [result] = box.execute(sealed(CALL, box.definitions()))
    assert result.value == "warm" and setup.runs == 1


async def test_an_async_warm_up_runs_on_the_loop_of_arun(server: LocalServer) -> None:
    loops: list[asyncio.AbstractEventLoop] = []

    async def connect() -> None:
        loops.append(asyncio.get_running_loop())

    @tool(read_only=True, warm=connect)
    async def search(city: str) -> str:
        """Search hotels."""
        return "warm" if loops else "cold"

    server.enqueue(calls_reply(CALL), text_reply("done"))
    with Toolbox([search]) as box:
        result = await ts.arun(server.async_client(), model="m", messages=user(), toolbox=box)
    assert loops == [asyncio.get_running_loop()]
    assert [r.value for r in result.steps[0].results] == ["warm"]


def test_warm_must_be_callable() -> None:
    def search(city: str) -> str:
        """Search hotels."""
        return city

    with pytest.raises(TypeError, match="warm"):
        tool(read_only=True, warm=42)(search)  # type: ignore[arg-type]


def test_a_hanging_sync_warm_up_never_holds_the_worker_the_call_needs(server: LocalServer) -> None:
    # Issue 41 item 5: the warm-up ran in the toolbox's pool; with one worker the call waited behind it
    # for the warm-up's whole run although warm_timeout had passed.
    setup = Setup(hold=True)
    server.enqueue(calls_reply(CALL), text_reply("done"))
    try:
        with Toolbox([make_tool(setup)], max_workers=1, warm_timeout=0.3, timeout=HANDSHAKE * 2) as box:
            result = ts.run(server.client(), model="m", messages=user(), toolbox=box)
            warm = box.warm_state("search")
            assert warm is not None and warm.status == "timeout" and warm.finished_at is None
    finally:
        setup.release.set()
    assert [r.status for r in result.steps[0].results] == ["ok"]
    assert [r.value for r in result.steps[0].results] == ["cold"]
