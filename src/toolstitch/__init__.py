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
from ._history import (
    NOT_EXECUTED,
    CallNotReadyError,
    HistoryError,
    HistoryProblem,
    RepairChange,
    RepairReport,
    assistant_message,
    call_error_text,
    ensure_valid_history,
    repair_history,
    tool_message,
    tool_messages,
    validate_history,
    validate_request,
)
from ._limits import Limits
from ._recording import Recorder, RecordingWarning
from ._replay import RecordedError, RecordingFormatError, Replay, replay
from ._stream import AsyncStitchedStream, StitchedStream

__version__ = "0.1.0"

__all__ = [
    "NOT_EXECUTED",
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
    "CallNotReadyError",
    "CallStatus",
    "ChoiceFinished",
    "ContentDelta",
    "EmptyArguments",
    "Event",
    "HistoryError",
    "HistoryProblem",
    "IncompleteStreamError",
    "LateFragment",
    "LimitExceeded",
    "Limits",
    "MalformedArguments",
    "MissingName",
    "ReasoningDelta",
    "RecordedError",
    "Recorder",
    "RecordingFormatError",
    "RecordingWarning",
    "RefusalDelta",
    "RepairChange",
    "RepairReport",
    "Replay",
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
    "assistant_message",
    "call_error_text",
    "ensure_valid_history",
    "repair_history",
    "replay",
    "tool_message",
    "tool_messages",
    "validate_history",
    "validate_request",
    "wrap",
]
