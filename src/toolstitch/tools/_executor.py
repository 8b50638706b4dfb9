"""Running gated tool calls: concurrently, with timeouts, cancellation and a ledger.

**One door.** Every run of a tool function passes one sequence, written once here (rule 15 of
docs/design.md): admitted by the gate (``prepare``), claimed on the ledger (:func:`_claim`: one
claim per call id and fingerprint), confirmed (:func:`_confirm`), answered by the cache
(:func:`_from_cache`, after the confirmation, so a cached answer never skips the question),
launched within its bounds (:func:`_launch`, the one caller of :func:`_dispatch`, the one place a
function is handed to a worker, behind the start gate of ``_job.py``'s ``Clock``), and recorded
(``_Batch.finish``: the cache, the span, the claim, the hook). A sealed call takes it in
:func:`_run_job`; an eager start (:class:`EagerStarts`, a ``read_only`` tool that needs no
confirmation) takes the same steps up to the launch before its stream is sealed, and the sealed call
adopts it. ``tests/loop/test_door.py`` walks the code to show there is no other way in.

One asyncio core runs every batch (:func:`_drive`); the twins only decide where it runs:

* :func:`aexecute` (async) runs it on the caller's event loop.
* :func:`execute` (sync) runs it on the toolbox's event-loop thread and waits; the ``on_start`` and
  ``on_result`` hooks are still called from the calling thread.

So timeouts, confirmations, claims and cancellation behave the same from sync and async code. Sync
tools run in the toolbox's bounded thread pool, async tools as tasks of the core's loop, sync
confirmation callbacks in a worker thread (they may block: they may ask a person).

Both return one :class:`ToolResult` per call, in the order the calls were declared, whatever order
they finish in. What never happens:

* a tool's exception escaping (it becomes an ``"error"`` result, logged with the call id on the
  ``"toolstitch"`` logger) unless the caller asked for ``raise_tool_errors``;
* an exception's text reaching the model, unless the tool raised :class:`~toolstitch.ToolError`
  (its text is the message, verbatim) or an ``error_message`` hook decides otherwise: by default the
  model reads that the tool failed and the exception's type (texts carry hostnames, connection
  strings, tokens). The failure is logged in one line at WARNING, its traceback at DEBUG;
* waiting past a timeout: a call over its own timeout, or a batch over the total timeout, gets a
  ``"timeout"`` result (a confirmation still pending counts too: the tool never runs after the
  deadline; a function still waiting for its warm-up or a worker is ``"not_started"`` and never
  starts later: the start gate). Async tools are cancelled and given at most ``_CANCEL_GRACE``
  seconds to unwind, once per batch, so a tool that swallows its cancellation cannot hold the batch;
  a sync tool's thread cannot be killed: its result is discarded, its :class:`CancelToken` says
  ``"timeout"``, and its thread is abandoned, no longer counting against ``max_workers``
  (``_workers.py``); a sync tool that runs in a worker process (``isolation="process"``) is killed
  with its process (``_process.py``), so the run ends with the wait;
* a call that never began (still queued for a worker at its deadline) reported as run: it is
  ``"not_started"`` and its claim is released, so a retry runs it;
* running a call twice: with a ledger, every call is claimed first (see :mod:`._claim`); a duplicate
  waits for the winner and reuses its result.

Cancelling :func:`aexecute` (or interrupting :func:`execute`) cancels the running async tools, stops
waiting on the sync ones, and abandons their claims (outcome unknown).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import inspect
import logging
import queue
import threading
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any, Final

from ..core import ToolCall, now
from ..errors import OutcomeUnknown, ToolError
from ._approval import Approval, Deny, check_record
from ._cache import ResultCache, cached
from ._claim import ClaimLedger, LedgerEntry, Verdict, fingerprint, fingerprint_of, stored_result
from ._definition import Tool
from ._futures import cancel_anywhere, here, in_thread, running_loop, submit
from ._gate import (
    Admission,
    Refusal,
    admit,
    denied,
    in_progress,
    ledger_unavailable,
    not_approved,
    outcome_unknown,
)
from ._job import NEVER, Clock, Job, cancel_token, run_timings, stream_timings, warn, with_call
from ._process import ENDED, NOT_BEGUN, ProcessCall, ProcessWorkers
from ._result import CallTimings, ResultStatus, ToolResult
from ._runtime import is_async_callable
from ._telemetry import activated, current_context, end_tool, span_context, start_tool
from ._twins import async_twin_of, bound
from ._warm import await_for, wait_for

if TYPE_CHECKING:
    from ._toolbox import Toolbox

__all__ = [
    "CallTimings",
    "EagerStarts",
    "ErrorMessage",
    "ResultStatus",
    "Started",
    "ToolResult",
    "aexecute",
    "default_error_message",
    "execute",
]

logger = logging.getLogger("toolstitch")

_CANCEL_GRACE = 0.1  # seconds, once per batch, that cancelled async tools get to unwind

ErrorMessage = Callable[[ToolCall, BaseException], str]
"""``error_message(call, exc) -> str``: what the model reads when a tool raised ``exc`` (any exception
but :class:`~toolstitch.ToolError`, whose text is always used as is). A hook that raises or returns
no ``str`` gives the default text (:func:`default_error_message`)."""


def default_error_message(call: ToolCall, exc: BaseException) -> str:
    """The model's text for a tool that raised: the tool failed, and the exception's type. Never the
    exception's own text, which may carry hostnames, connection strings or tokens."""
    name = call.name if isinstance(call.name, str) and call.name else "the tool"
    return (
        f"Error: {name} failed ({type(exc).__name__}); the details were logged, not shown. "
        "It did not return a result."
    )


def _one_line(text: str, limit: int = 500) -> str:
    text = text.replace("\r", "\\r").replace("\n", "\\n")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _text_of(exc: BaseException) -> str:
    try:
        return str(exc)
    except Exception:  # a hostile __str__
        return f"<a {type(exc).__name__} whose text cannot be shown>"


# ----------------------------------------------------------------------------- invoking


async def _await(value: Awaitable[Any]) -> Any:
    return await value


def _invoke_sync(fn: Callable[..., Any], kwargs: Mapping[str, Any], clock: Clock) -> Any:
    clock.warm_wait = wait_for(clock.warm, clock.warm_limit)
    if not clock.begin():
        return NEVER
    try:
        with activated(clock.context):
            value = fn(**kwargs)
        if inspect.isawaitable(value):  # a sync def that returned a coroutine: run it here
            value = asyncio.run(_await(value))
        return value
    finally:
        clock.finished_at = now()


def _invoke_process(
    workers: ProcessWorkers,
    handle: ProcessCall,
    fn: Callable[..., Any],
    kwargs: Mapping[str, Any],
    clock: Clock,
) -> Any:
    """A sync tool with ``isolation="process"``, from a thread of the pool: it waits for a worker
    process, passes the start gate, and waits for the function's reply (``_process.py``). No
    warm-up to wait for (refused for process tools) and no span context in the worker."""
    try:
        value = workers.run(handle, fn, kwargs, clock.begin)  # ENDED: killed, nobody waits for it
    finally:
        if clock.started_at is not None:
            clock.finished_at = now()
    return NEVER if value is NOT_BEGUN else value


async def _invoke_async(fn: Callable[..., Any], kwargs: Mapping[str, Any], clock: Clock) -> Any:
    clock.warm_wait = await await_for(clock.warm, clock.warm_limit)
    if not clock.begin():
        return NEVER
    try:
        with activated(clock.context):
            return await fn(**kwargs)
    finally:
        clock.finished_at = now()


def _dispatch(box: Toolbox, job: Job, loop: asyncio.AbstractEventLoop) -> Any:
    """Start the job's tool: a sync tool in the pool (a ``concurrent.futures.Future``), an async one
    as a task of ``loop``; a sync tool with ``isolation="process"`` from the pool in a worker process,
    whose handle the job keeps (``job.process``: :func:`_stop` kills it). The tool's warm-up is
    started now if nothing started it before; the function waits for it first (at most
    ``warm_timeout``), then passes the start gate (:class:`Clock`). This is the one place a tool's
    function is handed to a thread, a process or a loop."""
    t, kwargs, clock = job.tool, job.kwargs, job.clock
    if t.warm is not None:
        box.warm_up_on([t.name], loop)
        clock.warm, clock.warm_limit = box.warm_state(t.name), box.warm_timeout
    if not t.is_async:
        ctx = contextvars.copy_context()
        runtime = box.runtime()
        if box.isolation_of(t) == "process":
            workers = runtime.processes()
            job.process = workers.call()
            return runtime.pool.submit(ctx.run, _invoke_process, workers, job.process, t.fn, kwargs, clock)
        return runtime.pool.submit(ctx.run, _invoke_sync, t.fn, kwargs, clock)
    return submit(loop, _invoke_async(t.fn, kwargs, clock))  # thread-safely from a sync run's reader


# ----------------------------------------------------------------------------- the door

_Final = Callable[[ToolCall, CallTimings], ToolResult]
"""A call's final result before its tool ran (reused, refused, cached), made for the call that
receives it: an eager start's call, or the sealed call that adopts it."""


@dataclass(slots=True, eq=False)
class _Door:
    """What every run of a tool passes through, for one batch or one step's eager starts: the
    toolbox, the ledger that claims each call, the run's result cache. The sequence is
    :func:`_enter` (claim, then the cache) and :func:`_launch`; confirmation sits between them in
    :func:`_run_job` (an eager start never needs one: only tools without ``confirm`` start early)."""

    box: Toolbox
    ledger: ClaimLedger | None
    cache: ResultCache | None

    async def settle_claim(self, job: Job, result: ToolResult | None) -> None:
        """End the job's claim: finished with an outcome, released when the tool never began,
        abandoned (outcome unknown) when it began and its outcome is lost. ``None``: interrupted."""
        ledger, owner = self.ledger, job.owner
        if ledger is None or owner is None:
            return
        job.owner = None
        status = result.status if result is not None else None
        try:
            if status in ("ok", "error", "timeout"):
                # An error or a timeout is an outcome too: the side effect may have happened, so the
                # call must not run again on a retry.
                await ledger.afinish(job.key, job.fp, owner, stored_result(result))
            elif job.never_started or (job.future is None and job.clock.started_at is None):
                await ledger.arelease(job.key, job.fp, owner)
            else:
                await ledger.aabandon(job.key, job.fp, owner)
        except Exception as exc:  # the result stands; the claim goes stale with its lease
            logger.warning(
                "the ledger could not settle call %s: %s: %s", job.call.id, type(exc).__name__, exc
            )


async def _claim(door: _Door, job: Job) -> _Final | None:
    """Claim the job's call (see :mod:`._claim`). None: this job owns the claim and runs the tool;
    else its final result (reused, outcome unknown, still in progress elsewhere, ledger down). A
    duplicate waits for the winner at most the tool's timeout."""
    ledger = door.ledger
    if ledger is None:
        return None
    limit = door.box.timeout_for(job.tool)
    deadline = None if limit is None else now() + limit
    verdict: Verdict
    try:
        while True:
            verdict = await ledger.aacquire(job.key, job.fp, job.tool.name, read_only=job.tool.read_only)
            left = None if deadline is None else deadline - now()
            if verdict.action != "wait" or (left is not None and left <= 0):
                break
            await ledger.await_change(job.key, job.fp, left)
    except Exception as exc:  # fail closed: nothing runs that the ledger could not claim
        return _unclaimed(job, exc)
    return _decided(job, verdict)


def _unclaimed(job: Job, exc: Exception) -> _Final:
    """The ledger failed to claim the call: it is refused (nothing runs that was not claimed)."""
    logger.warning("the ledger could not claim call %s: %s: %s", job.call.id, type(exc).__name__, exc)
    return _refusing(ledger_unavailable(job.call, exc))


def _decided(job: Job, verdict: Verdict) -> _Final | None:
    """What the ledger's verdict means for the job: None when it owns the claim (it runs)."""
    if verdict.action == "run":
        job.owner = verdict.owner
        return None
    entry = verdict.entry
    if verdict.action == "reuse" and entry is not None:
        return lambda call, timings: _reused(call, entry, timings)
    if verdict.action == "unknown":
        return lambda call, timings: _refused(call, outcome_unknown(call), timings)
    return lambda call, timings: _refused(call, in_progress(call), timings)


def _from_cache(door: _Door, job: Job) -> _Final | None:
    """The cache's answer to the job's call (None: the tool runs). Keyed by the tool's identity
    and the canonical arguments (``_cache.py``); the job keeps the key to store its ``ok`` result."""
    key, hit = cached(door.cache, job.tool, job)
    job.cache_key = key
    if hit is None:
        return None
    value, content = hit

    def answer(call: ToolCall, timings: CallTimings) -> ToolResult:
        timings.cached = True
        return ToolResult(call, "ok", value=value, timings=timings, content=content, cached=True)

    return answer


async def _enter(door: _Door, job: Job) -> _Final | None:
    """The door's first steps for a call that needs no confirmation: claim, then the cache.
    None: the job owns its claim (if any) and its tool must run."""
    final = await _claim(door, job)
    if final is None:
        final = _from_cache(door, job)
    return final


def _launch(door: _Door, job: Job, loop: asyncio.AbstractEventLoop) -> None:
    """The door's last step: hand the function to a worker (``_dispatch``), with its span. The
    per-call timeout counts from here, the warm-up's wait included."""
    job.launched_at = now()
    job.span = start_tool(job.call, job.tool, job.parent)
    job.clock.context = span_context(job.span)
    job.future = _dispatch(door.box, job, loop)
    if not job.tool.is_async:
        job.pool = door.box.runtime().pool


class Started:
    """A call that went through the door before its stream was sealed (an eager start; ``read_only``
    tools that need no confirmation only): claimed on the run's ledger, looked up in its cache, and
    launched, exactly as a sealed call is. ``EagerStarts`` makes them.

    The executor adopts it when the sealed call is admitted with the same tool, ledger key and
    arguments (and then reuses its claim, its cache answer or its running function). Otherwise it is
    discarded (:meth:`cancel`): a function that never began never will, and its claim is released;
    an async tool is cancelled; a sync tool that is running is told through its
    :class:`CancelToken` (``"discarded"``), keeps its claim until it returns within its timeout, and
    its ``ok`` result is recorded in the ledger, so that a retry of the call reuses it; a process
    tool's process is killed (``_process.py``), and its claim is abandoned (outcome unknown).
    """

    __slots__ = ("arguments", "door", "flow", "job", "loop")

    def __init__(self, door: _Door, job: Job, loop: asyncio.AbstractEventLoop) -> None:
        self.door = door
        self.job = job
        self.loop = loop
        self.arguments = job.call.arguments
        self.flow: Any = self._now() if running_loop() is not loop else submit(loop, self._flow())
        """The door's steps for it (claim, cache, launch): the ``_Final`` answer, or None once its
        function was launched (an ``asyncio.Task`` of ``loop``, or a ``concurrent.futures.Future``)."""

    def _now(self) -> Any:
        """The sync run's way in, in its reading thread, with no hop to another thread before the
        function is handed to a worker: the claim by the ledger's sync decision (it never blocks),
        then the cache and the launch. A claim another owner holds is waited for on ``loop``."""
        job, ledger = self.job, self.door.ledger
        final: _Final | None = None
        if ledger is not None:
            try:
                verdict = ledger.acquire(job.key, job.fp, job.tool.name, read_only=job.tool.read_only)
            except Exception as exc:  # fail closed, as _claim
                verdict, final = None, _unclaimed(job, exc)
            if verdict is not None and verdict.action == "wait":
                return submit(self.loop, self._flow())
            if verdict is not None:
                final = _decided(job, verdict)
        if final is None:
            final = _from_cache(self.door, job)
        if final is None:
            _launch(self.door, job, self.loop)
        done: concurrent.futures.Future[_Final | None] = concurrent.futures.Future()
        done.set_result(final)
        return done

    async def _flow(self) -> _Final | None:
        job = self.job
        final = await _enter(self.door, job)
        if final is None and not job.closed:
            _launch(self.door, job, asyncio.get_running_loop())
        elif final is None:  # discarded while it claimed: never launched
            job.never_started = True
            await self.door.settle_claim(job, None)
        return final

    @property
    def call(self) -> ToolCall:
        return self.job.call

    @property
    def tool(self) -> Tool:
        return self.job.tool

    def cancel(self) -> None:
        """Discard it (see the class): from any thread, once."""
        if self.job.closed:
            return
        self.job.closed = True
        cancel_token(self.job.tool, self.job.kwargs, "discarded")
        submit(self.loop, _discard(self))


async def _discard(handle: Started) -> None:
    """Settle an eager start nobody adopted (see :class:`Started`)."""
    job, door = handle.job, handle.door
    flow = here(handle.flow)
    if not flow.done():
        await asyncio.wait({flow})
    span, job.span = job.span, None
    if job.future is None:  # answered (reused, cached, refused) or never launched
        await door.settle_claim(job, None)
        return
    _stop(job, "discarded")
    result: ToolResult | None = None
    if not job.never_started and not job.tool.is_async:
        inner = here(job.future)
        done, _ = await asyncio.wait({inner}, timeout=_remaining(door.box, job))
        if (
            done
            and not inner.cancelled()
            and inner.exception() is None
            and inner.result() is not NEVER
            and inner.result() is not ENDED  # a process tool killed before it returned
        ):
            result = ToolResult(job.call, "ok", value=inner.result(), timings=run_timings(job))
    await door.settle_claim(job, result)
    if span is not None:
        end_tool(span, ToolResult(job.call, "cancelled", error="discarded", reason="discarded"))


class EagerStarts:
    """One step's eager starts, across the attempts of its request (the run loop owns one).

    A request that fails after some calls started is retried, and the retry brings the same calls
    (same id, same text): :meth:`start` adopts the call started by the failed attempt instead of
    running it again, with or without a ledger. :meth:`discard` ends those no sealed call adopted.
    ``loop`` is where their flows run: the async run's loop, or the toolbox's loop thread.
    """

    def __init__(
        self,
        box: Toolbox,
        ledger: ClaimLedger | None,
        cache: ResultCache | None,
        loop: asyncio.AbstractEventLoop,
    ) -> None:
        self.door = _Door(box, ledger, cache)
        self.loop = loop
        self.by_call: dict[int, Started] = {}
        """This attempt's starts by ``id(call)`` (what ``execute(started=...)`` takes)."""
        self.earlier: dict[tuple[str, str | None, int], Started] = {}
        """Starts of failed attempts, by (ledger key, arguments, tool), until a call adopts them."""

    def start(self, call: ToolCall, admission: Admission, key: str, parsed: Any) -> bool:
        """Start ``call`` (ledger key ``key``; its arguments parsed to ``parsed``) through the door,
        or adopt the identical start of an earlier attempt; True when it started now (to be
        announced)."""
        found = self.earlier.pop((key, call.arguments, id(admission.tool)), None)
        if found is not None:
            self.by_call[id(call)] = found
            return False
        fp = fingerprint_of(call.name, parsed, call.arguments)  # what the sealed call's will be
        job = Job(-1, call, admission.tool, with_call(admission, call), key, fp, CallTimings())
        job.parsed = parsed
        job.parent = current_context()
        self.by_call[id(call)] = Started(self.door, job, self.loop)
        return True

    def attempt_failed(self) -> None:
        """The attempt's stream failed: its starts wait for the retry's identical calls."""
        for handle in self.by_call.values():
            self.earlier.setdefault((handle.job.key, handle.arguments, id(handle.job.tool)), handle)
        self.by_call = {}

    def discard(self, *, earlier_only: bool = False) -> None:
        """Discard every start no sealed call adopted; ``earlier_only``: those of failed attempts
        (the last attempt's go to ``execute``, which adopts them or discards them)."""
        handles = (
            [*self.earlier.values()] if earlier_only else [*self.by_call.values(), *self.earlier.values()]
        )
        for handle in handles:
            if handle.job.index < 0:
                handle.cancel()
        self.earlier = {}
        if not earlier_only:
            self.by_call = {}


# ----------------------------------------------------------------------------- the batch

Hook = Callable[..., None]


class _Batch:
    """What both twins share: gating, result making, logging, hooks; the door (``self.door``) holds
    the claims and the cache."""

    def __init__(
        self,
        box: Toolbox,
        calls: Sequence[ToolCall],
        ledger: ClaimLedger | None,
        keys: Sequence[str] | None,
        on_start: Callable[[ToolCall, bool], None] | None,
        on_result: Callable[[ToolResult], None] | None,
        error_message: ErrorMessage | None = None,
        approvals: Mapping[str, Approval] | None = None,
        cache: ResultCache | None = None,
    ) -> None:
        if keys is not None and len(keys) != len(calls):
            raise ValueError("keys must give one ledger key per call")
        self.box = box
        self.door = _Door(box, ledger, cache)
        self.error_message = error_message if error_message is not None else box.error_message
        self.approvals = dict(approvals or {})
        self.otel_parent = current_context()
        """The caller's OpenTelemetry context: the parent of the ``execute_tool`` spans."""
        self.calls = list(calls)
        self.keys = keys
        self.on_start = on_start
        self.on_result = on_result
        self.results: list[ToolResult | None] = [None] * len(self.calls)
        self.call_hook: Callable[[Hook, Any], None] = lambda hook, arg: hook(arg)
        self.grace_until: float | None = None

    def prepare(self, started: Mapping[int, Started] | None) -> list[Job]:
        """The door's first step, for every call (pure): admitted, or refused at once. An eager
        start of the same call (same tool, ledger key, fingerprint and text) is adopted: its job
        goes on from where it is. Claims, confirmations and the cache are the core's business."""
        jobs: list[Job] = []
        early = dict(started or {})
        for i, call in enumerate(self.calls):
            handle = early.pop(id(call), None)
            timings = stream_timings(call)
            t0 = now()
            verdict = admit(call, self.box)
            timings.validation = now() - t0
            if isinstance(verdict, Refusal):
                self.finish_now(i, _refused(call, verdict, timings))
                if handle is not None:
                    handle.cancel()
                continue
            key = self.keys[i] if self.keys is not None else (call.id or "")
            fp = fingerprint(call)
            if handle is not None and _same(handle, verdict.tool, key, fp, call):
                job = handle.job
                job.index, job.call, job.timings, job.started = i, call, timings, handle
                timings.eager = True
            else:
                if handle is not None:
                    handle.cancel()
                job = Job(i, call, verdict.tool, with_call(verdict, call), key, fp, timings)
                job.parent, job.parsed = self.otel_parent, call.parsed
            jobs.append(job)
        for handle in early.values():  # dispatched early for a call that is not in this batch
            handle.cancel()
        return jobs

    # -- results ---------------------------------------------------------------------------------

    def announce(self, job: Job) -> None:
        """The ``on_start(call, eager)`` hook: the job's tool was launched (or adopted)."""
        on_start = self.on_start
        if on_start is not None:
            eager = job.started is not None
            self.call_hook(lambda call: on_start(call, eager), job.call)

    def finish_now(self, index: int, result: ToolResult) -> None:
        """A final result that holds no claim (refused by the gate, reused, outcome unknown)."""
        if self.results[index] is None:
            self.results[index] = result
            if self.on_result is not None:
                self.call_hook(self.on_result, result)

    async def finish(self, job: Job, result: ToolResult) -> None:
        """Store a job's final result: its claim first (finished, released or abandoned), then the
        hook. The first result of a call wins."""
        if self.results[job.index] is not None:
            return
        self.results[job.index] = result
        cache = self.door.cache
        if result.status == "ok" and not result.cached and job.cache_key is not None and cache is not None:
            cache.put(job.cache_key, result.value, result.content, job.tool.cache or 0.0)
        span, job.span = job.span, None
        if span is not None:
            end_tool(span, result)
        await self.door.settle_claim(job, result)
        if self.on_result is not None:
            self.call_hook(self.on_result, result)

    def outcome(self, job: Job, future: Any) -> ToolResult:
        """The result of a finished future (sync or asyncio)."""
        timings = run_timings(job)
        name = job.tool.name
        if future.cancelled() or (future.exception() is None and future.result() is ENDED):
            return _cancelled(job, timings)
        exc = future.exception()
        if exc is None and future.result() is NEVER:  # given up before it began (see Clock)
            job.never_started = True
            return self.timed_out(job, self.box.timeout_for(job.tool), False)
        if exc is None:
            return ToolResult(job.call, "ok", value=future.result(), timings=timings)
        what = "tool %r raised %s: %s (call id %s)"
        warn(job, what, name, type(exc).__name__, _one_line(_text_of(exc)), job.call.id, exc=exc)
        return ToolResult(
            job.call,
            "error",
            error=self.model_text(job.call, exc),
            reason="outcome_unknown" if isinstance(exc, OutcomeUnknown) else "raised",
            exception=exc,
            timings=timings,
        )

    def model_text(self, call: ToolCall, exc: BaseException) -> str:
        """What the model reads about a tool that raised (see :data:`ErrorMessage`)."""
        if isinstance(exc, ToolError):  # said on purpose, for the model: verbatim
            return _text_of(exc) or default_error_message(call, exc)
        hook = self.error_message
        if hook is not None:
            try:
                text = hook(call, exc)
            except Exception as hook_exc:
                logger.warning(
                    "the error_message hook raised %s for call %s; the default text was used",
                    type(hook_exc).__name__,
                    call.id,
                )
                logger.debug("traceback of the error_message hook", exc_info=hook_exc)
                text = None
            if isinstance(text, str):
                return text
            if text is not None:
                logger.warning("the error_message hook returned no str for call %s", call.id)
        return default_error_message(call, exc)

    def timed_out(self, job: Job, limit: float | None, total: bool) -> ToolResult:
        """Out of time: ``timeout`` when the tool began, ``not_started`` when it never did."""
        name = job.tool.name
        scope = "the time allowed for this batch of calls" if total else "its timeout"
        shown = f" ({limit:g}s)" if limit is not None else ""
        if job.never_started or (job.future is None and job.clock.started_at is None):
            job.never_started = True
            return ToolResult(
                job.call,
                "not_started",
                error=f"Error: the call to {name} was not started: {scope}{shown} ran out before it "
                "could begin. It did not run; it can be called again.",
                reason="not_started",
                timings=run_timings(job),
            )
        after = f"{limit:g}s" if limit is not None else "the batch limit"
        warn(job, "tool %r timed out after %s (call id %s)", name, after, job.call.id)
        return ToolResult(
            job.call,
            "timeout",
            error=f"Error: {name} did not finish within {scope}{shown}; it was "
            f"{'stopped' if job.process is not None else 'abandoned'} and has no result.",
            reason="timeout",
            timings=run_timings(job),
        )

    def done(self, raise_tool_errors: bool) -> list[ToolResult]:
        results = [r for r in self.results if r is not None]
        assert len(results) == len(self.calls), "every call gets exactly one result"
        if raise_tool_errors:
            for r in results:
                if r.exception is not None and not r.reused:
                    raise r.exception
        return results

    # -- timing ----------------------------------------------------------------------------------

    def grace_left(self) -> float:
        """What is left of the one cancellation grace of this batch (it starts at the first use)."""
        if self.grace_until is None:
            self.grace_until = now() + _CANCEL_GRACE
        return max(0.0, self.grace_until - now())


def _refused(call: ToolCall, refusal: Refusal, timings: CallTimings) -> ToolResult:
    return ToolResult(
        call,
        "refused",
        error=refusal.message,
        reason=refusal.reason,
        timings=timings,
        problems=refusal.problems,
    )


def _cancelled(job: Job, timings: CallTimings) -> ToolResult:
    return ToolResult(
        job.call,
        "cancelled",
        error=f"Error: the call to {job.tool.name} was cancelled before it finished.",
        reason="cancelled",
        timings=timings,
    )


def _reused(call: ToolCall, entry: LedgerEntry, timings: CallTimings) -> ToolResult:
    status: ResultStatus = entry.status if entry.status in ("ok", "error", "timeout") else "error"  # type: ignore[assignment]
    return ToolResult(
        call,
        status,
        value=entry.value if status == "ok" else None,
        error=entry.error,
        reason="reused",
        reused=True,
        timings=timings,
        content=entry.content or "",
    )


def _refusing(refusal: Refusal) -> _Final:
    """The final result of a call the door refused (before its tool ran)."""
    return lambda call, timings: _refused(call, refusal, timings)


def _callback_failed(job: Job, exc: BaseException) -> Refusal:
    what = "confirmation callback raised %s for %r (call id %s)"
    warn(job, what, type(exc).__name__, job.tool.name, job.call.id, exc=exc)
    return not_approved(job.call, "the approval step failed")


# ----------------------------------------------------------------------------- the core


def _answered(call: ToolCall, answer: Any) -> Refusal | None:
    """A confirmation's answer: only ``True`` itself approves (fail closed); ``Deny`` carries a reason."""
    if answer is True:
        return None
    if isinstance(answer, Deny):
        return denied(call, answer.reason)
    return not_approved(call)


async def _confirm(batch: _Batch, job: Job) -> Refusal | None:
    """Step 4 of the gate: an approval given to the run for this call's key, else the toolbox's
    callback. A sync callback runs in a worker thread, so the deadline still holds while it blocks
    (and the tool never runs after it)."""
    box = batch.box
    if job.key in batch.approvals:
        given = batch.approvals[job.key]
        if given is True:  # a yes holds only for the very call that was deferred (a no needs no check)
            problem = await _deferral_problem(batch.door.ledger, job)
            if problem is not None:
                return not_approved(job.call, problem)
        return _answered(job.call, given)
    callback = box.confirm
    if callback is None:
        return not_approved(job.call, "this tool needs approval and no confirmation callback is configured")
    t0 = now()
    try:
        if is_async_callable(callback):
            answer: Any = callback(job.call, job.tool)
        else:
            answer = await in_thread(callback, job.call, job.tool)
        if inspect.isawaitable(answer):
            answer = await answer
    except (asyncio.CancelledError, GeneratorExit):
        raise
    except BaseException as exc:  # a SystemExit or KeyboardInterrupt raised by the callback refuses too
        return _callback_failed(job, exc)
    finally:
        job.timings.confirmation = now() - t0
    return _answered(job.call, answer)


async def _deferral_problem(ledger: ClaimLedger | None, job: Job) -> str | None:
    """What is wrong with approving this call by its key: the ledger must hold the record that
    exactly this call (its fingerprint) awaits approval, as ``ts.run`` checks on resume
    (``check_record``, one check for both). Without a ledger there is no record, so no approval."""
    if ledger is None:
        return f"{job.key!r}: no ledger holds a record that this call awaits approval"
    try:
        problem: str | None = await ledger._io(check_record, ledger, job.key, job.call)
    except Exception as exc:  # a ledger that cannot be read approves nothing
        return f"{job.key!r}: the ledger could not be read ({type(exc).__name__})"
    return problem


def _same(handle: Started, t: Tool, key: str, fp: str, call: ToolCall) -> bool:
    """The eager start is this very call: the same tool object, ledger key, fingerprint and text,
    and nothing discarded it."""
    job = handle.job
    return (
        not job.closed
        and job.index < 0
        and job.tool is t
        and job.key == key
        and job.fp == fp
        and handle.arguments == call.arguments
    )


def _stop(job: Job, reason: str = "cancelled") -> None:
    """Nobody waits for the job's tool any more: cancel it (and its :class:`CancelToken`). Its start
    gate says whether the function had begun; if not, it never will (``never_started``)."""
    cancel_token(job.tool, job.kwargs, reason)
    job.never_started = job.clock.give_up()
    if job.future is not None:
        cancel_anywhere(job.future)
    if job.process is not None:  # a process tool: its process is killed, so its run is over
        job.process.end()
    if job.pool is not None:  # a sync function nobody waits for: its thread no longer counts
        job.pool.abandon(job.future)


def _remaining(box: Toolbox, job: Job) -> float | None:
    """What is left of the job's own timeout, counted from its launch."""
    limit = box.timeout_for(job.tool)
    return None if limit is None else max(0.0, limit - (now() - job.launched_at))


async def _run_job(
    batch: _Batch, job: Job, turn: asyncio.Event | None, next_turn: asyncio.Event | None
) -> None:
    """One call through the door: claim, confirm, cache, launch within its bounds, record. An
    adopted eager start has done the steps before the launch (it never needs a confirmation).

    Approvals are asked one at a time, in declared order: ``turn`` is set when this job may ask,
    ``next_turn`` is set when the next confirm job may (whatever happens to this one).
    """
    box, door = batch.box, batch.door
    final: _Final | None = None
    try:
        if job.started is not None:
            final = await asyncio.shield(here(job.started.flow))
        else:
            final = await _claim(door, job)
            if final is None and job.tool.confirm:
                if turn is not None:
                    await turn.wait()
                refusal = await _confirm(batch, job)
                if refusal is not None:
                    final = _refusing(refusal)
            if final is None:  # after confirmation: a cache answer never skips the question
                final = _from_cache(door, job)
    finally:
        if next_turn is not None:
            next_turn.set()
    if final is not None:
        await batch.finish(job, final(job.call, job.timings))
        return
    if job.closed:  # given up while it waited (a callback that swallowed its cancellation)
        job.never_started = True
        return
    loop = asyncio.get_running_loop()
    if job.future is None:
        _launch(door, job, loop)
    inner = here(job.future)
    batch.announce(job)
    try:
        done, _ = await asyncio.wait({inner}, timeout=_remaining(box, job))
    except BaseException:
        _stop(job)
        if job.tool.is_async and not job.never_started:
            await asyncio.wait({inner}, timeout=batch.grace_left())
        raise
    if not done:
        _stop(job, "timeout")
        if job.tool.is_async and not job.never_started:  # a sync tool's thread cannot be stopped
            await asyncio.wait({inner}, timeout=batch.grace_left())
        await batch.finish(job, batch.timed_out(job, box.timeout_for(job.tool), False))
        return
    await batch.finish(job, batch.outcome(job, inner))


async def _drive(batch: _Batch, jobs: list[Job], total: float | None) -> None:
    """Run every job of the batch within ``total`` seconds; every job gets a result (or, when this
    coroutine is cancelled, its claim is abandoned or released)."""
    previous: asyncio.Event | None = None
    pairs: list[tuple[asyncio.Event | None, asyncio.Event | None]] = []
    for job in jobs:
        if job.tool.confirm:
            mine = asyncio.Event()
            pairs.append((previous, mine))
            previous = mine
        else:
            pairs.append((None, None))
    tasks = {
        asyncio.ensure_future(_run_job(batch, job, *pair)): job for job, pair in zip(jobs, pairs, strict=True)
    }
    try:
        _, pending = await asyncio.wait(tasks, timeout=total)
    except BaseException:
        for job in jobs:
            job.closed = True
        await _cancel_all(batch, tasks)
        for job in jobs:
            await batch.door.settle_claim(job, None)
            span, job.span = job.span, None
            if span is not None:
                end_tool(span, _cancelled(job, run_timings(job)))
        raise
    if pending:
        for task in pending:
            tasks[task].closed = True  # before cancelling: no tool launches after the deadline
        await _cancel_all(batch, pending)
    for task, job in tasks.items():
        if task in pending or task.cancelled():
            _stop(job, "timeout")
            await batch.finish(job, batch.timed_out(job, total, True))
            continue
        error = task.exception()
        if error is not None:
            await batch.door.settle_claim(job, None)
            raise error  # a bug in a hook: do not hide it


async def _cancel_all(batch: _Batch, tasks: Any) -> None:
    for task in tasks:
        task.cancel()
    if tasks:
        await asyncio.wait(tasks, timeout=batch.grace_left())


# ----------------------------------------------------------------------------- sync twin


class _Done(Enum):
    """What the core puts on the hooks' queue when it is done: no hook follows."""

    DONE = "done"


_DONE: Final = _Done.DONE


def execute(
    box: Toolbox,
    calls: Sequence[ToolCall],
    *,
    ledger: ClaimLedger | None = None,
    timeout: float | None = None,
    raise_tool_errors: bool = False,
    keys: Sequence[str] | None = None,
    started: Mapping[int, Started] | None = None,
    on_start: Callable[[ToolCall, bool], None] | None = None,
    on_result: Callable[[ToolResult], None] | None = None,
    error_message: ErrorMessage | None = None,
    approvals: Mapping[str, Approval] | None = None,
    cache: ResultCache | None = None,
) -> list[ToolResult]:
    """Gate and run ``calls`` from sync code; one result per call, in declared order.

    ``keys`` are the ledger keys (default: the call ids); ``started`` maps ``id(call)`` to calls
    dispatched early. ``on_start(call, eager)`` and ``on_result(result)`` are called from this thread.
    ``error_message`` overrides the toolbox's hook; ``approvals`` (by ledger key) answer the
    confirmation of those calls instead of the toolbox's callback. ``cache`` answers calls to
    tools that declare ``cache=`` from the results it holds, and keeps their new ``ok`` results.
    """
    batch = _Batch(box, calls, ledger, keys, on_start, on_result, error_message, approvals, cache)
    jobs = batch.prepare(started)
    if not jobs:
        return batch.done(raise_tool_errors)
    hooks: queue.SimpleQueue[tuple[Hook, Any] | _Done] = queue.SimpleQueue()
    batch.call_hook = lambda hook, arg: hooks.put((hook, arg))
    total = timeout if timeout is not None else box.total_timeout

    async def drive() -> None:
        try:
            await _drive(batch, jobs, total)
        finally:
            hooks.put(_DONE)

    core = _start_core(drive(), box)
    try:
        while True:
            try:
                item = hooks.get(timeout=0.5)
            except queue.Empty:
                if core.done():
                    break
                continue
            if item is _DONE:
                break
            hook, arg = item
            hook(arg)
    except BaseException:
        core.cancel()
        # The core abandons or releases every claim it holds as it unwinds (bounded by the grace).
        concurrent.futures.wait([core], timeout=_CANCEL_GRACE * 10)
        raise
    core.result()
    return batch.done(raise_tool_errors)


def _start_core(coro: Coroutine[Any, Any, None], box: Toolbox) -> concurrent.futures.Future[None]:
    """Run the batch's core on the toolbox's loop thread; called from a thread that runs an event
    loop itself (an async tool calling ``execute``, maybe on that very loop), on a private loop in a
    thread of its own, so that waiting here can never block the loop the core needs."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run_coroutine_threadsafe(coro, box.runtime().loop())
    future: concurrent.futures.Future[None] = concurrent.futures.Future()
    future.set_running_or_notify_cancel()
    ctx = contextvars.copy_context()

    def work() -> None:
        try:
            ctx.run(asyncio.run, coro)
        except BaseException as exc:
            future.set_exception(exc)
        else:
            future.set_result(None)

    threading.Thread(target=work, name="toolstitch-batch", daemon=True).start()
    return future


# ----------------------------------------------------------------------------- async twin


@async_twin_of(execute)
async def aexecute(box: Toolbox, calls: Sequence[ToolCall], **options: Any) -> list[ToolResult]:
    """Gate and run ``calls`` on the running event loop, with the arguments of :func:`execute`;
    one result per call, in declared order. Cancelling it cancels every running async tool."""
    args = bound(execute, box, calls, **options)
    batch = _Batch(
        box,
        calls,
        args["ledger"],
        args["keys"],
        args["on_start"],
        args["on_result"],
        args["error_message"],
        args["approvals"],
        args["cache"],
    )
    jobs = batch.prepare(args["started"])
    total = args["timeout"] if args["timeout"] is not None else box.total_timeout
    if jobs:
        await _drive(batch, jobs, total)
    return batch.done(args["raise_tool_errors"])
