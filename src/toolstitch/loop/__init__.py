"""The agent loop: ``run``/``arun`` stream, seal, gate, execute, append and ask again."""

from __future__ import annotations

from ._run import (
    CallDispatched,
    CallFinished,
    RequestRetried,
    ResponseReceived,
    RetryPolicy,
    RunEvent,
    RunResult,
    Step,
    StepFinished,
    StepStarted,
    StepTimings,
    arun,
    run,
)

__all__ = [
    "CallDispatched",
    "CallFinished",
    "RequestRetried",
    "ResponseReceived",
    "RetryPolicy",
    "RunEvent",
    "RunResult",
    "Step",
    "StepFinished",
    "StepStarted",
    "StepTimings",
    "arun",
    "run",
]
