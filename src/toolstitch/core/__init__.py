"""The sans-I/O core: raw chunks in, events and checked tool calls out.

Nothing here knows HTTP, threads or asyncio (rule 7 and the ``h11`` model in docs/design.md): every
other layer is built on :class:`Accumulator`. What lives where:

* :mod:`._owner`        the owner of a call's life (rule 12): the table of states and events
  (``TRANSITIONS``, each cell an action and the state after it) and ``CallOwner``, its one writer.
* :mod:`._call`         ``ToolCall``, read-only for users: what they read, and the text's buffer.
* :mod:`._accumulator`  the chat accumulator and its reader: every chunk (SDK object, subclass or
  dict) is read and translated into the owner's events; ``feed``, ending, the ``ChatCompletion``.
* :mod:`._responses`    the Responses reader: ``ResponseAccumulator``, a sibling of ``Accumulator``.
* :mod:`._store`        what both accumulators share (``CallStore``): the calls, the owner,
  anomalies, the one guarded ``feed``, refusing, sealing, ending.
* :mod:`._values`       reading one raw value (an index, an id, a name, arguments sent as an
  object, the fields of any object): each provider quirk of shape, recorded as an :class:`Anomaly`.
* :mod:`._route`        routing fragments to calls (by index, id, position; cumulative resends).
* :mod:`._seal`         the request's verdict on a sealed call (tools, tool_choice,
  parallel_tool_calls); :func:`sealed_call` builds a checked call from a finished message.
* :mod:`._clock`        the one clock of every timestamp and its anchor on the Unix time line.
* :mod:`._schema`       checking sealed arguments against the request's tool schemas.
* :mod:`._schema_grammar` a custom tool's ``format``: its input checked at seal and at the gate,
  by the engine of its syntax (in :mod:`toolstitch.text`: Rust ``regex`` or llguidance).
* :mod:`._recover`      opt-in recovery of tool calls a server wrote as text.
* :mod:`._events`, :mod:`._anomaly`, :mod:`._limits`: the values the core hands out.
* :mod:`._json_form`    every event's JSON form (``to_dict()``), shared with the run events.

What a call's text is, apart from the stream and the call, is :mod:`toolstitch.text`'s, the layer
below: the incremental scanner, the preview, the early verdicts and the quick check of a schema,
the strict parse, and the grammar engines. The core holds the stream and the call, and asks it.

The layers above use the core through this module only (an import-linter contract in pyproject.toml
and tests/test_architecture.py hold every package to its ``__init__``). ``__all__`` holds the names
users meet (those re-exported at the top level, and the events and metrics that
:mod:`toolstitch.events` and :mod:`toolstitch.metrics` publish) and the few the layers above share
without making them public names of ``toolstitch``: the clock, ``parse_arguments`` (the text
layer's, passed on), the request's checks (``CallChecks``, ``requested_choice``, ``chat_tools``,
``chat_tool_choice``, a custom tool's ``read_format``) and the SDK-object read (``read_object``,
``Shape`` and the key sets).
"""

from __future__ import annotations

from ..text import parse_arguments
from ._accumulator import Accumulator
from ._anomaly import Anomaly, AnomalyCode
from ._call import CallMetrics, CallStatus, ToolCall
from ._clock import CLOCK_ANCHOR, now, timings_dict, wall_clock
from ._events import *  # noqa: F403 - the stream events, listed in _events.__all__
from ._json_form import JSONForm, json_form, model_fields
from ._limits import Limits
from ._responses import ResponseAccumulator, chat_tool_choice, chat_tools
from ._schema_grammar import InputFormat, TrustedGrammar, read_format, trust_grammar
from ._seal import CallChecks, requested_choice, sealed_call
from ._serialisable import serialisable, valid_unicode
from ._store import CallStore, StreamMetrics
from ._values import CHUNK_KEYS, DELTA_KEYS, TOOL_CALL_KEYS, Shape, read_object

__all__ = [  # the names users meet (toolstitch or a public module hands them out)
    "CLOCK_ANCHOR",
    "Accumulator",
    "AnomalyRecorded",
    "ArgumentsComplete",
    "ArgumentsDelta",
    "ArgumentsMalformed",
    "CallMetrics",
    "ChoiceFinished",
    "ContentDelta",
    "Event",
    "Limits",
    "ReasoningDelta",
    "RefusalDelta",
    "ResponseAccumulator",
    "StreamEnded",
    "StreamMetrics",
    "ToolCall",
    "ToolCallIncomplete",
    "ToolCallInvalid",
    "ToolCallReady",
    "ToolCallStarted",
    "trust_grammar",
    "wall_clock",
]
__all__ += [  # for the layers above only
    "CHUNK_KEYS",
    "DELTA_KEYS",
    "TOOL_CALL_KEYS",
    "Anomaly",
    "AnomalyCode",
    "CallChecks",
    "CallStatus",
    "CallStore",
    "InputFormat",
    "JSONForm",
    "Shape",
    "TrustedGrammar",
    "chat_tool_choice",
    "chat_tools",
    "json_form",
    "model_fields",
    "now",
    "parse_arguments",
    "read_format",
    "read_object",
    "requested_choice",
    "sealed_call",
    "serialisable",
    "timings_dict",
    "valid_unicode",
]
