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

**Sync.** The loop runs in one worker thread, in step with the reader: it hands each event over when
the reader asks for one, and goes on only once the reader asks for the next. So the reader sees every
event as things stood when it happened (``event.call.preview``, a call's status: events carry live
objects), exactly as ``on_event`` would, and nothing happens that the reader has not asked for.
**Stopping early** (``break``, ``close()``, an exception in the reader's loop) stops the run before
it does anything more: the stream being read is closed at its next event (its calls never run), the
calls of a response the reader stopped at never start, no further request is sent; a tool that is
already running finishes first (it is never abandoned halfway), and ``close()`` returns once the
worker is gone.

**Async.** ``arun_events`` runs :func:`~toolstitch.arun` as a task on the running event loop, which
reads its stream in step with the reader (after each stream event it awaits the handoff's ``pace()``
until the reader asked for the next one, so previews are read as they stood). Closing the iterator
(``aclose()``, leaving ``async for`` by ``break`` and letting it be collected, or the task that
iterates it being cancelled) cancels the run, which closes its stream and cancels running async
tools, as cancelling ``arun`` does.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections import deque
from collections.abc import AsyncGenerator, Generator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, overload

from ..core import JSONForm
from ._results import RequestRetried, ResponseReceived, RunEvent, RunResult, StepFinished, StepStarted
from ._run import arun, run
from ._stream_event import StreamEvent

if TYPE_CHECKING:
    from openai import AsyncOpenAI, OpenAI
    from typing_extensions import Unpack

    from ._options import ChatEventsOptions, ResponsesEventsOptions

__all__ = ["RunFinished", "arun_events", "run_events"]

#: Events at which a run whose reader went away stops: step boundaries, retries, responses and each
#: event of a stream (never while tools run: the executor reports their start and results from its
#: own threads, and a running tool finishes).
_STOP_POINTS = (StepStarted, RequestRetried, StreamEvent, ResponseReceived, StepFinished)


@dataclass(frozen=True, slots=True)
class RunFinished(JSONForm):
    """The last event of ``run_events``/``arun_events``: the run is over; ``result`` is what
    ``run``/``arun`` return."""

    result: RunResult


class _ReaderGone(BaseException):
    """Raised inside the worker's run when the reader stopped iterating (a ``BaseException``, like
    ``GeneratorExit``, so that no ``except Exception`` of the loop takes it for a failure to retry)."""


def _no_on_event(options: dict[str, Any]) -> None:
    if "on_event" in options:
        raise TypeError("run_events() hands out the events itself; do not pass on_event")


def _handed(kind: str, value: Any) -> RunEvent | RunFinished:
    """What the reader gets for one item a run handed over (``"event"``, ``"result"`` or
    ``"error"``), the same for both twins: the event, the result as the last event, or the run's
    error raised."""
    if kind == "event":
        return value  # type: ignore[no-any-return]
    if kind == "result":
        return RunFinished(value)
    raise value


class _Handoff:
    """Events from the worker (and the executor's threads) to the reader, under one condition."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.items: deque[tuple[str, Any]] = deque()
        self.asking = False  # the reader took everything and waits for the next item
        self.gone = False  # the reader stopped iterating

    def caught_up(self) -> bool:
        return self.gone or (self.asking and not self.items)

    def event(self, event: RunEvent) -> None:
        """The worker's ``on_event`` (also called from the executor's threads): hand ``event`` over
        when the reader has taken everything and asks, then wait until it asks for the next one.
        Raises :class:`_ReaderGone` at a stop point once the reader left."""
        with self.cond:
            self.cond.wait_for(self.caught_up)
            if not self.gone:
                self.items.append(("event", event))
                self.cond.notify_all()
                self.cond.wait_for(self.caught_up)
            if self.gone and isinstance(event, _STOP_POINTS):
                raise _ReaderGone

    def end(self, kind: str, value: Any) -> None:
        """The run's result or error: handed over whatever the reader is doing."""
        with self.cond:
            self.items.append((kind, value))
            self.cond.notify_all()

    def take(self) -> tuple[str, Any]:
        with self.cond:
            self.asking = True
            self.cond.notify_all()
            self.cond.wait_for(lambda: bool(self.items))
            self.asking = False
            return self.items.popleft()

    def leave(self) -> None:
        with self.cond:
            self.gone = True
            self.cond.notify_all()


@overload
def run_events(
    client: OpenAI, **options: Unpack[ChatEventsOptions]
) -> Generator[RunEvent | RunFinished, None, None]: ...
@overload
def run_events(
    client: OpenAI, **options: Unpack[ResponsesEventsOptions]
) -> Generator[RunEvent | RunFinished, None, None]: ...


def run_events(client: Any, **options: Any) -> Generator[RunEvent | RunFinished, None, None]:
    """Run the tool loop (``run``'s keyword arguments, but not ``on_event``) and yield its events
    as they happen, then :class:`RunFinished`. See the module documentation for stopping early."""
    _no_on_event(options)
    handoff = _Handoff()

    def work() -> None:
        try:
            result = run(client, on_event=handoff.event, **options)
        except _ReaderGone:
            return
        except BaseException as exc:  # handed to the reader, raised there
            handoff.end("error", exc)
            return
        handoff.end("result", result)

    worker = threading.Thread(target=work, name="toolstitch-run-events", daemon=True)
    worker.start()
    try:
        while True:
            item = _handed(*handoff.take())
            yield item
            if type(item) is RunFinished:
                return
    finally:
        handoff.leave()
        worker.join()


class _AsyncHandoff:
    """The async twin's ``on_event``: events queued on the event loop, and :meth:`pace`, which the
    run awaits after each stream event until the reader has taken everything and asks for more."""

    def __init__(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.owner = threading.get_ident()
        self.items: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        self.asking = asyncio.Event()

    def __call__(self, event: RunEvent) -> None:
        # Sync tools run in worker threads, and report from there: hand over on the loop's thread.
        if threading.get_ident() == self.owner:
            self.items.put_nowait(("event", event))
        else:
            self.loop.call_soon_threadsafe(self.items.put_nowait, ("event", event))

    async def pace(self) -> None:
        """Return once the reader took every event so far and waits for the next one."""
        while not (self.asking.is_set() and self.items.empty()):
            if self.asking.is_set():
                await asyncio.sleep(0)  # the reader is about to take what is queued
            else:
                await self.asking.wait()

    async def take(self) -> tuple[str, Any]:
        self.asking.set()
        try:
            return await self.items.get()
        finally:
            self.asking.clear()


@overload
def arun_events(
    client: AsyncOpenAI, **options: Unpack[ChatEventsOptions]
) -> AsyncGenerator[RunEvent | RunFinished, None]: ...
@overload
def arun_events(
    client: AsyncOpenAI, **options: Unpack[ResponsesEventsOptions]
) -> AsyncGenerator[RunEvent | RunFinished, None]: ...


async def arun_events(client: Any, **options: Any) -> AsyncGenerator[RunEvent | RunFinished, None]:
    """The async twin of :func:`run_events` (``arun``'s keyword arguments, but not ``on_event``):
    ``async for event in ts.arun_events(...)``. The run reads its stream in step with the reader (a
    preview is read as it stood); closing the iterator early cancels the run."""
    _no_on_event(options)
    handoff = _AsyncHandoff()

    async def work() -> None:
        try:
            result = await arun(client, on_event=handoff, **options)
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # handed to the reader, raised there
            handoff.items.put_nowait(("error", exc))
            return
        handoff.items.put_nowait(("result", result))

    task = asyncio.ensure_future(work())
    try:
        while True:
            item = _handed(*await handoff.take())
            yield item
            if type(item) is RunFinished:
                return
    finally:
        if not task.done():
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
