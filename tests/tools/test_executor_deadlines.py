"""Deadlines hold for sync and async execution alike: confirmations that block, calls that never got
a worker, async tools that swallow their cancellation, duplicates that wait, ledgers that fail.

No timed assertions: each test shows *what* happened (the tool never ran, the batch returned while
the tool was still stuck, the retry ran the call), never how long it took.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from tests.tools._support import Recorder, sealed
from toolstitch.tools import MemoryLedger, StoredResult, Toolbox, tool
from toolstitch.tools._claim import Claim, ClaimLedger, LedgerEntry, fingerprint

HANDSHAKE = 10.0


def _run(mode: str, box: Toolbox, calls: Any, **kw: Any) -> Any:
    return box.execute(calls, **kw) if mode == "sync" else asyncio.run(box.aexecute(calls, **kw))


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_blocking_confirmation_does_not_outlive_the_total_timeout(mode: str) -> None:
    ran = Recorder()
    release = threading.Event()
    asked = threading.Event()

    def confirm(call: Any, t: Any) -> bool:
        asked.set()
        release.wait(HANDSHAKE)  # a person who answers "yes" long after the deadline
        return True

    @tool(confirm=True)
    def delete() -> str:
        ran.add("delete")
        return "deleted"

    box = Toolbox([delete], confirm=confirm, total_timeout=0.05)
    try:
        [result] = _run(mode, box, sealed([("d1", "delete", "{}")]))
        assert asked.is_set()
        assert result.status == "not_started" and result.reason == "not_started"
        assert "not started" in result.content and "delete" in result.content
    finally:
        release.set()
        box.close()
    assert ran.calls == []  # never after the deadline, even though the answer was yes


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_call_still_queued_at_its_deadline_is_not_started_and_a_retry_runs_it(mode: str) -> None:
    ran = Recorder()
    release = threading.Event()

    @tool
    def hog() -> str:
        release.wait(HANDSHAKE)
        return "hogged"

    @tool
    def queued() -> str:
        ran.add("queued")
        return "ran"

    ledger = MemoryLedger()
    box = Toolbox([hog, queued], max_workers=1, total_timeout=0.05)  # one worker: queued waits
    try:
        results = _run(mode, box, sealed([("h", "hog", "{}"), ("q", "queued", "{}")]), ledger=ledger)
        assert [r.status for r in results] == ["timeout", "not_started"]
        assert "timeout" not in results[1].content and "abandoned" not in results[1].content
        [queued_call] = sealed([("q", "queued", "{}")])
        assert ledger.get("q", fingerprint(queued_call)) is None  # released, not finished
    finally:
        release.set()
        box.close()
    with Toolbox([hog, queued]) as box:
        [again] = _run(mode, box, sealed([("q", "queued", "{}")]), ledger=ledger)
    assert again.ok and not again.reused and ran.calls == [("queued", None)]


async def test_an_async_tool_that_swallows_cancellation_cannot_hold_the_batch() -> None:
    stuck = asyncio.Event()
    release = asyncio.Event()

    @tool(timeout=0.05)
    async def stubborn() -> str:
        while not release.is_set():
            try:
                stuck.set()
                await release.wait()
            except asyncio.CancelledError:
                continue  # swallows every cancellation
        return "late"

    with Toolbox([stubborn]) as box:
        [result] = await box.aexecute(sealed([("s", "stubborn", "{}")]))
        # The batch came back while the tool is still inside its loop: it was not awaited to the end.
        assert stuck.is_set() and not release.is_set()
        assert result.status == "timeout"
        release.set()


def test_an_async_tool_that_swallows_cancellation_cannot_hold_a_sync_batch() -> None:
    release = threading.Event()

    @tool
    async def stubborn() -> str:
        while not release.is_set():
            try:
                await asyncio.sleep(0.01)
            except asyncio.CancelledError:
                continue
        return "late"

    box = Toolbox([stubborn], total_timeout=0.05)
    try:
        [result] = box.execute(sealed([("s", "stubborn", "{}")]))
        assert result.status == "timeout" and not release.is_set()
    finally:
        release.set()
        box.close()


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_duplicate_running_elsewhere_waits_then_reports_in_progress(mode: str) -> None:
    ran = Recorder()

    @tool(timeout=0.05)
    def charge() -> str:
        ran.add("charge")
        return "charged"

    ledger = MemoryLedger()
    [call] = sealed([("c", "charge", "{}")])
    held = ledger.acquire("c", fingerprint(call), "charge", read_only=False)  # another worker has it
    assert held.action == "run"
    with Toolbox([charge]) as box:
        [result] = _run(mode, box, [call], ledger=ledger)
    assert ran.calls == []
    assert result.status == "refused" and result.reason == "in_progress"


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_duplicate_reuses_the_result_the_winner_finishes_while_it_waits(mode: str) -> None:
    ran = Recorder()

    @tool
    def charge() -> str:
        ran.add("charge")
        return "charged"

    ledger = MemoryLedger()
    [call] = sealed([("c", "charge", "{}")])
    fp = fingerprint(call)
    held = ledger.acquire("c", fp, "charge", read_only=False)
    assert held.owner is not None
    owner = held.owner
    threading.Timer(
        0.05, lambda: ledger.finish("c", fp, owner, StoredResult("ok", "elsewhere", value=1))
    ).start()
    with Toolbox([charge]) as box:
        [result] = _run(mode, box, [call], ledger=ledger)
    assert ran.calls == []
    assert result.reused and result.ok and result.content == "elsewhere" and result.value == 1


class _BrokenLedger(MemoryLedger):
    def try_claim(self, key: str, fp: str, name: str, owner: str, lease_expires: float) -> Claim:
        raise OSError("database unreachable")


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_an_unreachable_ledger_runs_nothing_and_says_why(mode: str) -> None:
    ran = Recorder()
    charge = tool(lambda: ran.add("charge"), name="charge")
    with Toolbox([charge]) as box:
        [result] = _run(mode, box, sealed([("c", "charge", "{}")]), ledger=_BrokenLedger())
    assert ran.calls == []
    assert result.status == "refused" and result.reason == "ledger_unavailable"
    assert "database unreachable" in result.content


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_declined_confirmation_releases_the_claim(mode: str) -> None:
    @tool(confirm=True)
    def delete() -> str:
        return "deleted"

    ledger = MemoryLedger()
    [call] = sealed([("d", "delete", "{}")])
    with Toolbox([delete], confirm=lambda c, t: False) as box:
        [result] = _run(mode, box, [call], ledger=ledger)
    assert result.reason == "not_approved"
    assert ledger.get("d", fingerprint(call)) is None
    with Toolbox([delete], confirm=lambda c, t: True) as box:
        [again] = _run(mode, box, [call], ledger=ledger)
    assert again.ok and not again.reused


def test_an_interrupted_sync_batch_abandons_its_claims() -> None:
    started = threading.Event()
    release = threading.Event()

    @tool
    def slow() -> str:
        started.set()
        release.wait(HANDSHAKE)
        return "done"

    class Stop(Exception):
        pass

    def on_start(call: Any, eager: bool) -> None:
        assert started.wait(HANDSHAKE)
        raise Stop  # the caller's hook fails while the tool runs

    ledger = MemoryLedger()
    [call] = sealed([("s", "slow", "{}")])
    from toolstitch.tools._executor import execute

    box = Toolbox([slow])
    try:
        with pytest.raises(Stop):
            execute(box, [call], ledger=ledger, on_start=on_start)
    finally:
        release.set()
        box.close()
    entry: LedgerEntry | None = ledger.get("s", fingerprint(call))
    assert entry is not None and ledger.is_stale(entry)  # outcome unknown, never run again
    assert ledger.acquire("s", fingerprint(call), "slow", read_only=False).action == "unknown"


def test_claim_ledger_is_the_protocol_every_ledger_implements() -> None:
    assert issubclass(MemoryLedger, ClaimLedger)
    with pytest.raises(TypeError):
        ClaimLedger()  # type: ignore[abstract]


def test_a_sync_execute_called_from_inside_an_async_tool_does_not_deadlock() -> None:
    @tool
    def inner() -> str:
        return "inner"

    with Toolbox([inner]) as inner_box:

        @tool
        async def outer() -> str:
            [result] = inner_box.execute(sealed([("i", "inner", "{}")]))  # blocking, on purpose
            return f"outer+{result.value}"

        with Toolbox([outer], timeout=HANDSHAKE) as box:
            [result] = box.execute(sealed([("o", "outer", "{}")]))
    assert result.ok and result.value == "outer+inner"
