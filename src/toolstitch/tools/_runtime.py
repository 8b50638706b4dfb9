"""A toolbox's threads: the bounded pool for sync tools and an event loop for async ones; and the
worker processes of its ``isolation="process"`` tools.

It lives in its own module so that the :class:`~toolstitch.Toolbox` can own it (made on first use,
released by ``close()``) while the executor only uses it. ``close()`` kills the worker processes
first (:mod:`._process`), then waits at most :data:`CLOSE_GRACE` seconds in all: for sync tools
still running (abandoned ones too: see :mod:`._workers`) and for async tools to unwind after their
cancellation.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from time import monotonic
from typing import Any

from ._process import ProcessWorkers
from ._workers import Workers

__all__ = ["CLOSE_GRACE", "Runtime", "is_async_callable"]

_CANCEL_GRACE = 1.0  # seconds an async tool gets to unwind after cancellation before we move on

CLOSE_GRACE = 1.0
"""Seconds ``Runtime.close()`` (so ``Toolbox.close()``) waits, in all, for the tools still running."""


def is_async_callable(fn: Any) -> bool:
    """Whether calling ``fn`` gives a coroutine (a coroutine function, a partial of one, or an
    object whose ``__call__`` is one)."""
    while hasattr(fn, "func") and not inspect.isfunction(fn):  # functools.partial
        fn = fn.func
    if inspect.iscoroutinefunction(fn):
        return True
    call = getattr(fn, "__call__", None)  # noqa: B004 - a callable object's async __call__
    return call is not None and inspect.iscoroutinefunction(call)


class Runtime:
    """A toolbox's threads: the bounded pool for sync tools (:class:`~._workers.Workers`), and (made
    on first need) an event loop in a daemon thread for async tools and async callbacks called from
    sync code, and the worker processes of process tools (:class:`~._process.ProcessWorkers`, as
    many as the pool has threads)."""

    def __init__(self, max_workers: int | None) -> None:
        self.pool = Workers(max_workers)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._processes: ProcessWorkers | None = None
        self._closed = False
        self._lock = threading.Lock()

    def processes(self) -> ProcessWorkers:
        """The worker processes of ``isolation="process"`` tools, made on first use (none is
        started before a call needs one). Raises RuntimeError after :meth:`close`."""
        with self._lock:
            if self._closed:
                raise RuntimeError("the toolbox was closed: its tool processes are gone")
            if self._processes is None:
                self._processes = ProcessWorkers(self.pool.max_workers)
            return self._processes

    def loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                ready = threading.Event()
                thread = threading.Thread(
                    target=_serve_loop, args=(loop, ready), name="toolstitch-loop", daemon=True
                )
                thread.start()
                ready.wait()
                self._loop, self._thread = loop, thread
            return self._loop

    def close(self) -> None:
        """Kill the worker processes, stop the loop (its tasks are cancelled), refuse new sync jobs
        and cancel the queued ones, then wait for both at most :data:`CLOSE_GRACE` seconds in all."""
        deadline = monotonic() + CLOSE_GRACE
        with self._lock:
            loop, thread, self._loop, self._thread = self._loop, self._thread, None, None
            processes, self._processes, self._closed = self._processes, None, True
        if processes is not None:  # first: the threads waiting for them return at once
            processes.close()
        if loop is not None:
            loop.call_soon_threadsafe(loop.stop)  # async tools unwind while the pool closes
        self.pool.close(max(0.0, deadline - monotonic()))
        if thread is not None and thread is not threading.current_thread():
            thread.join(max(0.0, deadline - monotonic()))


def _serve_loop(loop: asyncio.AbstractEventLoop, ready: threading.Event) -> None:
    asyncio.set_event_loop(loop)
    loop.call_soon(ready.set)
    try:
        loop.run_forever()
        pending = asyncio.all_tasks(loop)
        for task in pending:
            task.cancel()
        if pending:
            loop.run_until_complete(asyncio.wait(pending, timeout=_CANCEL_GRACE))
    finally:
        loop.close()
