"""toolstitch: streamed tool calls from the ``openai`` client, merged by index, checked, safe to run.

Start with :func:`wrap`; the sans-I/O core is :class:`Accumulator`. ``docs/design.md`` holds the rules and
``docs/architecture.md`` draws the layers.

The top level holds only what a user types daily. Everything else has one public home:
:mod:`toolstitch.events` (stream and run events), :mod:`toolstitch.errors` (every exception),
:mod:`toolstitch.metrics` (counts and timings), and the layer packages :mod:`toolstitch.core`,
:mod:`toolstitch.client`, :mod:`toolstitch.history`, :mod:`toolstitch.tools`,
:mod:`toolstitch.loop` and :mod:`toolstitch.recording`. Names that used to live at the top level
still resolve here for one release, with a :class:`DeprecationWarning` naming their new home, and
so do two renamed ones: ``Ledger`` (now :class:`MemoryLedger`) and ``tool_calls`` (now
:func:`calls_of`).
"""

from __future__ import annotations

import importlib
import warnings
from typing import TYPE_CHECKING, Any

from . import errors as errors
from . import events as events
from . import mcp as mcp
from . import metrics as metrics
from ._renamed import renamed
from ._version import __version__ as __version__
from .client import (
    AsyncStitchedResponseStream,
    AsyncStitchedStream,
    StitchedResponseStream,
    StitchedStream,
    aresume,
    calls_of,
    resume,
    stitch,
    wrap,
)
from .core import Accumulator, Limits, ResponseAccumulator, ToolCall, trust_grammar
from .errors import HistoryError, IncompleteStreamError, ToolError, ToolstitchError
from .history import (
    assistant_message,
    call_error_text,
    ensure_valid_history,
    function_call_output,
    function_call_outputs,
    repair_history,
    response_items,
    tool_message,
    tool_messages,
    validate_history,
    validate_input,
    validate_request,
)
from .loop import RunResult, arun, arun_events, run, run_events
from .recording import replay
from .tools import Deny, MemoryLedger, PostgresLedger, SQLiteLedger, Tool, Toolbox, ToolResult, tool

__all__ = [
    "Accumulator",
    "AsyncStitchedResponseStream",
    "AsyncStitchedStream",
    "Deny",
    "HistoryError",
    "IncompleteStreamError",
    "Limits",
    "MemoryLedger",
    "PostgresLedger",
    "ResponseAccumulator",
    "RunResult",
    "SQLiteLedger",
    "StitchedResponseStream",
    "StitchedStream",
    "Tool",
    "ToolCall",
    "ToolError",
    "ToolResult",
    "Toolbox",
    "ToolstitchError",
    "aresume",
    "arun",
    "arun_events",
    "assistant_message",
    "call_error_text",
    "calls_of",
    "ensure_valid_history",
    "function_call_output",
    "function_call_outputs",
    "repair_history",
    "replay",
    "response_items",
    "resume",
    "run",
    "run_events",
    "stitch",
    "tool",
    "tool_message",
    "tool_messages",
    "trust_grammar",
    "validate_history",
    "validate_input",
    "validate_request",
    "wrap",
]

# Names renamed in 0.2, and their new name. They resolve for one release.
_RENAMED: dict[str, str] = {
    "Ledger": "MemoryLedger",
    "tool_calls": "calls_of",
}

if TYPE_CHECKING:  # type checkers see the old names with their types; at run time __getattr__ warns
    Ledger = MemoryLedger
    tool_calls = calls_of

# Names that left the top level in 0.2, and their new home. They resolve for one release.
_MOVED: dict[str, str] = {
    "AnomalyRecorded": "toolstitch.events",
    "ArgumentsComplete": "toolstitch.events",
    "ArgumentsDelta": "toolstitch.events",
    "ArgumentsMalformed": "toolstitch.events",
    "CallDispatched": "toolstitch.events",
    "CallFinished": "toolstitch.events",
    "ChoiceFinished": "toolstitch.events",
    "ContentDelta": "toolstitch.events",
    "Event": "toolstitch.events",
    "ReasoningDelta": "toolstitch.events",
    "RefusalDelta": "toolstitch.events",
    "RequestRetried": "toolstitch.events",
    "ResponseReceived": "toolstitch.events",
    "RunEvent": "toolstitch.events",
    "StepFinished": "toolstitch.events",
    "StepStarted": "toolstitch.events",
    "StreamEnded": "toolstitch.events",
    "ToolCallIncomplete": "toolstitch.events",
    "ToolCallInvalid": "toolstitch.events",
    "ToolCallReady": "toolstitch.events",
    "ToolCallStarted": "toolstitch.events",
    "ArgumentsNotAnObject": "toolstitch.errors",
    "CallIncomplete": "toolstitch.errors",
    "CallNotReadyError": "toolstitch.errors",
    "EmptyArguments": "toolstitch.errors",
    "InBandError": "toolstitch.errors",
    "LateFragment": "toolstitch.errors",
    "LimitExceeded": "toolstitch.errors",
    "MalformedArguments": "toolstitch.errors",
    "MissingName": "toolstitch.errors",
    "RecordedError": "toolstitch.errors",
    "RecordingFormatError": "toolstitch.errors",
    "RecordingWarning": "toolstitch.errors",
    "SchemaViolation": "toolstitch.errors",
    "ToolCallError": "toolstitch.errors",
    "UnknownTool": "toolstitch.errors",
    "CallMetrics": "toolstitch.metrics",
    "CallTimings": "toolstitch.metrics",
    "StepTimings": "toolstitch.metrics",
    "StreamMetrics": "toolstitch.metrics",
    "Anomaly": "toolstitch.core",
    "AnomalyCode": "toolstitch.core",
    "CallStatus": "toolstitch.core",
    "WrappedClient": "toolstitch.client",
    "NOT_EXECUTED": "toolstitch.history",
    "HistoryProblem": "toolstitch.history",
    "RepairChange": "toolstitch.history",
    "RepairReport": "toolstitch.history",
    "ConfirmCallback": "toolstitch.tools",
    "LedgerEntry": "toolstitch.tools",
    "RetryPolicy": "toolstitch.loop",
    "Step": "toolstitch.loop",
    "Recorder": "toolstitch.recording",
    "Replay": "toolstitch.recording",
}


def _moved(name: str) -> Any:
    """A name that moved off the top level (``_MOVED``) resolves from its home, warning."""
    home = _MOVED.get(name)
    if home is None:
        raise AttributeError(f"module 'toolstitch' has no attribute {name!r}")
    warnings.warn(
        f"toolstitch.{name} moved to {home}.{name}; the top-level name goes away in the next release",
        DeprecationWarning,
        stacklevel=3,
    )
    return getattr(importlib.import_module(home), name)


__getattr__ = renamed("toolstitch", _RENAMED, globals(), _moved)
"""Resolve a name that moved off the top level or was renamed, warning once per use site."""
