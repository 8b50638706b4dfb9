"""The sans-I/O core: raw chunks in, events and checked tool calls out.

Nothing here knows HTTP, threads or asyncio (rule 7 and the ``h11`` model in DESIGN.md): every
other layer is built on :class:`Accumulator`. What lives where:

* :mod:`._read`         reading one raw chunk (SDK object or dict) into canonical pieces (pure);
  every provider quirk of shape is handled there and recorded as an :class:`Anomaly`.
* :mod:`._route`        routing fragments to calls (by index, id, position; cumulative resends)
  and writing their identity: the router and the accumulator are the only writers of a call.
* :mod:`._call`         the call buffer and its state machine (open, ready, invalid, incomplete);
  read-only for users.
* :mod:`._seal`         sealing and checking a call against the request (tools, tool_choice,
  parallel_tool_calls); :func:`sealed_call` builds a checked call from a finished message.
* :mod:`._scanner`      the incremental JSON scanner (depth, strings, escapes).
* :mod:`._schema`       checking sealed arguments against the request's tool schemas.
* :mod:`._recover`      opt-in recovery of tool calls a server wrote as text.
* :mod:`._accumulator`  the core itself: ``feed`` routes fragments to calls and returns events.
* :mod:`._events`, :mod:`._anomaly`, :mod:`._limits`: the values the core hands out.
"""

from __future__ import annotations

from ._accumulator import Accumulator, StreamMetrics
from ._anomaly import Anomaly, AnomalyCode
from ._call import CallMetrics, CallStatus, ToolCall
from ._limits import Limits
from ._seal import sealed_call

__all__ = [
    "Accumulator",
    "Anomaly",
    "AnomalyCode",
    "CallMetrics",
    "CallStatus",
    "Limits",
    "StreamMetrics",
    "ToolCall",
    "sealed_call",
]
