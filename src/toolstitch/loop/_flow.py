"""The run written once, as a generator, and its two drivers.

In the manner of httpx's auth flow (``Auth.auth_flow`` driven by ``sync_auth_flow`` and
``async_auth_flow``): every decision is in the flow and in ``_Loop`` and ``_Turn`` (``_run.py``);
every I/O is an operation the flow yields, ``(kind, *arguments)``, which ``run``'s driver
(:func:`drive`) performs blocking and ``arun``'s (:func:`adrive`) awaiting, sending the outcome back
(or throwing its exception in). So the twins cannot drift apart: they differ only in how an
operation is performed.
"""

from __future__ import annotations

import asyncio
import sys
import threading
import time
from collections.abc import Callable, Generator
from enum import Enum
from typing import TYPE_CHECKING, Any, Final

import tenacity

from ..core import now
from ..tools import aexecute, execute

if TYPE_CHECKING:
    from ._results import RunResult, StopReason
    from ._run import _Loop, _Turn

__all__ = ["adrive", "drive", "run_flow"]


_Op = tuple[Any, ...]
_Flow = Generator[_Op, Any, Any]


class _End(Enum):
    """What the ``"next"`` operation answers at the end of the stream (an event is never one)."""

    END = "end"


_END: Final = _End.END


def run_flow(loop: _Loop, wrapped: Any, model: str) -> Generator[_Op, Any, RunResult]:
    """The whole run: the resumed step 0 (if the history ends with unanswered calls), then steps."""
    now_, waiting = yield ("io", loop.plan_resume, loop.pending())
    if now_ or waiting:
        t0 = now()
        results = (yield ("execute", now_, loop.resume_kwargs(now_))) if now_ else []
        loop.resumed(now_, results, t0, bool(waiting))
    if waiting:
        yield ("io", loop.defer, 0)
        return loop.result("awaiting_approval")
    for index in loop.step_indices():
        stop = yield from _step_flow(loop, wrapped, model, index)
        if stop is not None:
            return loop.result(stop)
    return loop.result("max_steps")


def _step_flow(loop: _Loop, wrapped: Any, model: str, index: int) -> Generator[_Op, Any, StopReason | None]:
    """One step: the request (retried with tenacity, its waits yielded), the stream, the calls."""
    turn = loop.begin_step(index)
    turn.resume_from = yield ("io", turn.recorded_background)
    waits: list[float] = []  # tenacity's sleeps, performed by the driver
    for attempt in tenacity.Retrying(sleep=waits.append, **turn.retrying_kwargs()):
        if waits:
            yield ("sleep", waits.pop())
        with attempt:
            turn.attempt_started((yield ("aio",)))
            try:
                turn.stream = stream = yield ("send", turn, wrapped, model)
                yield from _read_flow(loop, turn, stream)
            except BaseException as exc:
                turn.attempt_failed(exc)
                raise
    if turn.abandoned is not None:
        return turn.abandon()
    stop = turn.received()
    if stop is not None:
        return stop
    calls = turn.to_run()
    results = (yield ("execute", calls, turn.execute_kwargs())) if calls else []
    stop = turn.executed(results)
    if turn.waiting:
        yield ("io", loop.defer, index)
    return stop


def _read_flow(loop: _Loop, turn: _Turn, stream: Any) -> _Flow:
    """``with stream:`` read its events, then its final answer; ``fail_fast`` leaves early (closing
    the stream at once)."""
    yield ("enter", stream)
    try:
        with turn.reading():
            events = yield ("events", stream)
            try:
                while (event := (yield ("next", events))) is not _END:
                    turn.streamed(event)
                    if loop.pace is not None:
                        yield ("pace",)
                    if turn.abandoned is not None:
                        break
            except GeneratorExit:
                raise
            except BaseException:
                yield ("close", events)
                raise
            yield ("close", events)  # as leaving a ``for`` loop does, before the stream closes
            if turn.abandoned is None:
                turn.completion = yield ("final", stream)
    except GeneratorExit:
        raise
    except BaseException:
        if not (yield ("exit", stream, sys.exc_info())):
            raise
    else:
        yield ("exit", stream, (None, None, None))


_SYNC: dict[str, Callable[..., Any]] = {
    "next": lambda loop, it: next(it, _END),
    "pace": lambda loop: None,
    "io": lambda loop, fn, *args: fn(*args),
    "execute": lambda loop, calls, kwargs: execute(loop.box, calls, **kwargs),
    "aio": lambda loop: None,
    "sleep": lambda loop, seconds: time.sleep(seconds),
    "send": lambda loop, turn, wrapped, model: turn.send(wrapped, model),
    "enter": lambda loop, stream: stream.__enter__(),
    "exit": lambda loop, stream, exc_info: stream.__exit__(*exc_info),
    "events": lambda loop, stream: iter(stream.events()),
    "close": lambda loop, events: getattr(events, "close", lambda: None)(),
    "final": lambda loop, stream: loop.api.final(stream),
}


async def _await_op(loop: _Loop, op: _Op) -> Any:
    """One operation of the flow, awaited (``arun``)."""
    kind = op[0]
    if kind == "next":
        return await anext(op[1], _END)
    if kind == "pace":
        return await loop.pace() if loop.pace is not None else None
    if kind == "io":
        return await loop.ledger._io(op[1], *op[2:])
    if kind == "execute":
        return await aexecute(loop.box, op[1], **op[2])
    if kind == "aio":
        return asyncio.get_running_loop()
    if kind == "sleep":
        return await asyncio.sleep(op[1])
    if kind == "send":
        return await op[1].send(op[2], op[3])
    if kind == "enter":
        return await op[1].__aenter__()
    if kind == "exit":
        return await op[1].__aexit__(*op[2])
    if kind == "events":
        return op[1].events().__aiter__()
    if kind == "close":
        aclose = getattr(op[1], "aclose", None)
        return await aclose() if aclose is not None else None
    return await loop.api.afinal(op[1])  # "final"


class _Driven:
    """A flow between two of its operations: what to send back into it, or throw in."""

    def __init__(self, flow: Generator[_Op, Any, RunResult]) -> None:
        self.flow = flow
        self.sent: Any = None
        self.error: BaseException | None = None
        self.result: Any = None

    def next_op(self) -> _Op | None:
        """The flow's next operation, or None when it returned (``result``) or raised."""
        try:
            op = self.flow.send(self.sent) if self.error is None else self.flow.throw(self.error)
        except StopIteration as done:
            self.result = done.value
            return None
        self.sent, self.error = None, None
        return op


def drive(flow: Generator[_Op, Any, RunResult], loop: _Loop) -> RunResult:
    """``run``'s driver: each operation performed blocking."""
    driven = _Driven(flow)
    try:
        while (op := driven.next_op()) is not None:
            try:
                driven.sent = _SYNC[op[0]](loop, *op[1:])
            except BaseException as exc:
                driven.error = exc
    finally:
        loop.chain.close()  # the run's own WebSocket connection, if it opened one
        if loop.owns_box:  # a toolbox the run made from a list: its threads end with the run
            loop.box.close()
    return driven.result  # type: ignore[no-any-return]


async def adrive(flow: Generator[_Op, Any, RunResult], loop: _Loop) -> RunResult:
    """``arun``'s driver: each operation awaited."""
    driven = _Driven(flow)
    try:
        while (op := driven.next_op()) is not None:
            try:
                driven.sent = await _await_op(loop, op)
            except BaseException as exc:
                driven.error = exc
    finally:
        await loop.chain.aclose()
        if loop.owns_box:  # closed off the event loop: ``close`` may wait for a tool past its timeout
            threading.Thread(target=loop.box.close, name="toolstitch-close", daemon=True).start()
    return driven.result  # type: ignore[no-any-return]
