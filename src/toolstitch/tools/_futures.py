"""Futures across threads and event loops, written once for the executor.

The executor works on several loops and threads at once: the caller's event loop (``aexecute``), the
toolbox's loop thread (``execute``, a sync run's eager starts), the worker pool, a daemon thread per
confirmation callback. These move a coroutine, a future, a cancellation or a function's answer from
one to another; none of them knows what a tool is.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import threading
from collections.abc import Callable, Coroutine
from typing import Any

__all__ = ["cancel_anywhere", "here", "in_thread", "running_loop", "submit"]


def running_loop() -> asyncio.AbstractEventLoop | None:
    """The event loop this thread runs, or None (where ``asyncio.get_running_loop`` raises)."""
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def cancel_anywhere(future: Any) -> None:
    """Cancel a tool's or a flow's future from any thread (an asyncio one in its own loop)."""
    if isinstance(future, asyncio.Future) and future.get_loop() is not running_loop():
        with contextlib.suppress(RuntimeError):  # its loop is closed: nothing runs there any more
            future.get_loop().call_soon_threadsafe(future.cancel)
        return
    future.cancel()


def here(future: Any) -> asyncio.Future[Any]:
    """``future`` as an asyncio future of the running loop (an asyncio future of another loop, or a
    ``concurrent.futures.Future``, is mirrored; cancelling the mirror does not cancel it)."""
    loop = asyncio.get_running_loop()
    if isinstance(future, asyncio.Future):
        if future.get_loop() is loop:
            return future
        mirror: concurrent.futures.Future[Any] = concurrent.futures.Future()

        def copy(done: asyncio.Future[Any]) -> None:
            if mirror.done():
                return
            error = None if done.cancelled() else done.exception()
            if done.cancelled():
                mirror.cancel()
            elif error is not None:
                mirror.set_exception(error)
            else:
                mirror.set_result(done.result())

        future.get_loop().call_soon_threadsafe(future.add_done_callback, copy)
        future = mirror
    return asyncio.wrap_future(future)


def submit(loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, Any]) -> Any:
    """Run ``coro`` on ``loop``: a task when this thread runs that loop, else thread-safely. A
    closed loop runs nothing: the coroutine is closed and the future says it was cancelled."""
    if loop.is_closed():
        coro.close()
        gone: concurrent.futures.Future[Any] = concurrent.futures.Future()
        gone.cancel()
        return gone
    if running_loop() is loop:
        task = loop.create_task(coro)
        _FLOWS.add(task)
        task.add_done_callback(_FLOWS.discard)
        return task
    return asyncio.run_coroutine_threadsafe(coro, loop)


_FLOWS: set[asyncio.Task[Any]] = set()  # strong references: a task nobody holds may be collected


def in_thread(fn: Callable[..., Any], *args: Any) -> asyncio.Future[Any]:
    """Run ``fn`` in a daemon thread of its own. Unlike ``asyncio.to_thread``, nothing waits for it
    when it is abandoned (a person who never answers must not hold ``asyncio.run`` at exit)."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()
    ctx = contextvars.copy_context()

    def deliver(ok: bool, value: Any) -> None:
        if future.done():
            return
        if ok:
            future.set_result(value)
        else:
            future.set_exception(value)

    def work() -> None:
        try:
            value, ok = ctx.run(fn, *args), True
        except BaseException as exc:
            value, ok = exc, False
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody is waiting any more
            loop.call_soon_threadsafe(deliver, ok, value)

    threading.Thread(target=work, name="toolstitch-confirm", daemon=True).start()
    return future
