"""``run_events`` and ``arun_events``: the run loop as an iterator, for UIs that pull.

``ts.run(..., on_event=f)`` pushes every :data:`~toolstitch.loop.RunEvent` to ``f``; a web handler or
a chat UI often wants to pull them instead::

    for event in ts.run_events(client, model=m, messages=msgs, toolbox=box):
        match event:
            case StreamEvent(event=ContentDelta(text=text)): show(text)
            case RunFinished(result=result): save(result.messages)

The same loop runs, with the same keyword arguments (all but ``on_event``); the events are the same
objects in the same order, and the last one is :class:`RunFinished` with the
:class:`~toolstitch.loop.RunResult`. An error of the run (a request that failed after its retries, a
``RequestError``) is raised from the iteration after the events that preceded it.

**Sync.** The loop runs in one worker thread and hands each event over when the reader asks for
the next one, so it never runs ahead of the reader (a slow UI slows the run; nothing is buffered).
**Stopping early** (``break``, ``close()``, an exception in the reader's loop) stops the run at its
next event of a stream or step boundary: the stream being read is closed (its calls never run), the
calls of a response the reader did not take never start, no further request is sent; a tool that is
already running finishes first (it is never abandoned halfway), and ``close()`` returns once the
worker is gone.

**Async.** ``arun_events`` runs :func:`~toolstitch.arun` as a task on the running event loop; closing
the iterator (``aclose()``, leaving ``async for`` by ``break`` and letting it be collected, or the
task that iterates it being cancelled) cancels the run, which closes its stream and cancels running
async tools, as cancelling ``arun`` does.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
from collections.abc import AsyncGenerator, Generator
from dataclasses import dataclass
from typing import Any

from ._run import (
    RequestRetried,
    ResponseReceived,
    RunEvent,
    RunResult,
    StepFinished,
    StepStarted,
    arun,
    run,
)
from ._stream_event import StreamEvent

__all__ = ["RunFinished", "arun_events", "run_events"]

#: Events at which a run whose reader went away stops: between chunks and at step boundaries, never
#: while tools run (the executor reports their start and results from its own threads).
_STOP_POINTS = (StepStarted, RequestRetried, StreamEvent, ResponseReceived, StepFinished)


@dataclass(frozen=True, slots=True)
class RunFinished:
    """The last event of ``run_events``/``arun_events``: the run is over; ``result`` is what
    ``run``/``arun`` return."""

    result: RunResult


class _ReaderGone(BaseException):
    """Raised inside the worker's run when the reader stopped iterating (a ``BaseException``, like
    ``GeneratorExit``, so that no ``except Exception`` of the loop takes it for a failure to retry)."""


def _no_on_event(options: dict[str, Any]) -> None:
    if "on_event" in options:
        raise TypeError("run_events() hands out the events itself; do not pass on_event")


def _stops_here(event: object) -> bool:
    """A point where the loop may stop: a step boundary, a retried request, an event of a stream."""
    return isinstance(event, _STOP_POINTS)


def run_events(client: Any, **options: Any) -> Generator[RunEvent | RunFinished, None, None]:
    """Run the tool loop (``run``'s keyword arguments, but not ``on_event``) and yield its events
    as they happen, then :class:`RunFinished`. See the module documentation for stopping early."""
    _no_on_event(options)
    handoff: queue.SimpleQueue[tuple[str, Any]] = queue.SimpleQueue()
    asked = threading.Semaphore(0)  # one release per event the reader asks for
    gone = threading.Event()

    def on_event(event: RunEvent) -> None:
        # The worker waits until the reader asks for this event: it never runs ahead of the reader.
        while not gone.is_set():
            if asked.acquire(timeout=0.05):
                handoff.put(("event", event))
                return
        if _stops_here(event):
            raise _ReaderGone

    def work() -> None:
        try:
            result = run(client, on_event=on_event, **options)
        except _ReaderGone:
            return
        except BaseException as exc:  # handed to the reader, raised there
            handoff.put(("error", exc))
            return
        handoff.put(("result", result))

    worker = threading.Thread(target=work, name="toolstitch-run-events", daemon=True)
    worker.start()
    try:
        while True:
            asked.release()
            kind, value = handoff.get()
            if kind == "event":
                yield value
            elif kind == "result":
                yield RunFinished(value)
                return
            else:
                raise value
    finally:
        gone.set()
        worker.join()


async def arun_events(client: Any, **options: Any) -> AsyncGenerator[RunEvent | RunFinished, None]:
    """The async twin of :func:`run_events` (``arun``'s keyword arguments, but not ``on_event``):
    ``async for event in ts.arun_events(...)``. Closing it early cancels the run."""
    _no_on_event(options)
    loop = asyncio.get_running_loop()
    owner = threading.get_ident()
    handoff: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()

    def on_event(event: RunEvent) -> None:
        # Sync tools run in worker threads, and report from there: hand over on the loop's thread.
        if threading.get_ident() == owner:
            handoff.put_nowait(("event", event))
        else:
            loop.call_soon_threadsafe(handoff.put_nowait, ("event", event))

    async def work() -> None:
        try:
            result = await arun(client, on_event=on_event, **options)
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # handed to the reader, raised there
            handoff.put_nowait(("error", exc))
            return
        handoff.put_nowait(("result", result))

    task = asyncio.ensure_future(work())
    try:
        while True:
            kind, value = await handoff.get()
            if kind == "event":
                yield value
            elif kind == "result":
                yield RunFinished(value)
                return
            else:
                raise value
    finally:
        if not task.done():
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
