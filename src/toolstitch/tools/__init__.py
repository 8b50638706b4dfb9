"""Executing tool calls safely: definitions, the gate, the executor and the ledgers.

* :mod:`._definition`  ``@tool``, ``Tool`` and ``Toolbox``: tools from Python functions (pydantic).
* :mod:`._strict`      strict-mode JSON Schemas.
* :mod:`._toolbox`     ``Toolbox``: the offered tools and the threads their calls run on.
* :mod:`._runtime`     the thread pool and event-loop thread a toolbox owns.
* :mod:`._gate`        ready, then offered, then valid, then approved.
* :mod:`._approval`    ``Deny``, and the ledger's record of calls awaiting a person's approval.
* :mod:`._executor`    running admitted calls with timeouts and cancellation.
* :mod:`._claim`       the claim protocol: exactly one execution per call (every ledger implements it).
* :mod:`._ledger`      the in-memory and SQLite ledgers.
* :mod:`._postgres`    the PostgreSQL ledger, for a fleet of workers (psycopg 3, imported on use).
* :mod:`._telemetry`   OpenTelemetry spans, span events and metrics (optional: ``toolstitch[otel]``).
"""

from __future__ import annotations

from ._approval import Approval, Deny
from ._claim import Claim, ClaimLedger, StoredResult, Verdict, fingerprint
from ._definition import ConfirmCallback, Tool, tool
from ._executor import CallTimings, ErrorMessage, ToolResult, default_error_message
from ._ledger import Ledger, LedgerEntry, SQLiteLedger
from ._postgres import PostgresLedger
from ._toolbox import Toolbox

__all__ = [
    "Approval",
    "CallTimings",
    "Claim",
    "ClaimLedger",
    "ConfirmCallback",
    "Deny",
    "ErrorMessage",
    "Ledger",
    "LedgerEntry",
    "PostgresLedger",
    "SQLiteLedger",
    "StoredResult",
    "Tool",
    "ToolResult",
    "Toolbox",
    "Verdict",
    "default_error_message",
    "fingerprint",
    "tool",
]
