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
"""

from __future__ import annotations

from ._accumulator import Accumulator, StreamMetrics
from ._anomaly import Anomaly, AnomalyCode
from ._call import CallMetrics, CallStatus, ToolCall
from ._limits import Limits
from ._responses import ResponseAccumulator
from ._seal import sealed_call

__all__ = [
    "Accumulator",
    "Anomaly",
    "AnomalyCode",
    "CallMetrics",
    "CallStatus",
    "Limits",
    "ResponseAccumulator",
    "StreamMetrics",
    "ToolCall",
    "sealed_call",
]
