"""The pool sync tools run on (``tools/_workers.py``, issue 41 item 5), with real threads.

Ordering is proven with events, never with "took less than" timings; a time bound is asserted only
where the bound is the point (close and interpreter exit), and generously.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import toolstitch as ts
from tests.tools._support import sealed
from toolstitch.tools import Toolbox, tool
from toolstitch.tools._workers import EXIT_GRACE, Workers

ROOT = Path(__file__).resolve().parents[2]  # the scripts import tests.tools._support
HANDSHAKE = 10.0  # seconds a test waits for something that happens at once unless the code is wrong


@pytest.fixture
def workers() -> Iterator[Workers]:
    pool = Workers(2)
    yield pool
    pool.close(0)


def blocker(started: threading.Event, release: threading.Event, value: str) -> str:
    started.set()
    release.wait(HANDSHAKE * 3)
    return value


def test_at_most_max_workers_run_and_abandoning_one_starts_the_next(workers: Workers) -> None:
    starts = [threading.Event() for _ in range(3)]
    releases = [threading.Event() for _ in range(3)]
    try:
        futures = [workers.submit(blocker, starts[i], releases[i], f"job{i}") for i in range(3)]
        assert starts[0].wait(HANDSHAKE) and starts[1].wait(HANDSHAKE)
        assert not starts[2].wait(0.2)  # both slots taken: the third waits in the queue
        assert not futures[2].running()

        workers.abandon(futures[0])
        assert starts[2].wait(HANDSHAKE)  # the freed slot went to the queued job ...
        assert not futures[0].done()  # ... while the abandoned one still blocks on its thread

        for release in releases:
            release.set()
        assert [f.result(HANDSHAKE) for f in futures] == ["job0", "job1", "job2"]
    finally:
        for release in releases:
            release.set()


def test_an_abandoned_thread_exits_when_its_function_returns(workers: Workers) -> None:
    started, release = threading.Event(), threading.Event()
    threads: list[threading.Thread] = []

    def job() -> str:
        threads.append(threading.current_thread())
        return blocker(started, release, "late")

    future = workers.submit(job)
    assert started.wait(HANDSHAKE)
    [thread] = threads
    workers.abandon(future)
    release.set()
    assert future.result(HANDSHAKE) == "late"  # its result still lands in the future
    thread.join(HANDSHAKE)
    assert not thread.is_alive()


def test_a_thread_is_reused_for_the_next_job() -> None:
    pool = Workers(1)
    try:
        names = [pool.submit(lambda: threading.current_thread().name).result(HANDSHAKE) for _ in range(5)]
    finally:
        pool.close(HANDSHAKE)
    assert len(set(names)) == 1 and names[0].startswith("toolstitch-tool")


def test_a_cancelled_queued_job_never_runs() -> None:
    pool = Workers(1)
    started, release = threading.Event(), threading.Event()
    ran = threading.Event()
    try:
        first = pool.submit(blocker, started, release, "first")
        assert started.wait(HANDSHAKE)
        queued = pool.submit(ran.set)
        assert queued.cancel()
        also_queued = pool.submit(ran.set)
        pool.abandon(also_queued)  # abandoning a queued job cancels it
        assert also_queued.cancelled()
        release.set()
        assert first.result(HANDSHAKE) == "first"
        assert pool.submit(lambda: "after").result(HANDSHAKE) == "after"  # the queue moved past them
        assert not ran.is_set()
    finally:
        release.set()
        pool.close(HANDSHAKE)


def test_abandoning_a_finished_job_is_harmless(workers: Workers) -> None:
    future = workers.submit(lambda: 42)
    assert future.result(HANDSHAKE) == 42
    workers.abandon(future)
    workers.abandon(future)
    assert [workers.submit(lambda i=i: i).result(HANDSHAKE) for i in range(4)] == [0, 1, 2, 3]


class Stop(BaseException):
    """Not an Exception: it must not escape the worker thread either."""


def test_exceptions_land_in_the_future_and_the_thread_survives(workers: Workers) -> None:
    def boom(exc: BaseException) -> None:
        raise exc

    with pytest.raises(ValueError, match="bad"):
        workers.submit(boom, ValueError("bad")).result(HANDSHAKE)
    with pytest.raises(Stop):
        workers.submit(boom, Stop()).result(HANDSHAKE)
    assert workers.submit(lambda: "alive").result(HANDSHAKE) == "alive"


def test_close_waits_at_most_its_timeout_then_submit_raises() -> None:
    pool = Workers(1)
    started, release = threading.Event(), threading.Event()
    try:
        stuck = pool.submit(blocker, started, release, "stuck")
        queued = pool.submit(lambda: "never")
        assert started.wait(HANDSHAKE)
        t0 = time.monotonic()
        pool.close(0.3)
        assert time.monotonic() - t0 < 0.3 + 2.0
        assert queued.cancelled() and not stuck.done()
        with pytest.raises(RuntimeError, match="after shutdown"):
            pool.submit(lambda: None)
    finally:
        release.set()


def test_max_workers_defaults_like_the_thread_pool_and_must_be_positive() -> None:
    assert Workers(None).max_workers == min(32, (os.cpu_count() or 1) + 4)
    with pytest.raises(ValueError, match="max_workers"):
        Workers(0)


def run_script(code: str) -> tuple[float, subprocess.CompletedProcess[str]]:
    t0 = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=60, cwd=ROOT
    )
    return time.monotonic() - t0, done


def test_the_interpreter_exit_waits_for_an_abandoned_tool_at_most_the_bound() -> None:
    elapsed, done = run_script(
        """
        import threading, time
        from toolstitch.tools._workers import Workers

        started = threading.Event()

        def sleeper():
            started.set()
            time.sleep(30)

        pool = Workers(1)
        future = pool.submit(sleeper)
        started.wait(10)
        pool.abandon(future)
        print("returning")
        """
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "returning"
    assert elapsed < 15  # the 30 s sleep was not waited for: EXIT_GRACE (2 s) at most


def test_a_script_whose_sync_tool_times_out_exits_within_the_bound() -> None:
    elapsed, done = run_script(
        """
        import time
        import toolstitch as ts
        from tests.tools._support import sealed

        @ts.tool
        def stuck() -> str:
            time.sleep(30)
            return "late"

        box = ts.Toolbox([stuck], timeout=0.5)
        [result] = box.execute(sealed([("a", "stuck", "{}")]))
        print(result.status)
        """
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "timeout"
    assert elapsed < 15


# ----------------------------------------------------------------------------- warm-ups


def test_a_hanging_sync_warm_up_does_not_hold_the_only_worker() -> None:
    release = threading.Event()
    warm_started = threading.Event()

    def connect() -> None:
        warm_started.set()
        release.wait(30)

    @tool(read_only=True, warm=connect)
    def search(city: str) -> str:
        """Search hotels."""
        return "warm" if release.is_set() else "cold"

    try:
        with Toolbox([search], max_workers=1, warm_timeout=0.3, timeout=20) as box:
            box.warm_up()
            assert warm_started.wait(HANDSHAKE)
            [result] = box.execute(sealed([("c1", "search", '{"city": "Rome"}')], box.definitions()))
            warm = box.warm_state("search")
            assert result.status == "ok" and result.value == "cold"
            # The call ran while the warm-up still hung: it did not wait behind it for the worker.
            assert warm is not None and warm.status == "timeout" and warm.finished_at is None
            assert warm_started.is_set() and not release.is_set()
    finally:
        release.set()


def test_warm_ups_of_many_tools_leave_the_pool_to_the_calls() -> None:
    release = threading.Event()

    def hang() -> None:
        release.wait(30)

    tools = [tool(read_only=True, warm=hang, name=f"slow{i}")(lambda: "x") for i in range(4)]

    @tool
    def quick() -> str:
        return "done"

    try:
        with Toolbox([*tools, quick], max_workers=2, timeout=20) as box:
            box.warm_up()  # four warm-ups hang; with max_workers=2 they would fill the pool twice
            results = box.execute(sealed([("a", "quick", "{}"), ("b", "quick", "{}")], box.definitions()))
            assert [r.status for r in results] == ["ok", "ok"]
            assert all(w.status == "running" for w in box.warm_ups.values())
    finally:
        release.set()


def test_sync_warm_ups_run_on_their_own_named_threads() -> None:
    names: list[str] = []
    done = threading.Event()

    def connect() -> None:
        names.append(threading.current_thread().name)
        done.set()

    search = tool(read_only=True, warm=connect, name="search")(lambda: "x")
    with ts.Toolbox([search]) as box:
        box.warm_up()
        assert done.wait(HANDSHAKE)
    assert names == ["toolstitch-warm"]


def test_the_documented_bounds_are_the_constants() -> None:
    from toolstitch.tools._runtime import CLOSE_GRACE

    doc = " ".join((Toolbox.close.__doc__ or "").split())
    assert (CLOSE_GRACE, EXIT_GRACE) == (1.0, 2.0)
    assert "at most 1 second in all (``CLOSE_GRACE``)" in doc
    assert "at most 2 seconds in all (``EXIT_GRACE``)" in doc
    production = " ".join((ROOT / "docs" / "production.md").read_text().split())
    assert "at most 1 s in all, and the interpreter's exit at most 2 s in all" in production
