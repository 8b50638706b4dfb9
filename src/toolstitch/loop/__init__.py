"""The agent loop: ``run``/``arun`` stream, seal, gate, execute, append and ask again;
``run_events``/``arun_events`` hand the same loop's events to a reader that pulls them."""

from __future__ import annotations

from . import _pull, _results, _run, _stream_event
from ._pull import *  # noqa: F403 - the iterator forms, listed in _pull.__all__
from ._results import *  # noqa: F403 - the run's result and its events, listed in _results.__all__
from ._retry import RetryPolicy
from ._run import *  # noqa: F403 - run and arun
from ._stream_event import *  # noqa: F403 - StreamEvent
from ._timeline import CallLane, Stage, StepLane, Timeline

__all__ = [
    *_run.__all__,
    *_pull.__all__,
    *_stream_event.__all__,
    *_results.__all__,
    "CallLane",
    "RetryPolicy",
    "Stage",
    "StepLane",
    "Timeline",
]
