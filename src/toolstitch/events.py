"""Every event toolstitch hands out, in one public module.

Stream events come from :meth:`~toolstitch.Accumulator.feed` and ``stream.events()``; run events
from ``ts.run(..., on_event=...)`` (each event of a step's stream wrapped in ``StreamEvent``, tagged
with the step) and ``ts.run_events(...)`` (the same, ending with ``RunFinished``).
They are frozen dataclasses: match on their class.
"""

from __future__ import annotations

from .core import (
    AnomalyRecorded,
    ArgumentsComplete,
    ArgumentsDelta,
    ArgumentsMalformed,
    ChoiceFinished,
    ContentDelta,
    Event,
    ReasoningDelta,
    RefusalDelta,
    StreamEnded,
    ToolCallIncomplete,
    ToolCallInvalid,
    ToolCallReady,
    ToolCallStarted,
)
from .loop import (
    CallAwaitingApproval,
    CallDispatched,
    CallFinished,
    RequestRetried,
    ResponseReceived,
    RunEvent,
    RunFinished,
    StepFinished,
    StepStarted,
    StreamAbandoned,
    StreamEvent,
)

__all__ = [
    "AnomalyRecorded",
    "ArgumentsComplete",
    "ArgumentsDelta",
    "ArgumentsMalformed",
    "CallAwaitingApproval",
    "CallDispatched",
    "CallFinished",
    "ChoiceFinished",
    "ContentDelta",
    "Event",
    "ReasoningDelta",
    "RefusalDelta",
    "RequestRetried",
    "ResponseReceived",
    "RunEvent",
    "RunFinished",
    "StepFinished",
    "StepStarted",
    "StreamAbandoned",
    "StreamEnded",
    "StreamEvent",
    "ToolCallIncomplete",
    "ToolCallInvalid",
    "ToolCallReady",
    "ToolCallStarted",
]
