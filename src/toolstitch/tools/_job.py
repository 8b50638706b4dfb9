"""One admitted call on its way through the executor's door: its record (:class:`Job`), its start
gate (:class:`Clock`), the keyword arguments its function receives, its timings and its log lines.

The door itself (claim, confirm, cache, launch, record) is ``_executor.py``'s; this is what it
carries from step to step, apart so that the door reads as the sequence it is.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Any, Final

from ..core import ToolCall, now
from ._cancel import CancelToken
from ._definition import Tool
from ._gate import Admission
from ._process import ProcessCall
from ._result import CallTimings
from ._warm import WarmUp

if TYPE_CHECKING:
    from ._executor import Started

__all__ = [
    "NEVER",
    "Clock",
    "GivenUp",
    "Job",
    "cancel_token",
    "run_timings",
    "stream_timings",
    "warn",
    "with_call",
]

logger = logging.getLogger("toolstitch")


class Clock:
    """Filled in by the worker: when the function really started and ended. ``context`` is the
    OpenTelemetry context the function runs in (its ``execute_tool`` span current), or None.
    ``warm``/``warm_limit``: the tool's warm-up, waited for (at most that long) before it starts;
    ``warm_wait`` the seconds that took.

    It is also the call's start gate: the worker calls :meth:`begin` right before the function and
    the batch calls :meth:`give_up` when it stops waiting; whichever comes first wins, under one
    lock. So a call reported ``not_started`` (or ``timeout`` before it began) never starts later,
    however long its warm-up or its place in the queue kept it."""

    __slots__ = ("_gate", "_state", "context", "finished_at", "started_at", "warm", "warm_limit", "warm_wait")

    def __init__(self) -> None:
        self.started_at: float | None = None
        self.finished_at: float | None = None
        self.context: Any = None
        self.warm: WarmUp | None = None
        self.warm_limit = 0.0
        self.warm_wait = 0.0
        self._gate = threading.Lock()
        self._state = "waiting"  # then "running" (the function began) or "given_up" (it never will)

    def begin(self) -> bool:
        """The worker is about to call the function: False when the call was given up (it must not)."""
        with self._gate:
            if self._state != "waiting":
                return False
            self._state = "running"
            self.started_at = now()
            return True

    def give_up(self) -> bool:
        """Nobody waits for the call any more; True when its function had not begun (it never will)."""
        with self._gate:
            if self._state == "waiting":
                self._state = "given_up"
            return self._state == "given_up"


class GivenUp(Enum):
    """What a worker returns, instead of the function's value, for a call given up before its
    function began: :data:`NEVER`."""

    NEVER = "never"


NEVER: Final = GivenUp.NEVER
"""What a worker returns for a call given up before its function began."""


def with_call(admission: Admission, call: ToolCall) -> dict[str, Any]:
    """The function's keyword arguments: the admitted ones, the call (when it asks for it), and a
    fresh :class:`CancelToken` (when it asks for one)."""
    t = admission.tool
    kwargs = admission.kwargs if t.call_param is None else {**admission.kwargs, t.call_param: call}
    if t.cancel_param is not None:
        kwargs = {**kwargs, t.cancel_param: CancelToken()}
    return kwargs


def cancel_token(t: Tool, kwargs: Mapping[str, Any], reason: str) -> None:
    """Cancel the token handed to the call of ``t`` with ``kwargs``, if it asked for one."""
    token = kwargs.get(t.cancel_param) if t.cancel_param is not None else None
    if isinstance(token, CancelToken):
        token.cancel(reason)


@dataclass(slots=True, eq=False)
class Job:
    """One admitted call on its way through the door."""

    index: int
    call: ToolCall
    tool: Tool
    kwargs: dict[str, Any]
    key: str
    fp: str
    timings: CallTimings
    clock: Clock = field(default_factory=Clock)
    started: Started | None = None
    """The eager start this job adopted (its claim, its cache answer, its running function)."""
    launched_at: float = 0.0
    owner: str | None = None
    """The ledger claim this job holds (None without a ledger, or once it is settled)."""
    future: Any = None
    """The tool's own future once launched (``concurrent.futures.Future`` or ``asyncio.Task``)."""
    never_started: bool = False
    """The function never began (given up while queued or warming, or never launched)."""
    closed: bool = False
    """Nobody waits for this job any more (out of time, interrupted, discarded): it must never
    launch its tool, even when a confirmation that swallowed its cancellation answers later."""
    span: Any = None
    """Its ``execute_tool`` span (OpenTelemetry) once the tool was launched, until its result."""
    cache_key: str | None = None
    """Where its ``ok`` result is stored in the run's result cache (``@tool(cache=...)``)."""
    parent: Any = None
    """The OpenTelemetry context its span is a child of."""
    pool: Any = None
    """The worker pool its sync function was handed to (``_workers.Workers``): told to stop
    counting a thread nobody waits for."""
    parsed: Any = None
    """The call's parsed arguments (an eager start's, before its call is sealed, as the seal will
    parse them): what its cache key is made of."""
    process: ProcessCall | None = None
    """A process tool's hold on its worker process (``_process.py``): :func:`_stop` ends it, which
    kills the process running the function."""


def warn(job: Job, message: str, *args: Any, exc: BaseException | None = None) -> None:
    """Log on the ``"toolstitch"`` logger with the call id and tool name as structured fields: one
    line at WARNING, and the exception's traceback (if any) at DEBUG."""
    extra = {"tool_call_id": job.call.id, "tool_name": job.tool.name}
    logger.warning(message, *args, extra=extra)
    if exc is not None:
        logger.debug("traceback of the failure above (call id %s)", job.call.id, exc_info=exc, extra=extra)


def stream_timings(call: ToolCall) -> CallTimings:
    m = call.metrics
    timings = CallTimings()
    if m.opened_at is not None:
        if m.sealed_at is not None:
            timings.streaming = m.sealed_at - m.opened_at
        if m.arguments_complete_at is not None:
            timings.arguments = m.arguments_complete_at - m.opened_at
    return timings


def run_timings(job: Job) -> CallTimings:
    timings = job.timings
    clock = job.clock
    timings.started_at = clock.started_at
    end = clock.finished_at if clock.finished_at is not None else now()
    timings.finished_at = end
    if clock.started_at is not None:
        timings.execution = end - clock.started_at
    timings.warm = clock.warm_wait
    return timings
