"""Running gated tool calls: concurrently, with timeouts, cancellation and a ledger.

Two twins share one core (as the stream wrappers do):

* :func:`execute` (sync): sync tools run in the toolbox's bounded thread pool; async tools run on an
  event loop in a background thread. The calling thread gates, confirms and waits.
* :func:`aexecute` (async): async tools run as tasks of the running loop; sync tools in the pool.

Both return one :class:`ToolResult` per call, in the order the calls were declared, whatever order
they finish in. What never happens:

* a tool's exception escaping (it becomes an ``"error"`` result, logged with the call id on the
  ``"toolstitch"`` logger) unless the caller asked for ``raise_tool_errors``;
* waiting past a timeout: a call over its own timeout, or a batch over the total timeout, gets a
  ``"timeout"`` result. Async tools are cancelled; a sync tool's thread cannot be killed, so its result
  is discarded and the pool slot stays busy until the function returns;
* running a call the ledger has seen finish: its recorded result is reused.

Cancelling :func:`aexecute` (or interrupting :func:`execute`) cancels the running async tools and
stops waiting on the sync ones.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import inspect
import logging
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from ..core._call import ToolCall, now
from ..history import tool_message
from ..history._dialects import Dialect
from ._claim import ClaimLedger, LedgerEntry, Verdict, fingerprint, stored_result
from ._definition import Tool
from ._gate import (
    Admission,
    Refusal,
    admit,
    in_progress,
    ledger_unavailable,
    not_approved,
    outcome_unknown,
)
from ._runtime import Runtime, is_async_callable

if TYPE_CHECKING:
    from ._toolbox import Toolbox

__all__ = ["CallTimings", "ResultStatus", "Started", "ToolResult", "aexecute", "execute"]

logger = logging.getLogger("toolstitch")

ResultStatus = Literal["ok", "error", "timeout", "cancelled", "refused"]

_CANCEL_GRACE = 1.0  # seconds an async tool gets to unwind after cancellation before we move on


@dataclass(slots=True)
class CallTimings:
    """Where one call's time went (seconds; ``*_at`` are ``time.monotonic()`` instants).

    ``streaming``     from the call's first fragment to its seal
    ``arguments``     from the call's first fragment to the moment its JSON value closed
    ``validation``    spent in the gate (name lookup and argument validation)
    ``confirmation``  spent waiting for the approval callback
    ``execution``     the function's own running time
    ``eager``         the call started before its stream was sealed
    """

    streaming: float | None = None
    arguments: float | None = None
    validation: float = 0.0
    confirmation: float = 0.0
    execution: float | None = None
    started_at: float | None = None
    finished_at: float | None = None
    eager: bool = False


@dataclass(slots=True, eq=False)
class ToolResult:
    """The outcome of one tool call, ready for the history (``ts.tool_messages``).

    ``status``     ``"ok"``, ``"error"`` (the tool raised), ``"timeout"``, ``"cancelled"`` or
                   ``"refused"`` (the gate said no: ``reason`` says which check)
    ``value``      what the function returned (``ok`` only)
    ``error``      what the model is told when the call did not succeed
    ``reason``     a stable code: the gate's refusal reason, ``"raised"``, ``"timeout"`` …
    ``exception``  the exception the tool raised, if it raised
    ``reused``     the result was taken from the ledger; the function did not run now
    ``content``    the tool message's text: the value (a ``str`` as is, anything else as JSON), or
                   ``error``
    """

    call: ToolCall
    status: ResultStatus
    value: Any = None
    error: str | None = None
    reason: str | None = None
    exception: BaseException | None = None
    reused: bool = False
    timings: CallTimings = field(default_factory=CallTimings)
    problems: tuple[str, ...] = ()
    """For ``invalid_arguments`` refusals: each validation problem on its own."""
    content: str = ""

    def __post_init__(self) -> None:
        if not self.content:
            self.content = _content(self.value) if self.status == "ok" else (self.error or "Error")

    @property
    def ok(self) -> bool:
        """True when the tool ran and returned a value."""
        return self.status == "ok"

    @property
    def tool_call_id(self) -> str:
        """The id of the call this result answers."""
        return self.call.id or ""

    @property
    def name(self) -> str | None:
        """The tool name the model called."""
        return self.call.name

    def to_message(self, dialect: str | Dialect = "openai") -> dict[str, Any]:
        """The tool message answering the call (``ChatCompletionToolMessageParam``), shaped for
        ``dialect`` like ``ts.tool_message`` does (the same id rewriting as ``assistant_message``).

        Built from the call's id and name only: the call's stream status does not matter here, since
        the gate (not the stream's check against the published schema) decided whether it ran.
        """
        answered = {"id": self.call.id, "type": "function", "function": {"name": self.call.name}}
        if self.ok:
            return tool_message(answered, self.content, dialect=dialect)
        return tool_message(answered, error=self.content, dialect=dialect)

    def __repr__(self) -> str:
        detail = f"value={self.value!r}" if self.ok else f"reason={self.reason!r}"
        return f"ToolResult(id={self.call.id!r}, name={self.call.name!r}, status={self.status!r}, {detail})"


def _content(value: Any) -> str:
    if isinstance(value, str):
        return value
    from pydantic_core import to_json

    try:
        return to_json(value, fallback=str).decode()
    except Exception:
        return str(value)


# ----------------------------------------------------------------------------- the runtime


# ----------------------------------------------------------------------------- invoking


class _Clock:
    """Filled in by the worker: when the function really started and ended."""

    __slots__ = ("finished_at", "started_at")

    def __init__(self) -> None:
        self.started_at: float | None = None
        self.finished_at: float | None = None


async def _await(value: Awaitable[Any]) -> Any:
    return await value


def _invoke_sync(fn: Callable[..., Any], kwargs: Mapping[str, Any], clock: _Clock) -> Any:
    clock.started_at = now()
    try:
        value = fn(**kwargs)
        if inspect.isawaitable(value):  # a sync def that returned a coroutine: run it here
            value = asyncio.run(_await(value))
        return value
    finally:
        clock.finished_at = now()


async def _invoke_async(fn: Callable[..., Any], kwargs: Mapping[str, Any], clock: _Clock) -> Any:
    clock.started_at = now()
    try:
        return await fn(**kwargs)
    finally:
        clock.finished_at = now()


def _coroutine(job: _Job) -> Coroutine[Any, Any, Any]:
    return _invoke_async(job.tool.fn, job.kwargs, job.clock)


class Started:
    """A call dispatched before its stream was sealed (eager dispatch; read-only tools only).

    The executor adopts it when the sealed call is admitted with the same arguments; otherwise (or if
    the stream fails) it is cancelled and its result discarded.
    """

    __slots__ = ("arguments", "call", "clock", "future", "kwargs", "launched_at", "tool")

    def __init__(
        self, call: ToolCall, tool: Tool, kwargs: dict[str, Any], future: Any, clock: _Clock
    ) -> None:
        self.call = call
        self.tool = tool
        self.kwargs = kwargs
        self.arguments = call.arguments
        self.future = future  # concurrent.futures.Future (sync) or asyncio.Future (async)
        self.clock = clock
        self.launched_at = now()

    def cancel(self) -> None:
        """Cancel the call (an async tool sees ``CancelledError``; a sync tool's result is dropped)."""
        self.future.cancel()


def _with_call(admission: Admission, call: ToolCall) -> dict[str, Any]:
    param = admission.tool.call_param
    return admission.kwargs if param is None else {**admission.kwargs, param: call}


def start_early(box: Toolbox, call: ToolCall, admission: Admission) -> Started:
    """Dispatch ``call`` now, from sync code (the run loop's eager path)."""
    runtime = box.runtime()
    kwargs = _with_call(admission, call)
    clock = _Clock()
    t = admission.tool
    future: Any
    if t.is_async:
        coro = _invoke_async(t.fn, kwargs, clock)
        future = asyncio.run_coroutine_threadsafe(coro, runtime.loop())
    else:
        future = runtime.pool.submit(contextvars.copy_context().run, _invoke_sync, t.fn, kwargs, clock)
    return Started(call, t, kwargs, future, clock)


def astart_early(box: Toolbox, call: ToolCall, admission: Admission) -> Started:
    """Dispatch ``call`` now, on the running event loop (the async run loop's eager path)."""
    loop = asyncio.get_running_loop()
    kwargs = _with_call(admission, call)
    clock = _Clock()
    t = admission.tool
    future: Any
    if t.is_async:
        future = loop.create_task(_invoke_async(t.fn, kwargs, clock))
    else:
        ctx = contextvars.copy_context()
        future = loop.run_in_executor(box.runtime().pool, ctx.run, _invoke_sync, t.fn, kwargs, clock)
    return Started(call, t, kwargs, future, clock)


# ----------------------------------------------------------------------------- shared core


@dataclass(slots=True, eq=False)
class _Job:
    """One admitted call on its way to running."""

    index: int
    call: ToolCall
    tool: Tool
    kwargs: dict[str, Any]
    key: str
    fp: str
    timings: CallTimings
    clock: _Clock = field(default_factory=_Clock)
    owner: str | None = None
    """The ledger claim this job holds (None without a ledger)."""
    started: Started | None = None
    launched_at: float = 0.0


@dataclass(slots=True, eq=False)
class _Gated:
    """A call the gate admitted, on its way to the ledger."""

    index: int
    call: ToolCall
    admission: Admission
    key: str
    fp: str
    timings: CallTimings
    handle: Started | None


def _not_recorded(job: _Job, exc: Exception) -> None:
    logger.warning("the ledger could not record call %s: %s: %s", job.call.id, type(exc).__name__, exc)


class _Batch:
    """What both twins share: gating, ledger records, result making, logging, hooks."""

    def __init__(
        self,
        box: Toolbox,
        calls: Sequence[ToolCall],
        ledger: ClaimLedger | None,
        keys: Sequence[str] | None,
        on_start: Callable[[ToolCall, bool], None] | None,
        on_result: Callable[[ToolResult], None] | None,
    ) -> None:
        if keys is not None and len(keys) != len(calls):
            raise ValueError("keys must give one ledger key per call")
        self.box = box
        self.calls = list(calls)
        self.ledger = ledger
        self.keys = keys
        self.on_start = on_start
        self.on_result = on_result
        self.results: list[ToolResult | None] = [None] * len(self.calls)

    def prepare(self, started: Mapping[int, Started] | None) -> list[_Job]:
        """Gate and claim every call; refusals and reused results are final at once."""
        jobs: list[_Job] = []
        early = dict(started or {})
        for i, call in enumerate(self.calls):
            gated = self._gate(i, call, early.pop(id(call), None))
            if gated is None:
                continue
            claim: Verdict | Exception | None = None
            if self.ledger is not None:
                try:
                    claim = self._claim(gated.key, gated.fp, gated.admission.tool)
                except Exception as exc:  # the ledger failed: fail closed, the call does not run
                    claim = exc
            job = self._claimed(gated, claim)
            if job is not None:
                jobs.append(job)
        for handle in early.values():  # dispatched early for a call that is not in this batch
            handle.cancel()
        return jobs

    async def aprepare(self, started: Mapping[int, Started] | None) -> list[_Job]:
        """The async twin of :meth:`prepare`: claims and waits without blocking the event loop."""
        jobs: list[_Job] = []
        early = dict(started or {})
        for i, call in enumerate(self.calls):
            gated = self._gate(i, call, early.pop(id(call), None))
            if gated is None:
                continue
            claim: Verdict | Exception | None = None
            if self.ledger is not None:
                try:
                    claim = await self._aclaim(gated.key, gated.fp, gated.admission.tool)
                except Exception as exc:
                    claim = exc
            job = self._claimed(gated, claim)
            if job is not None:
                jobs.append(job)
        for handle in early.values():
            handle.cancel()
        return jobs

    def _gate(self, i: int, call: ToolCall, handle: Started | None) -> _Gated | None:
        """Steps 1-3 of the gate; a refusal is final at once."""
        timings = _stream_timings(call)
        t0 = now()
        verdict = admit(call, self.box)
        timings.validation = now() - t0
        if isinstance(verdict, Refusal):
            self.finish(i, _refused(call, verdict, timings))
            if handle is not None:
                handle.cancel()
            return None
        key = self.keys[i] if self.keys is not None else (call.id or "")
        return _Gated(i, call, verdict, key, fingerprint(call), timings, handle)

    def _claimed(self, gated: _Gated, claim: Verdict | Exception | None) -> _Job | None:
        """The job to run, or None when the ledger said not to run it here (the result is final)."""
        i, call, handle, timings = gated.index, gated.call, gated.handle, gated.timings
        if claim is not None and (isinstance(claim, Exception) or claim.action != "run"):
            if isinstance(claim, Exception):
                logger.warning(
                    "the ledger could not claim call %s: %s: %s", call.id, type(claim).__name__, claim
                )
                result = _refused(call, ledger_unavailable(call, claim), timings)
            else:
                result = self._not_run(call, claim, timings)
            self.finish(i, result, record=False)
            if handle is not None:
                handle.cancel()
            return None
        verdict = gated.admission
        owner = claim.owner if claim is not None else None
        kwargs = _with_call(verdict, call)
        job = _Job(i, call, verdict.tool, kwargs, gated.key, gated.fp, timings, owner=owner)
        if handle is not None and handle.tool is verdict.tool and handle.arguments == call.arguments:
            job.started, job.clock, job.timings.eager = handle, handle.clock, True
        elif handle is not None:
            handle.cancel()
        return job

    def launching(self, job: _Job) -> None:
        """The claim was taken in ``prepare``: a crash from here on leaves a started entry."""
        job.launched_at = job.started.launched_at if job.started is not None else now()

    def launched(self, job: _Job) -> None:
        if self.on_start is not None:
            self.on_start(job.call, job.started is not None)

    def remaining(self, job: _Job) -> float | None:
        limit = self.box.timeout_for(job.tool)
        return None if limit is None else max(0.0, limit - (now() - job.launched_at))

    def outcome(self, job: _Job, future: Any) -> ToolResult:
        """The result of a finished future (sync or asyncio)."""
        timings = _run_timings(job)
        name = job.tool.name
        if future.cancelled():
            return ToolResult(
                job.call,
                "cancelled",
                error=f"Error: the call to {name} was cancelled before it finished.",
                reason="cancelled",
                timings=timings,
            )
        exc = future.exception()
        if exc is None:
            return ToolResult(job.call, "ok", value=future.result(), timings=timings)
        logger.warning(
            "tool %r raised %s (call id %s)",
            name,
            type(exc).__name__,
            job.call.id,
            exc_info=exc,
            extra={"tool_call_id": job.call.id, "tool_name": name},
        )
        return ToolResult(
            job.call,
            "error",
            error=f"Error: {name} failed: {type(exc).__name__}: {exc}",
            reason="raised",
            exception=exc,
            timings=timings,
        )

    def timed_out(self, job: _Job, limit: float | None, total: bool) -> ToolResult:
        name = job.tool.name
        scope = "the time allowed for this batch of calls" if total else "its timeout"
        shown = f" ({limit:g}s)" if limit is not None else ""
        logger.warning(
            "tool %r timed out after %s (call id %s)",
            name,
            f"{limit:g}s" if limit is not None else "the batch limit",
            job.call.id,
            extra={"tool_call_id": job.call.id, "tool_name": name},
        )
        return ToolResult(
            job.call,
            "timeout",
            error=f"Error: {name} did not finish within {scope}{shown}; it was abandoned and has no result.",
            reason="timeout",
            timings=_run_timings(job),
        )

    def finish(self, index: int, result: ToolResult, job: _Job | None = None, record: bool = True) -> None:
        """Store a final result: into the ledger (when it ran), then the hook. The first result of a
        call wins (a task that finished during the cancellation grace is not reported twice)."""
        if self.results[index] is not None:
            return
        self.results[index] = result
        if record and job is not None:
            self.settle_claim(job, result)
        if self.on_result is not None:
            self.on_result(result)

    async def afinish(self, index: int, result: ToolResult, job: _Job | None = None) -> None:
        """The async twin of :meth:`finish`: the ledger is written without blocking the event loop."""
        if self.results[index] is not None:
            return
        self.results[index] = result
        if job is not None:
            await self.asettle_claim(job, result)
        if self.on_result is not None:
            self.on_result(result)

    @staticmethod
    def _settlement(job: _Job, result: ToolResult | None) -> Literal["finish", "release", "abandon"]:
        if result is not None and result.status in ("ok", "error", "timeout"):
            # An error or a timeout is an outcome too: the side effect may have happened, so the
            # call must not run again on a retry.
            return "finish"
        if job.clock.started_at is None and (result is None or result.status != "cancelled"):
            return "release"
        return "abandon"

    def settle_claim(self, job: _Job, result: ToolResult | None) -> None:
        """End the job's claim: finished with an outcome, released when the tool never started,
        abandoned (outcome unknown) when it started and was cancelled. ``None``: interrupted."""
        ledger, owner = self.ledger, job.owner
        if ledger is None or owner is None:
            return
        job.owner = None
        try:
            how = self._settlement(job, result)
            if how == "finish":
                assert result is not None
                ledger.finish(job.key, job.fp, owner, stored_result(result))
            elif how == "release":
                ledger.release(job.key, job.fp, owner)
            else:
                ledger.abandon(job.key, job.fp, owner)
        except Exception as exc:  # the ledger failed: the result stands, the claim goes stale
            _not_recorded(job, exc)

    async def asettle_claim(self, job: _Job, result: ToolResult | None) -> None:
        """The async twin of :meth:`settle_claim`."""
        ledger, owner = self.ledger, job.owner
        if ledger is None or owner is None:
            return
        job.owner = None
        try:
            how = self._settlement(job, result)
            write: Awaitable[Any]
            if how == "finish":
                assert result is not None
                write = ledger.afinish(job.key, job.fp, owner, stored_result(result))
            elif how == "release":
                write = ledger.arelease(job.key, job.fp, owner)
            else:
                write = ledger.aabandon(job.key, job.fp, owner)
            # Shielded: a batch that times out or is cancelled now must not cut the record short.
            await asyncio.shield(write)
        except Exception as exc:
            _not_recorded(job, exc)

    def _claim(self, key: str, fp: str, t: Tool) -> Verdict:
        """Claim the call; while it runs elsewhere, wait (bounded by the tool's timeout) and decide
        again."""
        ledger = self.ledger
        assert ledger is not None
        limit = self.box.timeout_for(t)
        deadline = None if limit is None else now() + limit
        while True:
            verdict = ledger.acquire(key, fp, t.name, read_only=t.read_only)
            left = None if deadline is None else deadline - now()
            if verdict.action != "wait" or (left is not None and left <= 0):
                return verdict
            ledger.wait(key, fp, left)

    async def _aclaim(self, key: str, fp: str, t: Tool) -> Verdict:
        """The async twin of :meth:`_claim` (``aacquire`` and ``await_change``)."""
        ledger = self.ledger
        assert ledger is not None
        limit = self.box.timeout_for(t)
        deadline = None if limit is None else now() + limit
        while True:
            verdict = await ledger.aacquire(key, fp, t.name, read_only=t.read_only)
            left = None if deadline is None else deadline - now()
            if verdict.action != "wait" or (left is not None and left <= 0):
                return verdict
            await ledger.await_change(key, fp, left)

    def _not_run(self, call: ToolCall, verdict: Verdict, timings: CallTimings) -> ToolResult:
        entry = verdict.entry
        if verdict.action == "reuse" and entry is not None:
            return _reused(call, entry, timings)
        if verdict.action == "unknown":
            return _refused(call, outcome_unknown(call), timings)
        return _refused(call, in_progress(call), timings)

    def done(self, raise_tool_errors: bool) -> list[ToolResult]:
        results = [r for r in self.results if r is not None]
        assert len(results) == len(self.calls), "every call gets exactly one result"
        if raise_tool_errors:
            for r in results:
                if r.exception is not None and not r.reused:
                    raise r.exception
        return results


def _stream_timings(call: ToolCall) -> CallTimings:
    m = call.metrics
    timings = CallTimings()
    if m.opened_at is not None:
        if m.sealed_at is not None:
            timings.streaming = m.sealed_at - m.opened_at
        if m.arguments_complete_at is not None:
            timings.arguments = m.arguments_complete_at - m.opened_at
    return timings


def _run_timings(job: _Job) -> CallTimings:
    timings = job.timings
    clock = job.clock
    timings.started_at = clock.started_at
    end = clock.finished_at if clock.finished_at is not None else now()
    timings.finished_at = end
    if clock.started_at is not None:
        timings.execution = end - clock.started_at
    return timings


def _refused(call: ToolCall, refusal: Refusal, timings: CallTimings) -> ToolResult:
    return ToolResult(
        call,
        "refused",
        error=refusal.message,
        reason=refusal.reason,
        timings=timings,
        problems=refusal.problems,
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


def _no_callback(job: _Job) -> Refusal:
    return not_approved(job.call, "this tool needs approval and no confirmation callback is configured")


def _callback_failed(job: _Job, exc: BaseException) -> Refusal:
    logger.warning(
        "confirmation callback raised %s for %r (call id %s)",
        type(exc).__name__,
        job.tool.name,
        job.call.id,
        exc_info=exc,
        extra={"tool_call_id": job.call.id, "tool_name": job.tool.name},
    )
    return not_approved(job.call, "the approval step failed")


# ----------------------------------------------------------------------------- sync twin


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
) -> list[ToolResult]:
    """Gate and run ``calls`` from sync code; one result per call, in declared order.

    ``keys`` are the ledger keys (default: the call ids); ``started`` maps ``id(call)`` to calls
    dispatched early. ``on_start(call, eager)`` and ``on_result(result)`` are called from this thread.
    """
    batch = _Batch(box, calls, ledger, keys, on_start, on_result)
    jobs = batch.prepare(started)
    if not jobs:
        return batch.done(raise_tool_errors)
    runtime = box.runtime()
    total = timeout if timeout is not None else box.total_timeout
    overall = now() + total if total is not None else None
    running: dict[concurrent.futures.Future[Any], tuple[_Job, float | None]] = {}

    def launch(job: _Job) -> None:
        batch.launching(job)
        future: concurrent.futures.Future[Any]
        if job.started is not None:
            future = job.started.future
        elif job.tool.is_async:
            future = asyncio.run_coroutine_threadsafe(_coroutine(job), runtime.loop())
        else:
            ctx = contextvars.copy_context()
            future = runtime.pool.submit(ctx.run, _invoke_sync, job.tool.fn, job.kwargs, job.clock)
        batch.launched(job)
        limit = batch.remaining(job)
        running[future] = (job, None if limit is None else now() + limit)

    try:
        # Calls that need no approval start at once; approvals are asked one at a time, in order.
        for job in jobs:
            if not job.tool.confirm:
                launch(job)
        for job in jobs:
            if job.tool.confirm:
                refusal = _confirm_sync(box, runtime, job)
                if refusal is not None:
                    batch.finish(job.index, _refused(job.call, refusal, job.timings), job)
                else:
                    launch(job)
        _wait_sync(batch, running, overall, total)
    except BaseException:
        for future in running:
            future.cancel()
        for job in jobs:
            batch.settle_claim(job, None)
        raise
    return batch.done(raise_tool_errors)


def _confirm_sync(box: Toolbox, runtime: Runtime, job: _Job) -> Refusal | None:
    callback = box.confirm
    if callback is None:
        return _no_callback(job)
    t0 = now()
    try:
        answer: Any = callback(job.call, job.tool)
        if inspect.isawaitable(answer):
            answer = asyncio.run_coroutine_threadsafe(_await(answer), runtime.loop()).result()
    except Exception as exc:
        return _callback_failed(job, exc)
    finally:
        job.timings.confirmation = now() - t0
    return None if answer is True else not_approved(job.call)


def _wait_sync(
    batch: _Batch,
    running: dict[concurrent.futures.Future[Any], tuple[_Job, float | None]],
    overall: float | None,
    total: float | None,
) -> None:
    while running:
        deadlines = [d for _, d in running.values() if d is not None]
        if overall is not None:
            deadlines.append(overall)
        wait = max(0.0, min(deadlines) - now()) if deadlines else None
        done, _ = concurrent.futures.wait(
            list(running), timeout=wait, return_when=concurrent.futures.FIRST_COMPLETED
        )
        for future in done:
            job, _ = running.pop(future)
            batch.finish(job.index, batch.outcome(job, future), job)
        t = now()
        for future, (job, deadline) in list(running.items()):
            if future.done():
                continue  # finished just now: collected on the next turn
            over_total = overall is not None and t >= overall
            if over_total or (deadline is not None and t >= deadline):
                future.cancel()
                del running[future]
                limit = total if over_total else batch.box.timeout_for(job.tool)
                batch.finish(job.index, batch.timed_out(job, limit, over_total), job)


# ----------------------------------------------------------------------------- async twin


async def aexecute(
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
) -> list[ToolResult]:
    """The async twin of :func:`execute`. Cancelling it cancels every running async tool."""
    batch = _Batch(box, calls, ledger, keys, on_start, on_result)
    jobs = await batch.aprepare(started)
    if not jobs:
        return batch.done(raise_tool_errors)
    total = timeout if timeout is not None else box.total_timeout
    approvals = asyncio.Lock()  # one approval question at a time, in declared order
    tasks = {asyncio.ensure_future(_run_job(batch, job, approvals)): job for job in jobs}
    try:
        _, pending = await asyncio.wait(tasks, timeout=total)
    except BaseException:
        await _cancel_all(tasks)
        settling = asyncio.ensure_future(asyncio.gather(*(batch.asettle_claim(job, None) for job in jobs)))
        with contextlib.suppress(asyncio.CancelledError):  # cancelled again: the claims still settle
            await asyncio.shield(settling)
        raise
    if pending:
        await _cancel_all(pending)
    for task, job in tasks.items():
        if task in pending:
            await batch.afinish(job.index, batch.timed_out(job, total, True), job)
            continue
        error = None if task.cancelled() else task.exception()
        if error is not None:
            raise error  # a bug in a hook or in toolstitch: do not hide it
    return batch.done(raise_tool_errors)


async def _cancel_all(tasks: Any) -> None:
    for task in tasks:
        task.cancel()
    if tasks:
        await asyncio.wait(tasks, timeout=_CANCEL_GRACE)


async def _run_job(batch: _Batch, job: _Job, approvals: asyncio.Lock) -> None:
    """Confirm, launch and await one call; store its final result in the batch."""
    box = batch.box
    if job.tool.confirm:
        async with approvals:
            refusal = await _confirm_async(box, job)
        if refusal is not None:
            await batch.afinish(job.index, _refused(job.call, refusal, job.timings), job)
            return
    loop = asyncio.get_running_loop()
    batch.launching(job)
    inner: asyncio.Future[Any]
    if job.started is not None:
        inner = job.started.future
    elif job.tool.is_async:
        inner = asyncio.ensure_future(_coroutine(job))
    else:
        ctx = contextvars.copy_context()
        pool = box.runtime().pool
        inner = loop.run_in_executor(pool, ctx.run, _invoke_sync, job.tool.fn, job.kwargs, job.clock)
    batch.launched(job)
    try:
        done, _ = await asyncio.wait({inner}, timeout=batch.remaining(job))
    except BaseException:
        inner.cancel()
        await asyncio.wait({inner}, timeout=_CANCEL_GRACE)
        raise
    if not done:
        inner.cancel()
        await asyncio.wait({inner}, timeout=_CANCEL_GRACE)
        await batch.afinish(job.index, batch.timed_out(job, box.timeout_for(job.tool), False), job)
        return
    await batch.afinish(job.index, batch.outcome(job, inner), job)


async def _confirm_async(box: Toolbox, job: _Job) -> Refusal | None:
    callback = box.confirm
    if callback is None:
        return _no_callback(job)
    t0 = now()
    try:
        if is_async_callable(callback):
            answer: Any = callback(job.call, job.tool)
        else:
            # A sync callback may block (it may ask a person): keep it off the event loop.
            answer = await asyncio.to_thread(callback, job.call, job.tool)
        if inspect.isawaitable(answer):
            answer = await answer
    except Exception as exc:
        return _callback_failed(job, exc)
    finally:
        job.timings.confirmation = now() - t0
    return None if answer is True else not_approved(job.call)
