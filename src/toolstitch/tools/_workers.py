"""The threads sync tools run on: a bounded pool that can let go of a thread it cannot stop.

``concurrent.futures.ThreadPoolExecutor`` does not fit a tool runner, for two reasons. A sync tool
past its timeout cannot be killed, and in that pool its thread keeps its worker slot until the
function returns: two stuck tools in a pool of two starve every later call. And the pool's threads
are joined at interpreter exit, so a script whose tool hangs ends only when the tool does.

:class:`Workers` keeps the pool's promise (at most ``max_workers`` jobs at once, the rest queued in
order, a queued job cancellable) and adds :meth:`Workers.abandon`: the job's slot is freed at once
and the next queued job starts on another thread, while the abandoned thread runs on until the
function returns and then exits. Its threads are daemon threads, kept a few seconds when idle so a
turn does not pay a thread start per call.

Bounds on waiting for threads that still run a tool, abandoned or not:

* ``Workers.close(timeout)`` waits at most ``timeout`` seconds in total (``Toolbox.close()`` passes
  ``CLOSE_GRACE`` of :mod:`._runtime`);
* at interpreter exit, one ``atexit`` hook waits for the threads of every live ``Workers`` at most
  :data:`EXIT_GRACE` seconds in total; then the interpreter exits and the daemon threads die with
  it (a tool still running is stopped wherever it is, like any daemon thread).
"""

from __future__ import annotations

import atexit
import collections
import concurrent.futures
import contextlib
import itertools
import os
import threading
import weakref
from collections.abc import Callable
from time import monotonic
from typing import Any, TypeVar

__all__ = ["EXIT_GRACE", "Workers"]

EXIT_GRACE = 2.0
"""Seconds the interpreter's exit waits, in total, for tool threads that still run."""

_IDLE = 5.0  # seconds an idle thread waits for work before it exits

T = TypeVar("T")

_Job = tuple[concurrent.futures.Future[Any], Callable[..., Any], tuple[Any, ...]]

_names = itertools.count()
_LIVE: weakref.WeakSet[Workers] = weakref.WeakSet()  # what the exit hook waits for


class Workers:
    """At most ``max_workers`` counted jobs running at once on daemon threads; the rest queued (FIFO).

    ``max_workers`` defaults to ``ThreadPoolExecutor``'s: ``min(32, os.cpu_count() + 4)``.
    """

    def __init__(self, max_workers: int | None = None) -> None:
        if max_workers is None:
            max_workers = min(32, (os.cpu_count() or 1) + 4)
        if max_workers < 1:
            raise ValueError("max_workers must be at least 1")
        self.max_workers = max_workers
        self._lock = threading.Lock()
        self._work = threading.Condition(self._lock)  # idle threads wait here for a job
        self._queue: collections.deque[_Job] = collections.deque()
        self._counted = 0  # threads that count against max_workers: running a job or idle
        self._idle = 0  # of those, threads waiting for a job
        self._running: set[concurrent.futures.Future[Any]] = set()  # counted jobs taken by a thread
        self._threads: set[threading.Thread] = set()  # every live thread, abandoned ones included
        self._closed = False
        _LIVE.add(self)

    def submit(self, fn: Callable[..., T], /, *args: Any) -> concurrent.futures.Future[T]:
        """Run ``fn(*args)`` on a worker thread: now if a slot is free, else after the jobs queued
        before it. Whatever it raises goes into the future. Raises RuntimeError after :meth:`close`."""
        future: concurrent.futures.Future[T] = concurrent.futures.Future()
        with self._lock:
            if self._closed:
                raise RuntimeError("cannot schedule new futures after shutdown")
            job = (future, fn, args)
            self._queue.append(job)
            try:
                self._staff()
            except BaseException:  # no thread to be had: the job is not taken either
                self._queue.remove(job)
                raise
        return future

    def abandon(self, future: concurrent.futures.Future[Any]) -> None:
        """Stop counting the job behind ``future`` against ``max_workers``: the next queued job
        starts on another thread, while this one's thread runs until the function returns (a thread
        cannot be killed) and then exits. A queued job is cancelled; a finished one is left alone."""
        if future.cancel():  # still queued (or cancelled already): it never runs
            return
        with self._lock:
            if future not in self._running:  # finished, or not one of ours
                return
            self._running.discard(future)
            self._counted -= 1
            with contextlib.suppress(RuntimeError):  # no thread now: the next submit tries again
                self._staff()

    def close(self, timeout: float) -> None:
        """Refuse new jobs, cancel the queued ones, and wait at most ``timeout`` seconds in total for
        the threads still running a job (abandoned or not). Idle threads exit at once."""
        self._close_by(monotonic() + timeout)

    def _close_by(self, deadline: float) -> None:
        with self._lock:
            self._closed = True
            queued = list(self._queue)
            self._queue.clear()
            self._work.notify_all()
            threads = list(self._threads)
        for future, _, _ in queued:
            future.cancel()
        me = threading.current_thread()
        for thread in threads:
            if thread is not me:  # a tool closing its own toolbox
                thread.join(max(0.0, deadline - monotonic()))

    def _staff(self) -> None:
        """With the lock held, after the queue grew or a slot was freed: wake an idle thread, and
        start one more when the queue holds more jobs than idle threads and a slot is free."""
        if self._idle:
            self._work.notify()
        if len(self._queue) > self._idle and self._counted < self.max_workers:
            self._counted += 1
            thread = threading.Thread(target=self._serve, name=f"toolstitch-tool-{next(_names)}", daemon=True)
            self._threads.add(thread)
            try:
                thread.start()
            except BaseException:
                self._counted -= 1
                self._threads.discard(thread)
                raise

    def _serve(self) -> None:
        """A worker thread: take jobs in order until idle too long, closed, or abandoned."""
        me = threading.current_thread()
        try:
            while True:
                with self._lock:
                    waited_out = False
                    while not self._queue:
                        if self._closed or waited_out:
                            self._counted -= 1
                            return
                        self._idle += 1
                        waited_out = not self._work.wait(_IDLE)
                        self._idle -= 1
                    future, fn, args = self._queue.popleft()
                    self._running.add(future)
                _run(future, fn, args)
                with self._lock:
                    abandoned = future not in self._running  # then abandon() stopped counting us
                    self._running.discard(future)
                del future, fn, args  # hold no job (nor its exception) while idle
                if abandoned:
                    return
        finally:
            with self._lock:
                self._threads.discard(me)


def _run(future: concurrent.futures.Future[Any], fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
    """Run one job into its future. Nothing escapes: the thread must survive any function."""
    try:
        if not future.set_running_or_notify_cancel():
            return  # cancelled while queued: it never runs
    except RuntimeError:  # settled by someone else while queued: nothing to run
        return
    try:
        result = fn(*args)
    except BaseException as exc:
        with contextlib.suppress(concurrent.futures.InvalidStateError):
            future.set_exception(exc)
    else:
        with contextlib.suppress(concurrent.futures.InvalidStateError):
            future.set_result(result)


@atexit.register
def _wait_at_exit() -> None:
    """Give running tools :data:`EXIT_GRACE` seconds in total to finish, then let the interpreter go."""
    deadline = monotonic() + EXIT_GRACE
    for workers in list(_LIVE):
        workers._close_by(deadline)
