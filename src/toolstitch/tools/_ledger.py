"""Ledgers: exactly one execution per call id, in memory and in a SQLite file.

A side effect must not happen twice because a request was retried, a process restarted, or two
workers got the same call. Both ledgers implement the claim protocol of :mod:`._claim` (read it
first): the executor claims a call before it runs, a duplicate waits for the winner's result and
reuses it, and a claim whose owner died is "outcome unknown" unless the tool is ``read_only``.

Entries are keyed by the call id **and** a fingerprint of the call (its name and its arguments): some
providers reuse ids (TGI and SGLang send ``"0"``, Kimi per-message ordinals; provider quirk Q39), and
a different call that merely shares an id must not be answered with another call's result.

:class:`MemoryLedger` keeps entries in memory (atomic under threads; its claims never go stale by time,
since they die with the process). :class:`SQLiteLedger` keeps them in a SQLite file (standard library
``sqlite3``, WAL mode, one ``BEGIN IMMEDIATE`` transaction per claim) that several processes may open
and use at once.
"""

from __future__ import annotations

import contextlib
import math
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from os import PathLike
from typing import Any, TypeVar

from ._claim import (
    DEFAULT_LEASE,
    Claim,
    ClaimLedger,
    LedgerEntry,
    StoredResult,
    fingerprint,
    finished_entry,
    loaded_text,
    stored_text,
)

__all__ = ["ClaimLedger", "LedgerEntry", "MemoryLedger", "SQLiteLedger", "fingerprint"]

T = TypeVar("T")


class MemoryLedger(ClaimLedger):
    """In-memory ledger: survives retries within a process, not a restart. Atomic under threads (one
    lock); a duplicate waits on a condition variable for the winner's result.

    ``scope`` separates conversations that share one ledger: a provider that sends the same id for
    the same call in two conversations (TGI's ``"0"``) must not get one conversation's result in the
    other. Give each conversation its own scope (say, its id); entries of other scopes are never used.
    """

    blocking_io = False

    def __init__(self, *, scope: str = "") -> None:
        super().__init__(scope=scope, lease=math.inf)
        self._entries: dict[tuple[str, str], LedgerEntry] = {}
        self._changed = threading.Condition(threading.Lock())

    def _mine(self, key: str, fp: str, owner: str) -> LedgerEntry | None:
        entry = self._entries.get((key, fp))
        return entry if entry is not None and entry.state == "started" and entry.owner == owner else None

    def try_claim(self, key: str, fp: str, name: str, owner: str, lease_expires: float) -> Claim:
        with self._changed:
            entry = self._entries.get((key, fp))
            if entry is not None:
                return Claim(False, entry)
            entry = LedgerEntry(
                key,
                fp,
                name,
                "started",
                time.time(),
                owner=owner,
                lease_expires=lease_expires,
                scope=self.scope,
            )
            self._entries[(key, fp)] = entry
            return Claim(True, entry)

    def take_over(self, key: str, fp: str, stale: LedgerEntry, owner: str, lease_expires: float) -> bool:
        with self._changed:
            entry = self._entries.get((key, fp))
            if (
                entry is None
                or entry.state != "started"
                or entry.owner != stale.owner
                or entry.lease_expires != stale.lease_expires
            ):
                return False
            self._entries[(key, fp)] = replace(
                entry, owner=owner, lease_expires=lease_expires, started_at=time.time()
            )
            return True

    def renew(self, claims: Sequence[tuple[str, str, str]], lease_expires: float) -> None:
        with self._changed:
            for key, fp, owner in claims:
                entry = self._mine(key, fp, owner)
                if entry is not None:
                    self._entries[(key, fp)] = replace(entry, lease_expires=lease_expires)

    def store_result(self, key: str, fp: str, owner: str, result: StoredResult) -> bool:
        with self._changed:
            entry = self._mine(key, fp, owner)
            if entry is None:
                return False
            self._entries[(key, fp)] = finished_entry(
                key, fp, entry.name, entry.started_at, time.time(), result, owner, self.scope
            )
            self._changed.notify_all()
            return True

    def drop_claim(self, key: str, fp: str, owner: str) -> None:
        with self._changed:
            if self._mine(key, fp, owner) is not None:
                del self._entries[(key, fp)]
                self._changed.notify_all()

    def expire_claim(self, key: str, fp: str, owner: str) -> None:
        with self._changed:
            entry = self._mine(key, fp, owner)
            if entry is not None:
                self._entries[(key, fp)] = replace(entry, lease_expires=0.0)
                self._changed.notify_all()

    def get(self, key: str, fp: str) -> LedgerEntry | None:
        with self._changed:
            return self._entries.get((key, fp))

    def entries(self) -> list[LedgerEntry]:
        """Every entry, oldest first."""
        with self._changed:
            return sorted(self._entries.values(), key=lambda e: e.started_at)

    def wait(self, key: str, fp: str, timeout: float | None, stop: threading.Event | None = None) -> None:
        """Block on the condition variable until the entry changes for good (or time runs out)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._changed:
            while not self.settled(self._entries.get((key, fp))):
                if stop is not None and stop.is_set():
                    return
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return
                # Bounded slices, so that a ``stop`` set from another thread is seen soon.
                self._changed.wait(0.05 if left is None else min(0.05, left))


# ----------------------------------------------------------------------------- SQLite

_SCHEMA_VERSION = 2
_COLUMNS = (
    "scope, call_key, fingerprint, name, state, owner, lease_expires, started_at, finished_at, result_json"
)
_TABLE = """
CREATE TABLE IF NOT EXISTS toolstitch_claims (
    scope          TEXT NOT NULL,
    call_key       TEXT NOT NULL,
    fingerprint    TEXT NOT NULL,
    name           TEXT NOT NULL,
    state          TEXT NOT NULL CHECK (state IN ('started', 'finished')),
    owner          TEXT,
    lease_expires  REAL,
    started_at     REAL NOT NULL,
    finished_at    REAL,
    result_json    TEXT,
    PRIMARY KEY (scope, call_key, fingerprint)
)
"""
# Version 1 (toolstitch <= 0.x) kept rows in toolstitch_calls, the scope folded into the key.
_MIGRATE_V1 = f"""
INSERT OR IGNORE INTO toolstitch_claims ({_COLUMNS})
SELECT '', call_key, fingerprint, name, state, NULL, 0.0, started_at, finished_at,
       CASE WHEN state = 'finished' THEN json_object('status', status, 'content', content,
            'error', error, 'value', CASE WHEN json_valid(value_json) THEN json(value_json) END) END
FROM toolstitch_calls
"""


def _busy(exc: sqlite3.OperationalError) -> bool:
    text = str(exc).lower()
    return "locked" in text or "busy" in text


class SQLiteLedger(ClaimLedger):
    """A ledger in a SQLite file, shared by every thread and process that opens it.

    Each claim is one ``BEGIN IMMEDIATE`` transaction (``INSERT ... ON CONFLICT DO NOTHING``, then the
    row read back), so exactly one executor wins it. Opening is safe from many processes at once: the
    busy timeout is set before anything else, the journal is switched to WAL, and the schema is made
    in one idempotent transaction; a "database is locked" is retried with backoff until
    ``busy_timeout`` seconds have passed. A claim's lease (``lease`` seconds) is renewed by a heartbeat
    while its tool runs; a SIGKILLed worker on this machine is seen at once by its pid.
    One connection, guarded by a lock, serves every thread of this object. Claims and results are
    committed with SQLite's default ``synchronous=FULL``: a claim survives a power loss, at the price
    of an fsync per claim and per result (milliseconds on a disk).
    """

    def __init__(
        self,
        path: str | PathLike[str],
        *,
        scope: str = "",
        lease: float = DEFAULT_LEASE,
        busy_timeout: float = 30.0,
    ) -> None:
        super().__init__(scope=scope, lease=lease)
        if not (isinstance(busy_timeout, (int, float)) and busy_timeout > 0) or math.isinf(busy_timeout):
            raise ValueError("busy_timeout must be a positive, finite number of seconds")
        self.path = path
        self.busy_timeout = float(busy_timeout)
        self._lock = threading.RLock()
        # timeout= installs the busy handler before the first statement runs.
        self._db = sqlite3.connect(
            path, timeout=self.busy_timeout, check_same_thread=False, isolation_level=None
        )
        try:
            self._retry(lambda: self._db.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout * 1000)}"))
            self._retry(self._set_wal)
            self._retry(self._create_schema)
        except BaseException:
            self._db.close()
            raise

    # -- connection ------------------------------------------------------------------------------

    def _retry(self, fn: Callable[[], T]) -> T:
        """Run ``fn``, again with backoff while the file is locked by another process."""
        deadline = time.monotonic() + self.busy_timeout
        delay = 0.005
        while True:
            try:
                with self._lock:
                    return fn()
            except sqlite3.OperationalError as exc:
                if not _busy(exc) or time.monotonic() + delay > deadline:
                    raise
            time.sleep(delay)
            delay = min(delay * 2, 0.2)

    def _set_wal(self) -> None:
        row = self._db.execute("PRAGMA journal_mode").fetchone()
        if row is None or str(row[0]).lower() != "wal":
            self._db.execute("PRAGMA journal_mode=WAL")

    def _create_schema(self) -> None:
        with self._transaction():
            (version,) = self._db.execute("PRAGMA user_version").fetchone()
            if version >= _SCHEMA_VERSION:
                return
            self._db.execute(_TABLE)
            old = self._db.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'toolstitch_calls'"
            ).fetchone()
            if old is not None:
                self._db.execute(_MIGRATE_V1)
            self._db.execute(f"PRAGMA user_version = {_SCHEMA_VERSION}")

    @contextlib.contextmanager
    def _transaction(self) -> Any:
        """One ``BEGIN IMMEDIATE`` write transaction (the caller holds ``self._lock``)."""
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    def _write(self, sql: str, params: Sequence[Any]) -> int:
        """One statement in its own write transaction; the number of rows it changed."""

        def run() -> int:
            with self._transaction():
                return self._db.execute(sql, params).rowcount

        return self._retry(run)

    def _where(self, key: str, fp: str) -> tuple[str, str, str]:
        return (stored_text(self.scope), stored_text(key), fp)

    # -- primitives ------------------------------------------------------------------------------

    def try_claim(self, key: str, fp: str, name: str, owner: str, lease_expires: float) -> Claim:
        def run() -> Claim:
            with self._transaction():
                inserted = self._db.execute(
                    f"INSERT INTO toolstitch_claims ({_COLUMNS})"
                    " VALUES (?, ?, ?, ?, 'started', ?, ?, ?, NULL, NULL)"
                    " ON CONFLICT (scope, call_key, fingerprint) DO NOTHING",
                    (*self._where(key, fp), stored_text(name), owner, lease_expires, time.time()),
                ).rowcount
                row = self._select(key, fp)
            return Claim(inserted == 1, None if row is None else self._entry(key, row))

        return self._retry(run)

    def take_over(self, key: str, fp: str, stale: LedgerEntry, owner: str, lease_expires: float) -> bool:
        return (
            self._write(
                "UPDATE toolstitch_claims SET owner = ?, lease_expires = ?, started_at = ?"
                " WHERE scope = ? AND call_key = ? AND fingerprint = ? AND state = 'started'"
                " AND owner IS ? AND lease_expires IS ?",
                (owner, lease_expires, time.time(), *self._where(key, fp), stale.owner, stale.lease_expires),
            )
            == 1
        )

    def renew(self, claims: Sequence[tuple[str, str, str]], lease_expires: float) -> None:
        def run() -> None:
            with self._transaction():
                for key, fp, owner in claims:
                    self._db.execute(
                        "UPDATE toolstitch_claims SET lease_expires = ? WHERE scope = ? AND call_key = ?"
                        " AND fingerprint = ? AND state = 'started' AND owner = ?",
                        (lease_expires, *self._where(key, fp), owner),
                    )

        self._retry(run)

    def store_result(self, key: str, fp: str, owner: str, result: StoredResult) -> bool:
        return (
            self._write(
                "UPDATE toolstitch_claims SET state = 'finished', finished_at = ?, result_json = ?,"
                " lease_expires = NULL WHERE scope = ? AND call_key = ? AND fingerprint = ?"
                " AND state = 'started' AND owner = ?",
                (time.time(), result.to_json(), *self._where(key, fp), owner),
            )
            == 1
        )

    def drop_claim(self, key: str, fp: str, owner: str) -> None:
        self._write(
            "DELETE FROM toolstitch_claims WHERE scope = ? AND call_key = ? AND fingerprint = ?"
            " AND state = 'started' AND owner = ?",
            (*self._where(key, fp), owner),
        )

    def expire_claim(self, key: str, fp: str, owner: str) -> None:
        self._write(
            "UPDATE toolstitch_claims SET lease_expires = 0 WHERE scope = ? AND call_key = ?"
            " AND fingerprint = ? AND state = 'started' AND owner = ?",
            (*self._where(key, fp), owner),
        )

    def _select(self, key: str, fp: str) -> tuple[Any, ...] | None:
        row: tuple[Any, ...] | None = self._db.execute(
            f"SELECT {_COLUMNS} FROM toolstitch_claims WHERE scope = ? AND call_key = ? AND fingerprint = ?",
            self._where(key, fp),
        ).fetchone()
        return row

    def get(self, key: str, fp: str) -> LedgerEntry | None:
        row = self._retry(lambda: self._select(key, fp))
        return None if row is None else self._entry(key, row)

    def entries(self) -> list[LedgerEntry]:
        """Every entry of this scope, oldest first."""
        rows = self._retry(
            lambda: self._db.execute(
                f"SELECT {_COLUMNS} FROM toolstitch_claims WHERE scope = ? ORDER BY started_at",
                (stored_text(self.scope),),
            ).fetchall()
        )
        return [self._entry(None, r) for r in rows]

    def _entry(self, key: str | None, row: tuple[Any, ...]) -> LedgerEntry:
        _scope, stored_key, fp, stored_name, state, owner, lease, started, finished, result_json = row
        key = loaded_text(stored_key) if key is None else key
        name, scope = loaded_text(stored_name), self.scope
        if state == "finished":
            result = StoredResult.from_json(result_json)
            return finished_entry(key, fp, name, started, finished, result, owner, scope)
        return LedgerEntry(key, fp, name, "started", started, owner=owner, lease_expires=lease, scope=scope)

    def close(self) -> None:
        """Stop renewing leases and close the database connection."""
        super().close()
        with self._lock:
            self._db.close()

    def __enter__(self) -> SQLiteLedger:
        return self
