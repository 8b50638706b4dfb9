"""toolstitch: streamed tool calls from the ``openai`` client, merged by index, checked, safe to run.

Start with :func:`wrap`; the sans-I/O core is :class:`Accumulator`. ``DESIGN.md`` holds the rules.
"""

from __future__ import annotations

from ._accumulator import Accumulator, StreamMetrics
from ._anomaly import Anomaly, AnomalyCode
from ._call import CallMetrics, CallStatus, ToolCall
from ._client import WrappedClient, wrap
from ._errors import (
    ArgumentsNotAnObject,
    CallIncomplete,
    EmptyArguments,
    IncompleteStreamError,
    LateFragment,
    LimitExceeded,
    MalformedArguments,
    MissingName,
    SchemaViolation,
    ToolCallError,
    ToolstitchError,
    UnknownTool,
)
from ._events import (
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
from ._limits import Limits
from ._stream import AsyncStitchedStream, StitchedStream

__version__ = "0.1.0"

__all__ = [
    "Accumulator",
    "Anomaly",
    "AnomalyCode",
    "AnomalyRecorded",
    "ArgumentsComplete",
    "ArgumentsDelta",
    "ArgumentsMalformed",
    "ArgumentsNotAnObject",
    "AsyncStitchedStream",
    "CallIncomplete",
    "CallMetrics",
    "CallStatus",
    "ChoiceFinished",
    "ContentDelta",
    "EmptyArguments",
    "Event",
    "IncompleteStreamError",
    "LateFragment",
    "LimitExceeded",
    "Limits",
    "MalformedArguments",
    "MissingName",
    "ReasoningDelta",
    "RefusalDelta",
    "SchemaViolation",
    "StitchedStream",
    "StreamEnded",
    "StreamMetrics",
    "ToolCall",
    "ToolCallError",
    "ToolCallIncomplete",
    "ToolCallInvalid",
    "ToolCallReady",
    "ToolCallStarted",
    "ToolstitchError",
    "UnknownTool",
    "WrappedClient",
    "__version__",
    "wrap",
]
