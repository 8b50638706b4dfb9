"""A ledger in PostgreSQL: exactly one execution per call across a fleet of workers.

:class:`PostgresLedger` implements the claim protocol of :mod:`._claim` (read it first) on one table,
so that every worker of a fleet (web workers, queue consumers, machines) that shares the database
runs each call at most once, and every duplicate gets the winner's result.

The table (created on first use; ``table=`` renames it)::

    toolstitch_claims
        scope          text         the ledger's scope (one conversation, say)
        call_key       text         the call id as the history carries it
        fingerprint    text         the call's name and canonical arguments, hashed
        name           text         the tool's name
        state          text         'started' (claimed) or 'finished'
        owner          text         the claim's owner token (host:pid:nonce:nonce)
        lease_expires  timestamptz  while started: stale after this instant unless renewed
        started_at     timestamptz
        finished_at    timestamptz
        result         jsonb        once finished: {"status", "content", "error", "value"}
        PRIMARY KEY (scope, call_key, fingerprint)

and ``toolstitch_schema_versions (table_name, version, updated_at)``, which says which version of
that shape a table has, so that a later release can migrate it. Creation happens once per database,
under ``pg_advisory_xact_lock`` (many workers starting together do not race); a table made by a newer
toolstitch is refused, never guessed at.

Why it holds:

* **One statement claims.** ``INSERT ... ON CONFLICT DO NOTHING RETURNING`` either inserts this
  owner's ``started`` row (the claim is won) or reads the row that is there, in one round trip.
  Every later step is a compare-and-set on the owner token (``UPDATE ... WHERE owner = %s``), so an
  owner that lost its claim cannot finish it.
* **The database's clock decides leases.** Leases are written as ``clock_timestamp() + interval`` and
  read back as the time left, so workers whose clocks disagree still agree on which claims are stale.
* **Fail closed.** Nothing connects before the first call. When PostgreSQL cannot be reached, every
  method raises :class:`~toolstitch.errors.LedgerUnavailableError` and the executor refuses the call
  (``ledger_unavailable``): nothing runs without a claim. A connection cut by a restart is replaced
  once, at once (every statement is safe to repeat); later calls reconnect by themselves.
* **Async never blocks.** ``aexecute``/``arun`` use psycopg's ``AsyncConnection`` (or the
  ``AsyncConnectionPool`` given), one per event loop; the lease heartbeat runs in its own thread on
  the sync connection.

psycopg is imported when a ledger is made (``pip install "toolstitch[postgres]"``), so the package
imports without it.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import math
import os
import re
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from ..errors import LedgerUnavailableError
from ._claim import (
    DEFAULT_LEASE,
    Claim,
    ClaimLedger,
    LedgerEntry,
    StoredResult,
    finished_entry,
    loaded_text,
    stored_text,
)

if TYPE_CHECKING:
    import psycopg
    from psycopg_pool import AsyncConnectionPool, ConnectionPool

__all__ = ["SCHEMA_VERSION", "PostgresLedger"]

SCHEMA_VERSION = 1
"""The version of the table's shape that this release reads and writes."""

T = TypeVar("T")

_IDENTIFIER = re.compile(r"[a-z_][a-z0-9_]{0,47}")
_VERSIONS = "toolstitch_schema_versions"
_MAX_SECONDS = 1e9  # leases are clamped to about 30 years either way: no interval overflow


# A surrogate escape that is not part of a valid pair, or a NUL escape: jsonb refuses both.
_PAIR = re.compile(r"\\ud[89ab][0-9a-f]{2}\\ud[c-f][0-9a-f]{2}", re.IGNORECASE)
_UNSTORABLE = re.compile(r"\\u0000|\\ud[89a-f][0-9a-f]{2}", re.IGNORECASE)


def _result_json(result: StoredResult) -> str:
    """The result as jsonb text: the object itself, readable in SQL (``result->>'content'``), or,
    when jsonb cannot hold it (NUL or lone surrogates), ``{"status": ..., "raw": "<the JSON>"}``."""
    text = result.to_json()
    if _UNSTORABLE.search(_PAIR.sub("", text)):
        return json.dumps({"status": result.status, "raw": text}, ensure_ascii=True)
    return text


def _stored(value: Any) -> StoredResult:
    if isinstance(value, dict) and isinstance(value.get("raw"), str):
        return StoredResult.from_json(value["raw"])
    try:
        return StoredResult.from_json(json.dumps(value))
    except (TypeError, ValueError, RecursionError):
        return StoredResult.from_json(None)


def _seconds_from_now(at: float) -> float:
    """A client-clock instant as seconds from now (the database adds them to its own clock)."""
    if math.isnan(at):
        return 0.0
    return max(-_MAX_SECONDS, min(_MAX_SECONDS, at - time.time()))


def _lock_key(table: str) -> int:
    """A stable 64-bit advisory-lock key for creating ``table``."""
    digest = hashlib.sha256(f"toolstitch:{table}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def _import_psycopg() -> Any:
    try:
        import psycopg
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError('PostgresLedger needs psycopg 3: pip install "toolstitch[postgres]"') from exc
    return psycopg


class _Statements:
    """The SQL of one table (its name checked, so formatting it in is safe)."""

    def __init__(self, table: str) -> None:
        t = table
        cols = (
            "scope, call_key, fingerprint, name, state, owner,"
            " extract(epoch from started_at)::float8, extract(epoch from finished_at)::float8,"
            " extract(epoch from (lease_expires - clock_timestamp()))::float8, result"
        )
        where = "scope = %(scope)s AND call_key = %(key)s AND fingerprint = %(fp)s"
        lease = "clock_timestamp() + make_interval(secs => %(secs)s)"
        self.versions = (
            f"CREATE TABLE IF NOT EXISTS {_VERSIONS} (table_name text PRIMARY KEY,"
            " version integer NOT NULL, updated_at timestamptz NOT NULL DEFAULT now())"
        )
        self.version = f"SELECT version FROM {_VERSIONS} WHERE table_name = %s"
        self.version_exists = f"SELECT to_regclass('{_VERSIONS}') IS NOT NULL"
        self.table = (
            f"CREATE TABLE IF NOT EXISTS {t} ("
            " scope text NOT NULL,"
            " call_key text NOT NULL,"
            " fingerprint text NOT NULL,"
            " name text NOT NULL,"
            " state text NOT NULL CHECK (state IN ('started', 'finished')),"
            " owner text,"
            " lease_expires timestamptz,"
            " started_at timestamptz NOT NULL DEFAULT clock_timestamp(),"
            " finished_at timestamptz,"
            " result jsonb,"
            " PRIMARY KEY (scope, call_key, fingerprint))"
        )
        self.index = f"CREATE INDEX IF NOT EXISTS {t}_started_at_idx ON {t} (started_at)"
        self.set_version = (
            f"INSERT INTO {_VERSIONS} (table_name, version) VALUES (%s, %s)"
            " ON CONFLICT (table_name) DO UPDATE SET version = excluded.version, updated_at = now()"
        )
        # One round trip: the inserted row (won), else the row that is there.
        self.claim = (
            f"WITH ins AS (INSERT INTO {t} (scope, call_key, fingerprint, name, state, owner,"
            f" lease_expires, started_at) VALUES (%(scope)s, %(key)s, %(fp)s, %(name)s, 'started',"
            f" %(owner)s, {lease}, clock_timestamp())"
            f" ON CONFLICT (scope, call_key, fingerprint) DO NOTHING RETURNING {cols})"
            f" SELECT true, * FROM ins"
            f" UNION ALL SELECT false, {cols} FROM {t} WHERE {where} AND NOT EXISTS (SELECT 1 FROM ins)"
        )
        # Compare-and-set: still started by the stale owner, and stale in the database's eyes (its
        # lease ran out) or by the caller's knowledge (the owner's process is gone). Taking over a
        # claim this owner already holds (a repeated statement) also counts.
        self.take_over = (
            f"UPDATE {t} SET owner = %(owner)s, lease_expires = {lease}, started_at = clock_timestamp()"
            f" WHERE {where} AND state = 'started' AND (owner = %(owner)s OR (owner IS NOT DISTINCT FROM"
            f" %(stale)s AND (lease_expires IS NULL OR lease_expires <= clock_timestamp() OR %(gone)s)))"
            " RETURNING 1"
        )
        self.renew = (
            f"UPDATE {t} SET lease_expires = {lease} FROM unnest(%(keys)s::text[], %(fps)s::text[],"
            f" %(owners)s::text[]) AS c(k, f, o) WHERE {t}.scope = %(scope)s AND {t}.call_key = c.k"
            f" AND {t}.fingerprint = c.f AND {t}.owner = c.o AND {t}.state = 'started'"
        )
        self.store = (
            f"UPDATE {t} SET state = 'finished', finished_at = clock_timestamp(), result = %(result)s::jsonb,"
            f" lease_expires = NULL WHERE {where} AND owner = %(owner)s AND state = 'started' RETURNING 1"
        )
        self.stored_by = f"SELECT 1 FROM {t} WHERE {where} AND owner = %(owner)s AND state = 'finished'"
        self.drop = f"DELETE FROM {t} WHERE {where} AND owner = %(owner)s AND state = 'started'"
        self.expire = (
            f"UPDATE {t} SET lease_expires = to_timestamp(0)"
            f" WHERE {where} AND owner = %(owner)s AND state = 'started'"
        )
        self.get = f"SELECT {cols} FROM {t} WHERE {where}"
        self.entries = f"SELECT {cols} FROM {t} WHERE scope = %(scope)s ORDER BY started_at, call_key"


class PostgresLedger(ClaimLedger):
    """A ledger in PostgreSQL, shared by every worker that connects to the same database.

    ``target`` is a libpq connection string (``"postgresql://app@db/agents"``), a
    ``psycopg_pool.ConnectionPool`` or a ``psycopg_pool.AsyncConnectionPool``. With a string, the
    ledger opens one connection for sync use and one per event loop for async use, on first need.
    With a pool, it borrows the pool's connections on that side and opens its own, from the pool's
    connection string, on the other side (the lease heartbeat is a thread and always uses the sync
    side). The ledger never closes a pool it was given.

    ``scope`` separates conversations (see :class:`~toolstitch.tools.MemoryLedger`). ``lease`` is how
    long a claim lives without renewal (seconds; the owner renews it every third of that while the tool
    runs): a worker that dies holding a claim is seen after at most that long by other machines, at
    once on its own machine. ``connect_timeout`` bounds each attempt to reach the database (and
    waiting for a pool connection). ``table`` names the table (letters, digits and ``_``).
    """

    def __init__(
        self,
        target: str | ConnectionPool[Any] | AsyncConnectionPool[Any],
        *,
        scope: str = "",
        lease: float = DEFAULT_LEASE,
        table: str = "toolstitch_claims",
        connect_timeout: float = 10.0,
    ) -> None:
        super().__init__(scope=scope, lease=lease)
        if math.isinf(self.lease):
            raise ValueError("a PostgreSQL ledger needs a finite lease (its claims outlive processes)")
        if not isinstance(table, str) or not _IDENTIFIER.fullmatch(table):
            raise ValueError("table must be a plain lower-case identifier (letters, digits, _)")
        if not (isinstance(connect_timeout, (int, float)) and 0 < connect_timeout < math.inf):
            raise ValueError("connect_timeout must be a positive, finite number of seconds")
        self._pg = _import_psycopg()
        self.table = table
        self.connect_timeout = float(connect_timeout)
        self._sql = _Statements(table)
        self._pool: Any = None
        self._apool: Any = None
        self._kwargs: dict[str, Any] = {}
        if isinstance(target, str):
            self.conninfo = target
        else:
            import psycopg_pool

            if isinstance(target, psycopg_pool.ConnectionPool):
                self._pool = target
            elif isinstance(target, psycopg_pool.AsyncConnectionPool):
                self._apool = target
            else:
                raise TypeError(
                    "target must be a conninfo string, a ConnectionPool or an AsyncConnectionPool"
                )
            self.conninfo = str(target.conninfo)
            given: Any = target.kwargs
            if isinstance(given, dict):  # (kwargs made per connection by a callable are not reused)
                self._kwargs = {k: v for k, v in given.items() if k != "autocommit"}
        self._scope = stored_text(scope)
        self._ready = False
        # The sync side: one connection (or the pool), one statement at a time.
        self._lock = threading.Lock()
        self._conn: psycopg.Connection[Any] | None = None
        self._conn_pid = 0
        self._orphans: list[Any] = []  # connections inherited through fork: never touched, never freed
        # The async side: one connection and one lock per event loop.
        self._loops: dict[int, tuple[asyncio.AbstractEventLoop, _AsyncSlot]] = {}
        self._loops_lock = threading.Lock()
        self._tasks: set[asyncio.Future[Any]] = set()

    # ------------------------------------------------------------------------- sync connections

    def _connect_kwargs(self) -> dict[str, Any]:
        # libpq counts connect_timeout in whole seconds, 2 at least.
        timeout = max(2, math.ceil(self.connect_timeout))
        return {**self._kwargs, "autocommit": True, "connect_timeout": timeout}

    def _connect(self) -> psycopg.Connection[Any]:
        pg = self._pg
        conn: psycopg.Connection[Any] = pg.Connection.connect(
            self.conninfo,
            **self._connect_kwargs(),
        )
        return conn

    @contextlib.contextmanager
    def _connection(self) -> Iterator[tuple[psycopg.Connection[Any], bool]]:
        """A connection and whether it was open before (only then is a failure worth one retry)."""
        if self._pool is not None:
            with self._pool.connection(timeout=self.connect_timeout) as conn:
                yield conn, True
            return
        with self._lock:
            if self._conn is not None and self._conn_pid != os.getpid():
                self._orphans.append(self._conn)  # the parent's session: closing it would end it
                self._conn = None
            reused = self._conn is not None and not self._conn.closed
            if not reused:
                self._conn = self._connect()
                self._conn_pid = os.getpid()
            conn = self._conn
            assert conn is not None
            try:
                yield conn, reused
            except self._pg.OperationalError:
                self._conn = None
                with contextlib.suppress(Exception):
                    conn.close()
                raise

    def _call(self, fn: Callable[[psycopg.Connection[Any]], T]) -> T:
        """Run ``fn`` on a connection (the schema made first); once more on a fresh connection when
        an open one turned out dead (a restart); any failure becomes LedgerUnavailableError."""
        pg = self._pg
        for attempt in (0, 1):
            reused = False
            try:
                with self._connection() as (conn, reused):
                    if not self._ready:
                        self._ensure_schema(conn)
                    return fn(conn)
            except pg.OperationalError as exc:
                if attempt == 0 and reused and not _pool_timeout(exc):
                    continue
                raise LedgerUnavailableError(f"PostgreSQL could not be reached: {_brief(exc)}") from exc
            except pg.Error as exc:
                self._forget_schema(exc)
                raise LedgerUnavailableError(
                    f"PostgreSQL refused the ledger's statement: {_brief(exc)}"
                ) from exc
        raise AssertionError("unreachable")  # pragma: no cover

    def _ensure_schema(self, conn: psycopg.Connection[Any]) -> None:
        sql = self._sql

        def value(statement: str, params: Sequence[Any] = ()) -> Any:
            row = conn.execute(statement, params).fetchone()
            return None if row is None else row[0]

        with conn.transaction():
            exists = value(sql.version_exists)
            version = value(sql.version, (self.table,)) if exists else None
            if version is None or version < SCHEMA_VERSION:
                # Many workers may start at once: one creates, the others wait, then read.
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (_lock_key(self.table),))
                conn.execute(sql.versions)
                version = value(sql.version, (self.table,))
                if version is None:
                    conn.execute(sql.table)
                    conn.execute(sql.index)
                    conn.execute(sql.set_version, (self.table, SCHEMA_VERSION))
                    version = SCHEMA_VERSION
        self._check_version(int(version))
        self._ready = True

    def _check_version(self, version: int) -> None:
        if version > SCHEMA_VERSION:
            raise LedgerUnavailableError(
                f"the table {self.table} has schema version {version}, made by a newer toolstitch "
                f"(this one reads version {SCHEMA_VERSION}): upgrade toolstitch"
            )

    def _forget_schema(self, exc: BaseException) -> None:
        if isinstance(exc, self._pg.errors.UndefinedTable):
            self._ready = False  # dropped behind our back: made again on the next call

    # ------------------------------------------------------------------------- async connections

    def _slot(self) -> _AsyncSlot:
        loop = asyncio.get_running_loop()
        with self._loops_lock:
            for key, (other, slot) in list(self._loops.items()):
                if other.is_closed():  # a finished asyncio.run(): its connection goes with it
                    slot.discard()
                    del self._loops[key]
            found = self._loops.get(id(loop))
            if found is None or found[0] is not loop:
                found = (loop, _AsyncSlot())
                self._loops[id(loop)] = found
            return found[1]

    async def _aconnect(self) -> psycopg.AsyncConnection[Any]:
        pg = self._pg
        conn: psycopg.AsyncConnection[Any] = await pg.AsyncConnection.connect(
            self.conninfo,
            **self._connect_kwargs(),
        )
        return conn

    @contextlib.asynccontextmanager
    async def _aconnection(self) -> AsyncIterator[tuple[psycopg.AsyncConnection[Any], bool]]:
        if self._apool is not None:
            async with self._apool.connection(timeout=self.connect_timeout) as conn:
                yield conn, True
            return
        slot = self._slot()
        async with slot.lock:
            reused = slot.conn is not None and not slot.conn.closed
            if not reused:
                slot.conn = await asyncio.wait_for(self._aconnect(), self.connect_timeout + 1)
            conn = slot.conn
            assert conn is not None
            try:
                yield conn, reused
            except self._pg.OperationalError:
                slot.discard()
                raise

    async def _acall(self, fn: Callable[[psycopg.AsyncConnection[Any]], Awaitable[T]]) -> T:
        """The async :meth:`_call`."""
        pg = self._pg
        for attempt in (0, 1):
            reused = False
            try:
                async with self._aconnection() as (conn, reused):
                    if not self._ready:
                        await self._aensure_schema(conn)
                    return await fn(conn)
            except pg.OperationalError as exc:
                if attempt == 0 and reused and not _pool_timeout(exc):
                    continue
                raise LedgerUnavailableError(f"PostgreSQL could not be reached: {_brief(exc)}") from exc
            except (pg.Error, TimeoutError) as exc:
                self._forget_schema(exc)
                raise LedgerUnavailableError(f"PostgreSQL could not be used: {_brief(exc)}") from exc
        raise AssertionError("unreachable")  # pragma: no cover

    async def _aensure_schema(self, conn: psycopg.AsyncConnection[Any]) -> None:
        sql = self._sql

        async def value(statement: str, params: Sequence[Any] = ()) -> Any:
            row = await (await conn.execute(statement, params)).fetchone()
            return None if row is None else row[0]

        async with conn.transaction():
            exists = await value(sql.version_exists)
            version = await value(sql.version, (self.table,)) if exists else None
            if version is None or version < SCHEMA_VERSION:
                await conn.execute("SELECT pg_advisory_xact_lock(%s)", (_lock_key(self.table),))
                await conn.execute(sql.versions)
                version = await value(sql.version, (self.table,))
                if version is None:
                    await conn.execute(sql.table)
                    await conn.execute(sql.index)
                    await conn.execute(sql.set_version, (self.table, SCHEMA_VERSION))
                    version = SCHEMA_VERSION
        self._check_version(int(version))
        self._ready = True

    # ------------------------------------------------------------------------- rows

    def _params(self, key: str, fp: str, **more: Any) -> dict[str, Any]:
        return {"scope": self._scope, "key": stored_text(key), "fp": fp, **more}

    def _entry(self, key: str | None, row: Sequence[Any]) -> LedgerEntry:
        _scope, stored_key, fp, name, state, owner, started, finished, lease_left, result = row
        key = loaded_text(stored_key) if key is None else key
        name = loaded_text(name)
        if state == "finished":
            return finished_entry(key, fp, name, started, finished, _stored(result), owner, self.scope)
        # The lease as an instant on this machine's clock (the database counted the time left).
        lease = None if lease_left is None else time.time() + lease_left
        return LedgerEntry(
            key, fp, name, "started", started, owner=owner, lease_expires=lease, scope=self.scope
        )

    def _claim_from(self, key: str, owner: str, row: Sequence[Any] | None) -> Claim:
        if row is None:
            return Claim(False, None)
        entry = self._entry(key, row[1:])
        # A repeated statement (after a lost connection) finds its own row: that is a win too.
        won = bool(row[0]) or (entry.state == "started" and entry.owner == owner)
        return Claim(won, entry)

    # ------------------------------------------------------------------------- sync primitives

    def try_claim(self, key: str, fp: str, name: str, owner: str, lease_expires: float) -> Claim:
        secs = _seconds_from_now(lease_expires)
        params = self._params(key, fp, name=stored_text(name), owner=owner, secs=secs)
        row = self._call(lambda c: c.execute(self._sql.claim, params).fetchone())
        return self._claim_from(key, owner, row)

    def take_over(self, key: str, fp: str, stale: LedgerEntry, owner: str, lease_expires: float) -> bool:
        params = self._take_over_params(key, fp, stale, owner, lease_expires)
        return self._call(lambda c: c.execute(self._sql.take_over, params).fetchone()) is not None

    def _take_over_params(
        self, key: str, fp: str, stale: LedgerEntry, owner: str, lease_expires: float
    ) -> dict[str, Any]:
        # Judged stale here with time left on its lease: its owner's process is known to be gone.
        gone = stale.lease_expires is not None and stale.lease_expires > time.time()
        secs = _seconds_from_now(lease_expires)
        return self._params(key, fp, owner=owner, stale=stale.owner, gone=gone, secs=secs)

    def _renew_params(self, claims: Sequence[tuple[str, str, str]], lease_expires: float) -> dict[str, Any]:
        return {
            "scope": self._scope,
            "keys": [stored_text(k) for k, _, _ in claims],
            "fps": [f for _, f, _ in claims],
            "owners": [o for _, _, o in claims],
            "secs": _seconds_from_now(lease_expires),
        }

    def renew(self, claims: Sequence[tuple[str, str, str]], lease_expires: float) -> None:
        if claims:
            params = self._renew_params(claims, lease_expires)
            self._call(lambda c: c.execute(self._sql.renew, params))

    def store_result(self, key: str, fp: str, owner: str, result: StoredResult) -> bool:
        params = self._params(key, fp, owner=owner, result=_result_json(result))

        def run(c: psycopg.Connection[Any]) -> bool:
            if c.execute(self._sql.store, params).fetchone() is not None:
                return True
            return c.execute(self._sql.stored_by, params).fetchone() is not None  # repeated statement

        return self._call(run)

    def drop_claim(self, key: str, fp: str, owner: str) -> None:
        params = self._params(key, fp, owner=owner)
        self._call(lambda c: c.execute(self._sql.drop, params))

    def expire_claim(self, key: str, fp: str, owner: str) -> None:
        params = self._params(key, fp, owner=owner)
        self._call(lambda c: c.execute(self._sql.expire, params))

    def get(self, key: str, fp: str) -> LedgerEntry | None:
        params = self._params(key, fp)
        row = self._call(lambda c: c.execute(self._sql.get, params).fetchone())
        return None if row is None else self._entry(key, row)

    def entries(self) -> list[LedgerEntry]:
        """Every entry of this scope, oldest first."""
        rows = self._call(lambda c: c.execute(self._sql.entries, {"scope": self._scope}).fetchall())
        return [self._entry(None, r) for r in rows]

    # ------------------------------------------------------------------------- async primitives

    async def atry_claim(self, key: str, fp: str, name: str, owner: str, lease_expires: float) -> Claim:
        """The async :meth:`try_claim`."""
        secs = _seconds_from_now(lease_expires)
        params = self._params(key, fp, name=stored_text(name), owner=owner, secs=secs)

        async def run(c: psycopg.AsyncConnection[Any]) -> Any:
            return await (await c.execute(self._sql.claim, params)).fetchone()

        return self._claim_from(key, owner, await self._acall(run))

    async def atake_over(
        self, key: str, fp: str, stale: LedgerEntry, owner: str, lease_expires: float
    ) -> bool:
        """The async :meth:`take_over`."""
        params = self._take_over_params(key, fp, stale, owner, lease_expires)

        async def run(c: psycopg.AsyncConnection[Any]) -> Any:
            return await (await c.execute(self._sql.take_over, params)).fetchone()

        return await self._acall(run) is not None

    async def aget(self, key: str, fp: str) -> LedgerEntry | None:
        """The async :meth:`get`."""
        params = self._params(key, fp)

        async def run(c: psycopg.AsyncConnection[Any]) -> Any:
            return await (await c.execute(self._sql.get, params)).fetchone()

        row = await self._acall(run)
        return None if row is None else self._entry(key, row)

    def _release_won(self, key: str, fp: str, owner: str) -> None:
        """A claim won for a caller cancelled meanwhile is released on the async connection (the
        inherited ``aacquire`` drives the shared claim plan, ``_acquire_plan`` in
        ``tools/_claim.py``, over this ledger's async primitives)."""
        self._keep(asyncio.ensure_future(self.arelease(key, fp, owner)))

    def _keep(self, task: asyncio.Future[Any]) -> None:
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        task.add_done_callback(lambda t: t.cancelled() or t.exception())  # retrieved: no warning

    async def afinish(self, key: str, fp: str, owner: str, result: StoredResult) -> bool:
        """:meth:`finish` on the async connection."""
        params = self._params(key, fp, owner=owner, result=_result_json(result))

        async def run(c: psycopg.AsyncConnection[Any]) -> bool:
            if await (await c.execute(self._sql.store, params)).fetchone() is not None:
                return True
            return await (await c.execute(self._sql.stored_by, params)).fetchone() is not None

        try:
            return await self._acall(run)
        finally:
            self._unhold(key, fp, owner)

    async def arelease(self, key: str, fp: str, owner: str) -> None:
        """:meth:`release` on the async connection."""
        await self._alet_go(self._sql.drop, key, fp, owner)

    async def aabandon(self, key: str, fp: str, owner: str) -> None:
        """:meth:`abandon` on the async connection."""
        await self._alet_go(self._sql.expire, key, fp, owner)

    async def _alet_go(self, statement: str, key: str, fp: str, owner: str) -> None:
        """The owner lets its claim go on the async connection (``statement``: dropped or expired);
        it no longer holds it here, whatever the connection answers."""
        params = self._params(key, fp, owner=owner)
        try:
            await self._acall(lambda c: c.execute(statement, params))
        finally:
            self._unhold(key, fp, owner)

    # ------------------------------------------------------------------------- housekeeping

    def purge(self, older_than: float, *, all_scopes: bool = False) -> int:
        """Delete finished entries that finished more than ``older_than`` seconds ago (this scope, or
        every scope); the number deleted. Claims still ``started`` are kept: a stale one is the
        only trace that its call's outcome is unknown. A purged call that is sent again runs again,
        so keep entries for longer than a conversation can be resumed."""
        if not (isinstance(older_than, (int, float)) and older_than >= 0) or math.isinf(older_than):
            raise ValueError("older_than must be a finite number of seconds, 0 or more")
        scope = "" if all_scopes else "scope = %(scope)s AND "
        statement = (
            f"DELETE FROM {self.table} WHERE {scope}state = 'finished'"
            " AND finished_at < clock_timestamp() - make_interval(secs => %(secs)s)"
        )
        params = {"scope": self._scope, "secs": float(older_than)}
        return int(self._call(lambda c: c.execute(statement, params).rowcount))

    def close(self) -> None:
        """Stop renewing leases; close the connections this ledger opened (never a pool it was
        given). Async connections of a running loop are better closed with :meth:`aclose`."""
        super().close()
        with self._lock:
            conn, self._conn = self._conn, None
        if conn is not None and self._conn_pid == os.getpid():
            with contextlib.suppress(Exception):
                conn.close()
        with self._loops_lock:
            slots = [slot for _, slot in self._loops.values()]
            self._loops.clear()
        for slot in slots:
            slot.discard()

    async def aclose(self) -> None:
        """:meth:`close`, closing this loop's async connection properly first."""
        with contextlib.suppress(RuntimeError):
            slot = self._slot()
            async with slot.lock:
                conn, slot.conn = slot.conn, None
                if conn is not None:
                    with contextlib.suppress(Exception):
                        await conn.close()
        self.close()

    def __enter__(self) -> PostgresLedger:
        return self

    async def __aenter__(self) -> PostgresLedger:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"PostgresLedger(table={self.table!r}, scope={self.scope!r}, lease={self.lease:g})"


class _AsyncSlot:
    """One event loop's connection and the lock that keeps its statements one at a time."""

    __slots__ = ("conn", "lock")

    def __init__(self) -> None:
        self.conn: psycopg.AsyncConnection[Any] | None = None
        self.lock = asyncio.Lock()

    def discard(self) -> None:
        """Drop the connection without its event loop (closing the socket needs no loop)."""
        conn, self.conn = self.conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.pgconn.finish()


def _pool_timeout(exc: BaseException) -> bool:
    """No pool connection came in time: trying again would only wait as long again."""
    return type(exc).__name__ in ("PoolTimeout", "TooManyRequests")


def _brief(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 300 else text[:300] + "…"
