"""The executor: parallel calls run together, results come back in declared order, a slow tool is
abandoned at its timeout, a raising tool becomes an error result, cancellation reaches async tools.

Concurrency is shown by handshakes (each tool waits for the other), never by measuring time: two
tools that can only finish together prove they ran together.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Any

import pytest
from pydantic import BaseModel

import toolstitch as ts
from tests.tools._support import Recorder, sealed
from toolstitch.tools import Toolbox, tool
from toolstitch.tools._executor import ToolResult
from toolstitch.tools._ledger import MemoryLedger

HANDSHAKE = 10.0  # seconds a tool waits for its partner before giving up (a bound, not a measurement)


def test_parallel_sync_calls_run_concurrently_and_keep_their_declared_order() -> None:
    barrier = threading.Barrier(2, timeout=HANDSHAKE)
    second_done = threading.Event()

    @tool
    def first(x: int) -> int:
        barrier.wait()
        assert second_done.wait(HANDSHAKE)  # finishes last
        return x

    @tool
    def second(x: int) -> int:
        barrier.wait()
        second_done.set()
        return x

    with Toolbox([first, second]) as box:
        results = box.execute(sealed([("a", "first", '{"x": 1}'), ("b", "second", '{"x": 2}')]))
    assert [(r.call.id, r.status, r.value) for r in results] == [("a", "ok", 1), ("b", "ok", 2)]


async def test_parallel_async_calls_run_concurrently_and_keep_their_declared_order() -> None:
    ready = {"a": asyncio.Event(), "b": asyncio.Event()}

    @tool
    async def meet(me: str, other: str) -> str:
        ready[me].set()
        await asyncio.wait_for(ready[other].wait(), HANDSHAKE)
        if me == "a":
            await asyncio.sleep(0.01)  # finish after the partner
        return me

    with Toolbox([meet]) as box:
        results = await box.aexecute(
            sealed([("c1", "meet", '{"me": "a", "other": "b"}'), ("c2", "meet", '{"me": "b", "other": "a"}')])
        )
    assert [r.value for r in results] == ["a", "b"]


async def test_sync_and_async_tools_mix_in_one_async_batch() -> None:
    started = threading.Event()

    @tool
    def blocking() -> str:
        started.set()
        return "sync"

    @tool
    async def waiting() -> str:
        # The sync tool is in a thread, so the loop stays free while it runs.
        await asyncio.get_running_loop().run_in_executor(None, started.wait, HANDSHAKE)
        return "async"

    with Toolbox([blocking, waiting]) as box:
        results = await box.aexecute(sealed([("a", "waiting", "{}"), ("b", "blocking", "{}")]))
    assert [r.value for r in results] == ["async", "sync"]


def test_async_tools_run_from_sync_code() -> None:
    @tool
    async def double(x: int) -> int:
        await asyncio.sleep(0)
        return 2 * x

    with Toolbox([double]) as box:
        [result] = box.execute(sealed([("a", "double", '{"x": 21}')]))
    assert result.value == 42


# ----------------------------------------------------------------------------- timeouts


async def test_an_async_tool_over_its_timeout_is_cancelled_and_reported() -> None:
    cancelled = asyncio.Event()

    @tool(timeout=0.05)
    async def slow() -> str:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "never"

    @tool
    async def quick() -> str:
        return "fine"

    with Toolbox([slow, quick]) as box:
        results = await box.aexecute(sealed([("a", "slow", "{}"), ("b", "quick", "{}")]))
    assert [r.status for r in results] == ["timeout", "ok"]
    assert cancelled.is_set()
    assert "slow did not finish within its timeout (0.05s)" in results[0].content


def test_a_sync_tool_over_its_timeout_is_abandoned_and_the_batch_moves_on() -> None:
    release = threading.Event()

    @tool
    def stuck() -> str:
        release.wait(3600)
        return "late"

    box = Toolbox([stuck], timeout=0.05)  # the toolbox default applies to tools without their own
    try:
        [result] = box.execute(sealed([("a", "stuck", "{}")]))
        assert result.status == "timeout" and result.value is None
    finally:
        release.set()
        box.close()


def test_a_sync_run_abandons_an_async_tool_over_its_timeout_and_cancels_it() -> None:
    cancelled = threading.Event()

    @tool(timeout=0.05)
    async def slow() -> None:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    with Toolbox([slow]) as box:
        [result] = box.execute(sealed([("a", "slow", "{}")]))
        assert result.status == "timeout"
        assert cancelled.wait(HANDSHAKE)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_the_total_timeout_bounds_the_whole_batch(mode: str) -> None:
    release = threading.Event()

    @tool
    def stuck() -> str:
        release.wait(3600)
        return "late"

    @tool
    def quick() -> str:
        return "fine"

    box = Toolbox([stuck, quick], total_timeout=0.05)
    calls = sealed([("a", "stuck", "{}"), ("b", "quick", "{}")])
    try:
        results = box.execute(calls) if mode == "sync" else asyncio.run(box.aexecute(calls))
        assert [r.status for r in results] == ["timeout", "ok"]
        assert "the time allowed for this batch of calls" in results[0].content
    finally:
        release.set()
        box.close()


# ----------------------------------------------------------------------------- failures


def test_a_raising_tool_becomes_an_error_result_logged_with_the_call_id(
    caplog: pytest.LogCaptureFixture,
) -> None:
    @tool
    def boom(x: int) -> int:
        raise ValueError(f"bad x {x}")

    @tool
    def fine() -> str:
        return "ok"

    with caplog.at_level(logging.DEBUG, logger="toolstitch"), Toolbox([boom, fine]) as box:
        results = box.execute(sealed([("call_boom", "boom", '{"x": 3}'), ("call_fine", "fine", "{}")]))
    assert [r.status for r in results] == ["error", "ok"]
    # The model is told the type, never the text (texts carry hostnames and tokens).
    assert results[0].content.startswith("Error: boom failed (ValueError)")
    assert "bad x" not in results[0].content
    assert isinstance(results[0].exception, ValueError)
    # One line at WARNING (with the text: logs stay in the process), the traceback at DEBUG.
    [record] = [r for r in caplog.records if r.levelno == logging.WARNING and "raised" in r.getMessage()]
    assert "call_boom" in record.getMessage() and "bad x 3" in record.getMessage()
    assert record.tool_call_id == "call_boom"  # type: ignore[attr-defined]
    assert record.exc_info is None and "\n" not in record.getMessage()
    [trace] = [r for r in caplog.records if r.levelno == logging.DEBUG and r.exc_info]
    assert trace.exc_info is not None and trace.exc_info[1] is results[0].exception


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_raise_tool_errors_lets_the_exception_out_after_the_batch(mode: str) -> None:
    ran = Recorder()

    @tool
    def boom() -> None:
        raise KeyError("missing")

    @tool
    def fine() -> None:
        ran.add("fine")

    calls = sealed([("a", "boom", "{}"), ("b", "fine", "{}")])
    with Toolbox([boom, fine]) as box, pytest.raises(KeyError, match="missing"):
        if mode == "sync":
            box.execute(calls, raise_tool_errors=True)
        else:
            asyncio.run(box.aexecute(calls, raise_tool_errors=True))
    assert ran.names() == ["fine"]  # the other call of the batch still ran


async def test_cancelling_aexecute_cancels_running_async_tools() -> None:
    started = asyncio.Event()
    cancelled = asyncio.Event()

    @tool
    async def long() -> None:
        started.set()
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    with Toolbox([long]) as box:
        task = asyncio.ensure_future(box.aexecute(sealed([("a", "long", "{}")])))
        await asyncio.wait_for(started.wait(), HANDSHAKE)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    assert cancelled.is_set()


# ----------------------------------------------------------------------------- results


def test_results_carry_values_content_and_timings() -> None:
    class Receipt(BaseModel):
        order: str
        total: float

    @tool
    def order(item: str, call: ts.ToolCall) -> Receipt:
        return Receipt(order=f"{item}/{call.id}", total=9.5)

    @tool
    def note() -> str:
        return "plain text stays as is"

    with Toolbox([order, note]) as box:
        [receipt, text] = box.execute(sealed([("c1", "order", '{"item": "book"}'), ("c2", "note", "{}")]))
    assert receipt.value == Receipt(order="book/c1", total=9.5)
    assert receipt.content == '{"order":"book/c1","total":9.5}'
    assert text.content == "plain text stays as is"
    assert receipt.to_message() == {"role": "tool", "tool_call_id": "c1", "content": receipt.content}
    timings = receipt.timings
    assert timings.execution is not None and timings.started_at is not None
    assert timings.streaming is not None and timings.arguments is not None and not timings.eager


def test_a_refused_call_gets_a_tool_message_too() -> None:
    [call] = sealed([("c1", "get", '{"a": ')], finish_reason=None)
    [result] = Toolbox().execute([call])
    assert result.status == "refused" and result.reason == "incomplete"
    message = result.to_message()
    assert message["tool_call_id"] == "c1" and "cut off" in message["content"]


def test_to_message_is_the_history_builder_of_the_result() -> None:
    """``ToolResult.to_message`` delegates to ``history.result_message`` (which reads the fields)."""
    [call] = sealed([("c1", "get", "{}")])
    for result in (ToolResult(call, "ok", value={"a": 1}), ToolResult(call, "error", error="Error: boom")):
        for dialect in ("openai", "mistral"):
            assert result.to_message(dialect) == ts.history.result_message(result, dialect)
            assert result.to_message(dialect) == ts.tool_messages([result], dialect=dialect)[0]


def test_a_finished_call_id_is_not_executed_again() -> None:
    ran = Recorder()

    @tool
    def charge(amount: int) -> str:
        ran.add("charge", amount)
        return f"charged {amount}"

    ledger = MemoryLedger()
    calls = sealed([("pay_1", "charge", '{"amount": 5}')])
    with Toolbox([charge]) as box:
        first: list[ToolResult] = box.execute(calls, ledger=ledger)
        again = box.execute(sealed([("pay_1", "charge", '{"amount": 5}')]), ledger=ledger)
        again_async = asyncio.run(box.aexecute(calls, ledger=ledger))
    assert ran.calls == [("charge", 5)]
    for result in (*again, *again_async):
        assert result.reused and result.ok and result.value == "charged 5"
        assert result.content == first[0].content


def test_hooks_see_each_start_and_each_result() -> None:
    @tool
    def ping() -> str:
        return "pong"

    started: list[Any] = []
    finished: list[ToolResult] = []
    from toolstitch.tools._executor import execute

    with Toolbox([ping]) as box:
        execute(
            box,
            sealed([("a", "ping", "{}"), ("b", "nope", "{}")]),
            on_start=lambda call, eager: started.append((call.id, eager)),
            on_result=finished.append,
        )
    assert started == [("a", False)]
    assert sorted(r.call.id or "" for r in finished) == ["a", "b"]
