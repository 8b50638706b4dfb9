"""Warm-ups: a tool's first-use setup (a connection, a client, a cache) moved off the critical path.

``@tool(warm=fn)`` names a function with no arguments (sync or ``async def``) that prepares what
the tool needs. It runs once per :class:`~toolstitch.Toolbox`, as early as the loop knows the tool
may be called: when a request offering the tool is sent, or at the latest when a call to it is
announced (its name arrives) or handed to the executor. A call waits for its tool's warm-up before
the function starts (at most ``Toolbox.warm_timeout`` seconds), so the setup overlaps the time the
model spends writing instead of adding to it.

A warm-up that raises or runs out of time is recorded (``WarmUp.status``, a WARNING on the
``"toolstitch"`` logger) and the tool runs cold: it never fails a call. It is not tried again.

A sync warm-up runs in a daemon thread of its own (``"toolstitch-warm"``), beside the toolbox's
pool: a warm-up that hangs must never hold a worker a call needs, and ``warm_timeout`` alone bounds
a call's wait. Warm-ups start at most once per tool per toolbox, so these threads are bounded by the
number of tools; nothing waits for them at ``close()`` or at exit. An async warm-up runs on the
event loop of the run that started it (``ts.arun``'s, so loop-bound clients it makes stay usable) or
on the toolbox's loop thread from sync code, where the toolbox also runs async tools.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from ..core import now
from ._runtime import Runtime, is_async_callable

__all__ = ["WarmUp", "WarmUps"]

logger = logging.getLogger("toolstitch")

WarmStatus = Literal["running", "ok", "failed", "timeout"]


@dataclass(slots=True, eq=False)
class WarmUp:
    """One tool's warm-up: when it ran and how it ended.

    ``status``       ``"running"``, ``"ok"``, ``"failed"`` (it raised: ``error``) or ``"timeout"``
                     (a call stopped waiting for it; the call ran cold)
    ``started_at``, ``finished_at``  ``time.monotonic()`` instants (``finished_at`` None while it runs)
    """

    tool: str
    started_at: float
    status: WarmStatus = "running"
    finished_at: float | None = None
    error: BaseException | None = None
    future: concurrent.futures.Future[None] = field(default_factory=concurrent.futures.Future, repr=False)

    @property
    def duration(self) -> float | None:
        """Seconds it ran (None while it runs)."""
        return None if self.finished_at is None else self.finished_at - self.started_at

    def settle(self, error: BaseException | None) -> None:
        """Record its end (``error``: it raised). Also how an MCP session records its opening."""
        self.finished_at = now()
        if error is not None:
            self.error = error
            if self.status == "running":
                self.status = "failed"
            logger.warning(
                "the warm-up of tool %r raised %s; the tool runs cold",
                self.tool,
                type(error).__name__,
                extra={"tool_name": self.tool},
            )
            logger.debug("traceback of the warm-up of %r", self.tool, exc_info=error)
        elif self.status == "running":
            self.status = "ok"
        if not self.future.done():
            self.future.set_result(None)

    def as_dict(self) -> dict[str, Any]:
        """Plain data: status, start and end (monotonic seconds), duration, the error's type."""
        return {
            "tool": self.tool,
            "status": self.status,
            "started_at": self.started_at,
            "finished_at": self.finished_at,
            "duration": self.duration,
            "error": type(self.error).__name__ if self.error is not None else None,
        }


class WarmUps:
    """The warm-ups of one toolbox, by tool name: each started at most once."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.by_tool: dict[str, WarmUp] = {}

    def get(self, name: str) -> WarmUp | None:
        with self._lock:
            return self.by_tool.get(name)

    def start(
        self,
        name: str,
        fn: Callable[[], Any],
        runtime: Callable[[], Runtime],
        loop: asyncio.AbstractEventLoop | None,
    ) -> WarmUp:
        """Start ``fn`` for tool ``name`` unless it was started before; return its record.

        ``loop``: the running event loop of an async run (an async warm-up runs there); None from
        sync code (it runs on the toolbox's loop thread). A sync warm-up gets a thread of its own."""
        with self._lock:
            found = self.by_tool.get(name)
            if found is not None:
                return found
            warm = self.by_tool[name] = WarmUp(name, now())
        try:
            if is_async_callable(fn):
                _start_async(warm, fn, loop if loop is not None else runtime().loop())
            else:
                ctx = contextvars.copy_context()
                thread = threading.Thread(
                    target=ctx.run, args=(_run_sync, warm, fn), name="toolstitch-warm", daemon=True
                )
                thread.start()
        except BaseException as exc:  # no thread to be had, a broken loop: recorded, the tool runs cold
            warm.settle(exc)
        return warm


def _run_sync(warm: WarmUp, fn: Callable[[], Any]) -> None:
    try:
        fn()
    except BaseException as exc:
        warm.settle(exc)
    else:
        warm.settle(None)


async def _run_async(warm: WarmUp, fn: Callable[[], Any]) -> None:
    try:
        await fn()
    except BaseException as exc:
        warm.settle(exc)
        if isinstance(exc, asyncio.CancelledError):
            raise
    else:
        warm.settle(None)


def _start_async(warm: WarmUp, fn: Callable[[], Any], loop: asyncio.AbstractEventLoop) -> None:
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is loop:
        task = loop.create_task(_run_async(warm, fn))
        _TASKS.add(task)
        task.add_done_callback(_TASKS.discard)
    else:
        asyncio.run_coroutine_threadsafe(_run_async(warm, fn), loop)


_TASKS: set[asyncio.Task[None]] = set()  # strong references: a task nobody holds may be collected


def wait_for(warm: WarmUp | None, limit: float) -> float:
    """Block (a worker thread) until ``warm`` ended or ``limit`` seconds passed; the seconds waited.
    Out of time, the warm-up is recorded as ``"timeout"`` and the caller runs cold."""
    if warm is None or warm.future.done() or warm.status == "timeout":
        return 0.0
    t0 = now()
    try:
        warm.future.result(timeout=limit)
    except concurrent.futures.TimeoutError:
        _timed_out(warm, limit)
    return now() - t0


async def await_for(warm: WarmUp | None, limit: float) -> float:
    """:func:`wait_for` on an event loop."""
    if warm is None or warm.future.done() or warm.status == "timeout":
        return 0.0
    t0 = now()
    try:
        await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(warm.future)), limit)
    except asyncio.TimeoutError:
        _timed_out(warm, limit)
    return now() - t0


def _timed_out(warm: WarmUp, limit: float) -> None:
    if warm.status == "running":
        warm.status = "timeout"
        logger.warning(
            "the warm-up of tool %r did not finish within %gs; the call runs cold",
            warm.tool,
            limit,
            extra={"tool_name": warm.tool},
        )
