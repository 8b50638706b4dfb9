"""The agent loop: ``run``/``arun`` stream, seal, gate, execute, append and ask again;
``run_events``/``arun_events`` hand the same loop's events to a reader that pulls them."""

from __future__ import annotations

from ._pull import *  # noqa: F403 - the iterator forms, listed in _pull.__all__
from ._results import *  # noqa: F403 - the run's result and its events, listed in _results.__all__
from ._retry import RetryPolicy
from ._run import *  # noqa: F403 - run and arun
from ._stream_event import *  # noqa: F403 - StreamEvent
from ._timeline import CallLane, Stage, StepLane, Timeline

__all__ = [  # the names users meet (toolstitch or a public module hands them out)
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
__all__ += [  # for the layers above only
    "CallLane",
    "RetryPolicy",
    "Stage",
    "Step",
    "StepLane",
    "Timeline",
]
