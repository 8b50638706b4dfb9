"""Executing tool calls safely: definitions, the gate, the executor and the ledgers.

* :mod:`._definition`  ``@tool``, ``Tool`` and ``Toolbox``: tools from Python functions (pydantic).
* :mod:`._strict`      strict-mode JSON Schemas.
* :mod:`._toolbox`     ``Toolbox``: the offered tools and the threads their calls run on.
* :mod:`._runtime`     the thread pool and event-loop thread a toolbox owns.
* :mod:`._workers`     the pool sync tools run on: bounded, and it lets go of a thread past its timeout.
* :mod:`._process`     worker processes for ``isolation="process"`` tools, killed at their timeout.
* :mod:`._gate`        ready, then offered, then valid, then approved.
* :mod:`._approval`    ``Deny``, and the ledger's record of calls awaiting a person's approval.
* :mod:`._cancel`      ``CancelToken``: how a sync tool learns its result is no longer wanted.
* :mod:`._executor`    running admitted calls with timeouts and cancellation.
* :mod:`._claim`       the claim protocol: exactly one execution per call (every ledger implements it).
* :mod:`._ledger`      the in-memory (``MemoryLedger``) and SQLite ledgers.
* :mod:`._postgres`    the PostgreSQL ledger, for a fleet of workers (psycopg 3, imported on use).
* :mod:`._mcp`        MCP servers (``stdio``, ``http``), what their annotations may decide, what the
  model reads of a result.
* :mod:`._mcp_session`  one MCP server's session per toolbox: opened once, reused, opened again.
* :mod:`._mcp_tools`  the tools of a toolbox's MCP servers, made from their lists, through the one door.
* :mod:`._telemetry`   OpenTelemetry spans, span events and metrics (optional: ``toolstitch[otel]``).
* :mod:`._twins`       sync and async twins with one signature (``async_twin_of``, ``bound``): here,
  the lowest layer that has twins, so that the loop above shares it through this ``__init__``.

Besides what users meet, ``__all__`` holds what the loop drives this package through (``execute`` and
``aexecute``, early starts, the gate, the approval records, the telemetry observer, the twins); none of
those is a top-level name of ``toolstitch``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._renamed import renamed
from ._approval import (
    Approval,
    Deny,
    approval_problems,
    duplicate_ids,
    record_waiting,
    remember_ledger,
    remembered_ledger,
    validated_approvals,
)
from ._cache import ResultCache, cache_for, cached, canonical_key
from ._cancel import CancelToken
from ._claim import Claim, ClaimLedger, StoredResult, Verdict, fingerprint
from ._definition import ConfirmCallback, Tool, tool
from ._executor import (
    CallTimings,
    EagerStarts,
    ErrorMessage,
    Started,
    ToolResult,
    aexecute,
    default_error_message,
    execute,
)
from ._gate import Admission, admit, check_arguments
from ._ledger import LedgerEntry, MemoryLedger, SQLiteLedger
from ._mcp import MCPServer, http, stdio
from ._postgres import PostgresLedger
from ._telemetry import StreamObserver, call_event, chat_span, current, stage_event
from ._toolbox import Toolbox
from ._twins import async_twin_of, bound

__all__ = [  # the names users meet (toolstitch or a public module hands them out)
    "CallTimings",
    "Deny",
    "MCPServer",
    "MemoryLedger",
    "PostgresLedger",
    "SQLiteLedger",
    "Tool",
    "ToolResult",
    "Toolbox",
    "http",
    "stdio",
    "tool",
]
__all__ += [  # for the layers above only
    "Admission",
    "Approval",
    "CancelToken",
    "Claim",
    "ClaimLedger",
    "ConfirmCallback",
    "EagerStarts",
    "ErrorMessage",
    "LedgerEntry",
    "ResultCache",
    "Started",
    "StoredResult",
    "StreamObserver",
    "Verdict",
    "admit",
    "aexecute",
    "approval_problems",
    "async_twin_of",
    "bound",
    "cache_for",
    "cached",
    "call_event",
    "canonical_key",
    "chat_span",
    "check_arguments",
    "current",
    "default_error_message",
    "duplicate_ids",
    "execute",
    "fingerprint",
    "record_waiting",
    "remember_ledger",
    "remembered_ledger",
    "stage_event",
    "validated_approvals",
]

if TYPE_CHECKING:  # type checkers see the old name with its type; at run time __getattr__ warns
    Ledger = MemoryLedger


__getattr__ = renamed("toolstitch.tools", {"Ledger": "MemoryLedger"}, globals())
"""``Ledger`` (the first name of ``MemoryLedger``) resolves for one release, with a warning."""
