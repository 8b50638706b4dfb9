"""Idempotency by call id: a ledger of started and finished tool calls.

A side effect must not happen twice because a request was retried or a process restarted. The
executor asks the ledger before running a call: a call that already *finished* is not run again, its
recorded result is reused; a call that *started* and never finished may have taken effect, so it is
only run again when its tool is ``read_only``.

Entries are keyed by the call id **and** a fingerprint of the call (its name and its arguments): some
providers reuse ids (TGI and SGLang send ``"0"``, Kimi per-message ordinals; provider quirk Q39), and
a different call that merely shares an id must not be answered with another call's result.

:class:`Ledger` keeps entries in memory; :class:`SQLiteLedger` keeps them in a SQLite file (standard
library ``sqlite3``) for runs that must survive a restart.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
from dataclasses import dataclass
from os import PathLike
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from ..core._call import ToolCall
    from ._executor import ToolResult

__all__ = ["Ledger", "LedgerEntry", "SQLiteLedger", "fingerprint"]


def fingerprint(call: ToolCall) -> str:
    """A digest of the call's name and arguments (canonical JSON when they parsed, else the raw text)."""
    if call.parsed is not None:
        try:
            body = json.dumps(call.parsed, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        except (TypeError, ValueError):
            body = call.arguments
    else:
        body = call.arguments
    return hashlib.sha256(f"{call.name or ''}\0{body}".encode()).hexdigest()[:32]


@dataclass(frozen=True, slots=True)
class LedgerEntry:
    """What the ledger knows about one call. Times are wall-clock seconds (``time.time()``), since
    entries may outlive the process."""

    key: str
    fingerprint: str
    name: str
    state: Literal["started", "finished"]
    started_at: float
    finished_at: float | None = None
    status: str | None = None
    """The result's status (``"ok"``, ``"error"``, ``"timeout"`` …) once finished."""
    content: str | None = None
    """The text the model was given."""
    error: str | None = None
    value: Any = None
    """The tool's return value (after a restart: decoded from JSON)."""


class Ledger:
    """In-memory ledger: survives retries within a process, not a restart. Thread-safe.

    ``scope`` separates conversations that share one ledger: a provider that sends the same id for
    the same call in two conversations (TGI's ``"0"``) must not get one conversation's result in the
    other. Give each conversation its own scope (say, its id); entries of other scopes are never used.
    """

    def __init__(self, *, scope: str = "") -> None:
        self._entries: dict[tuple[str, str], LedgerEntry] = {}
        self._lock = threading.Lock()
        self.scope = scope

    def _scoped(self, key: str) -> str:
        return f"{self.scope}\x1f{key}" if self.scope else key

    def lookup(self, key: str, fp: str) -> LedgerEntry | None:
        """The entry of this call, or None when it never started."""
        key = self._scoped(key)
        with self._lock:
            return self._entries.get((key, fp))

    def record_started(self, key: str, fp: str, name: str) -> None:
        """The call is about to run."""
        key = self._scoped(key)
        entry = LedgerEntry(key, fp, name, "started", time.time())
        with self._lock:
            self._entries[(key, fp)] = entry

    def record_finished(self, key: str, fp: str, result: ToolResult) -> None:
        """The call ran to an outcome (success, error, or timeout): it must not run again."""
        key = self._scoped(key)
        with self._lock:
            previous = self._entries.get((key, fp))
            started = previous.started_at if previous is not None else time.time()
            self._entries[(key, fp)] = LedgerEntry(
                key,
                fp,
                result.call.name or "",
                "finished",
                started,
                time.time(),
                result.status,
                result.content,
                result.error,
                result.value,
            )

    def entries(self) -> list[LedgerEntry]:
        """Every entry, oldest first."""
        with self._lock:
            return sorted(self._entries.values(), key=lambda e: e.started_at)

    def close(self) -> None:
        """Nothing to release for the in-memory ledger."""


_SCHEMA = """
CREATE TABLE IF NOT EXISTS toolstitch_calls (
    call_key     TEXT NOT NULL,
    fingerprint  TEXT NOT NULL,
    name         TEXT NOT NULL,
    state        TEXT NOT NULL CHECK (state IN ('started', 'finished')),
    started_at   REAL NOT NULL,
    finished_at  REAL,
    status       TEXT,
    content      TEXT,
    error        TEXT,
    value_json   TEXT,
    PRIMARY KEY (call_key, fingerprint)
)
"""


def _value_json(value: Any) -> str | None:
    from pydantic_core import to_json

    try:
        return to_json(value, fallback=str).decode()
    except Exception:
        return None


class SQLiteLedger(Ledger):
    """A ledger in a SQLite file: a run restarted with the same file does not repeat finished calls.

    Every record is committed before the call runs (``started``) and after it ends (``finished``), so
    a crash in between leaves a ``started`` entry: that call is not run again unless its tool is
    ``read_only``. One connection, guarded by a lock, serves every thread.
    """

    def __init__(self, path: str | PathLike[str], *, scope: str = "") -> None:
        super().__init__(scope=scope)
        self.path = path
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute(_SCHEMA)

    def lookup(self, key: str, fp: str) -> LedgerEntry | None:
        key = self._scoped(key)
        with self._lock:
            row = self._db.execute(
                "SELECT call_key, fingerprint, name, state, started_at, finished_at, status, content, "
                "error, value_json FROM toolstitch_calls WHERE call_key = ? AND fingerprint = ?",
                (key, fp),
            ).fetchone()
        return None if row is None else _entry(row)

    def record_started(self, key: str, fp: str, name: str) -> None:
        key = self._scoped(key)
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO toolstitch_calls (call_key, fingerprint, name, state, started_at) "
                "VALUES (?, ?, ?, 'started', ?)",
                (key, fp, name, time.time()),
            )

    def record_finished(self, key: str, fp: str, result: ToolResult) -> None:
        key = self._scoped(key)
        now = time.time()
        with self._lock:
            self._db.execute(
                "INSERT INTO toolstitch_calls (call_key, fingerprint, name, state, started_at, finished_at,"
                " status, content, error, value_json) VALUES (?, ?, ?, 'finished', ?, ?, ?, ?, ?, ?)"
                " ON CONFLICT (call_key, fingerprint) DO UPDATE SET state = 'finished',"
                " finished_at = excluded.finished_at, status = excluded.status, content = excluded.content,"
                " error = excluded.error, value_json = excluded.value_json",
                (
                    key,
                    fp,
                    result.call.name or "",
                    now,
                    now,
                    result.status,
                    result.content,
                    result.error,
                    _value_json(result.value),
                ),
            )

    def entries(self) -> list[LedgerEntry]:
        with self._lock:
            rows = self._db.execute(
                "SELECT call_key, fingerprint, name, state, started_at, finished_at, status, content, "
                "error, value_json FROM toolstitch_calls ORDER BY started_at"
            ).fetchall()
        return [_entry(r) for r in rows]

    def close(self) -> None:
        """Close the database connection."""
        with self._lock:
            self._db.close()

    def __enter__(self) -> SQLiteLedger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _entry(row: tuple[Any, ...]) -> LedgerEntry:
    key, fp, name, state, started, finished, status, content, error, value_json = row
    value = None
    if value_json is not None:
        try:
            value = json.loads(value_json)
        except ValueError:
            value = value_json
    return LedgerEntry(key, fp, name, state, started, finished, status, content, error, value)
