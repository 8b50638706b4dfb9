"""The agent loop: ``run``/``arun`` stream, seal, gate, execute, append and ask again;
``run_events``/``arun_events`` hand the same loop's events to a reader that pulls them."""

from __future__ import annotations

from ._pull import RunFinished, arun_events, run_events
from ._results import (
    CallAwaitingApproval,
    CallDispatched,
    CallFinished,
    RequestRetried,
    ResponseReceived,
    RunEvent,
    RunResult,
    Step,
    StepFinished,
    StepStarted,
    StepTimings,
    StreamAbandoned,
)
from ._retry import RetryPolicy
from ._run import arun, run
from ._stream_event import StreamEvent
from ._timeline import CallLane, Stage, StepLane, Timeline

__all__ = [
    "CallAwaitingApproval",
    "CallDispatched",
    "CallFinished",
    "RequestRetried",
    "ResponseReceived",
    "RunEvent",
    "RunFinished",
    "RunResult",
    "StepFinished",
    "StepStarted",
    "StepTimings",
    "StreamAbandoned",
    "StreamEvent",
    "arun",
    "arun_events",
    "run",
    "run_events",
]
"""What users meet: ``toolstitch`` or one of its public modules (``events``, ``metrics``,
``errors``, ``mcp``, ``testing``) hands each of these out (tests/test_architecture.py)."""
__all__ += [
    "CallLane",
    "RetryPolicy",
    "Stage",
    "Step",
    "StepLane",
    "Timeline",
]
"""For the layers above only: none of these is a name users meet."""
