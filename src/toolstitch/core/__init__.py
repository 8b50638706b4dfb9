"""The sans-I/O core: raw chunks in, events and checked tool calls out.

Nothing here knows HTTP, threads or asyncio (rule 7 and the ``h11`` model in docs/design.md): every
other layer is built on :class:`Accumulator`. What lives where:

* :mod:`._read`         the one reader: every chunk (SDK object, subclass or dict) is read, routed
  and appended by its lines; what cannot be read refuses the calls it may have carried text for.
* :mod:`._values`       reading one raw value (an index, an id, a name, arguments sent as an
  object, the fields of any object): each provider quirk of shape, recorded as an :class:`Anomaly`.
* :mod:`._route`        routing fragments to calls (by index, id, position; cumulative resends)
  and writing their identity: the reader, the router and the accumulator are a call's writers.
* :mod:`._call`         the call buffer and its state machine (open, ready, invalid, incomplete);
  read-only for users.
* :mod:`._seal`         sealing and checking a call against the request (tools, tool_choice,
  parallel_tool_calls); :func:`sealed_call` builds a checked call from a finished message.
* :mod:`._scanner`      the incremental JSON scanner (depth, strings, escapes), read lazily: only
  when something asks where a call's JSON stands (events, eager dispatch, the router's rare cases).
* :mod:`._schema`       checking sealed arguments against the request's tool schemas.
* :mod:`._recover`      opt-in recovery of tool calls a server wrote as text.
* :mod:`._preview`      display-only previews of arguments still streaming.
* :mod:`._accumulator`  the core itself: the stream's state, ``feed``, ending, the completion.
* :mod:`._responses`    the second reader: Responses API events into the same calls
  (:class:`ResponseAccumulator`, an ``Accumulator`` whose ``feed`` reads events).
* :mod:`._events`, :mod:`._anomaly`, :mod:`._limits`: the values the core hands out.
* :mod:`._clock`        the one clock of every timestamp and its anchor on the Unix time line.

The layers above use the core through this module only (an import-linter contract in pyproject.toml
and tests/test_architecture.py hold every package to its ``__init__``). ``__all__`` holds the names
users meet (those re-exported at the top level, and the events and metrics that
:mod:`toolstitch.events` and :mod:`toolstitch.metrics` publish) and the few the layers above share
without making them public names of ``toolstitch``: the clock, ``parse_arguments``, the request's
checks (``CallChecks``, ``requested_choice``, ``chat_tools``, ``chat_tool_choice``) and the
SDK-object read (``read_object``, ``Shape`` and the key sets).
"""

from __future__ import annotations

from ._accumulator import Accumulator, StreamMetrics
from ._anomaly import Anomaly, AnomalyCode
from ._call import CallMetrics, CallStatus, ToolCall, parse_arguments
from ._clock import CLOCK_ANCHOR, now, timings_dict, wall_clock
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
from ._responses import ResponseAccumulator, chat_tool_choice, chat_tools
from ._seal import CallChecks, requested_choice, sealed_call
from ._values import CHUNK_KEYS, DELTA_KEYS, TOOL_CALL_KEYS, Shape, read_object

__all__ = [
    "CHUNK_KEYS",
    "CLOCK_ANCHOR",
    "DELTA_KEYS",
    "TOOL_CALL_KEYS",
    "Accumulator",
    "Anomaly",
    "AnomalyCode",
    "AnomalyRecorded",
    "ArgumentsComplete",
    "ArgumentsDelta",
    "ArgumentsMalformed",
    "CallChecks",
    "CallMetrics",
    "CallStatus",
    "ChoiceFinished",
    "ContentDelta",
    "Event",
    "Limits",
    "ReasoningDelta",
    "RefusalDelta",
    "ResponseAccumulator",
    "Shape",
    "StreamEnded",
    "StreamMetrics",
    "ToolCall",
    "ToolCallIncomplete",
    "ToolCallInvalid",
    "ToolCallReady",
    "ToolCallStarted",
    "chat_tool_choice",
    "chat_tools",
    "now",
    "parse_arguments",
    "read_object",
    "requested_choice",
    "sealed_call",
    "timings_dict",
    "wall_clock",
]
