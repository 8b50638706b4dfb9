"""The claim protocol: exactly one execution per call, across threads, processes and machines.

Rule 11 of docs/design.md. Before a call runs, its executor **claims** it on a ledger; only the winner of
the claim runs the tool. The protocol is written once, here, as the abstract base class
:class:`ClaimLedger`; a backend (in memory, SQLite, PostgreSQL, ...) implements seven small *atomic
primitives* and inherits every decision, so all backends behave alike.

The entry of one call
=====================

A call is identified by ``(scope, key, fingerprint)``: the ledger's ``scope`` (one conversation, say),
the call's id as the history carries it, and :func:`fingerprint` (its name and canonical arguments;
some providers reuse ids, quirk Q39). Its entry is in one of two states:

``started``   claimed by ``owner`` (an opaque token, :func:`new_owner`: host, pid, a per-process nonce
              and a per-claim nonce) whose lease runs until ``lease_expires`` (wall-clock seconds).
              The owner renews the lease while the tool runs (a heartbeat thread, every third of
              the lease).
``finished``  the tool ran to an outcome (``ok``, ``error`` or ``timeout``); the stored result
              (:class:`StoredResult`: status, the model-facing text, the value) is JSON.

A ``started`` entry is **stale** when its lease expired, or when its owner runs on this host and its
process is gone (checked with ``kill(pid, 0)``, so a SIGKILLed worker is seen at once, without
waiting for the lease). See :meth:`ClaimLedger.is_stale`.

The decision (:meth:`ClaimLedger.acquire`, never blocking)
==========================================================

1. ``try_claim``: one atomic insert-if-absent of a ``started`` entry owned by a fresh token. Inserted:
   **run** (this executor owns the claim). Otherwise the existing entry decides:
2. ``finished``: **reuse** its stored result (the result is marked ``reused``); the tool does not run.
3. ``started`` and stale: for a tool that is not ``read_only`` the outcome is **unknown**: it may
   have had its effect, so it is never run a second time. A ``read_only`` tool may run again: the
   executor takes the claim over with ``take_over`` (compare-and-set on the stale owner and lease,
   so two executors cannot both take it over) and **runs**.
4. ``started`` and live: **wait**. The duplicate waits (:meth:`ClaimLedger.wait`: a condition
   variable in memory, polling with backoff elsewhere; bounded by the tool's timeout) until the entry
   is finished, stale or gone, then decides again from step 1. A wait that runs out of time gives an
   "in progress elsewhere" result; the duplicate never runs the tool.

After **run**, the owner ends its claim in exactly one of three ways:

* ``finish`` (``store_result``): the tool ran to an outcome, an error and a timeout included (a side
  effect may have happened). Only the claim's owner can finish it.
* ``release`` (``drop_claim``): the tool never started (refused at approval, cancelled in the pool
  queue, out of time before a worker was free). The entry is deleted, so a waiting duplicate or a
  retry claims it afresh and runs it.
* ``abandon`` (``expire_claim``): the tool started and its outcome will never be known (the batch was
  interrupted, an async tool was cancelled). The lease is set to zero: the entry is stale at once.

What a backend implements
=========================

Each primitive is one atomic step (one transaction, or one statement such as
``INSERT ... ON CONFLICT DO NOTHING RETURNING``), scoped to ``self.scope``:

``try_claim(key, fp, name, owner, lease_expires) -> Claim``   insert-if-absent, then read back
``take_over(key, fp, stale, owner, lease_expires) -> bool``   CAS: still ``started`` by ``stale.owner``
                                                               with ``stale.lease_expires``
``renew(claims, lease_expires)``                               for each ``(key, fp, owner)`` still
                                                               ``started`` by that owner
``store_result(key, fp, owner, result) -> bool``               ``started`` by owner -> ``finished``
``drop_claim(key, fp, owner)``                                 delete if ``started`` by owner
``expire_claim(key, fp, owner)``                               lease := 0 if ``started`` by owner
``get(key, fp) -> LedgerEntry | None``;  ``entries()``;  ``close()``

The decision of :meth:`ClaimLedger.acquire` is written once, sans I/O (``_acquire_plan`` yields
the primitive it needs next); ``acquire`` drives it with the sync primitives and ``aacquire`` with
their async twins ``atry_claim``, ``atake_over`` and ``aget``. Those, and ``afinish``, ``arelease``,
``aabandon`` and ``await_change``, run the sync primitive in a worker thread by default
(``blocking_io = True``) or inline (``False``, the in-memory ledger); a backend with an async driver
overrides the async primitives, and inherits the decision, so that the event loop never blocks.
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import hashlib
import json
import math
import os
import socket
import threading
import time
import uuid
from collections.abc import Generator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from ..core import ToolCall

__all__ = [
    "Claim",
    "ClaimLedger",
    "LedgerEntry",
    "StoredResult",
    "Verdict",
    "fingerprint",
    "fingerprint_of",
    "new_owner",
]

_Step = tuple[str, tuple[Any, ...]]  # a primitive the decision needs: (its name, its arguments)

DEFAULT_LEASE = 30.0
"""Seconds a claim lives without renewal; the owner renews it every third of that while the tool runs."""


# ----------------------------------------------------------------------------- identities


def _utf8(text: str) -> bytes:
    # surrogatepass: a lone surrogate (valid JSON \udc80 parses to one) must neither raise nor be
    # merged with another text; it is encoded as its own three bytes.
    return text.encode("utf-8", "surrogatepass")


def fingerprint(call: ToolCall) -> str:
    """A digest of the call's name and arguments (canonical JSON when they parsed, else the raw text).

    Never raises: lone surrogates, non-JSON values and odd names all hash to a stable digest.
    """
    return fingerprint_of(call.name, call.parsed, call.arguments)


def fingerprint_of(name: Any, parsed: Any, arguments: Any) -> str:
    """:func:`fingerprint` of a call named ``name`` whose ``arguments`` parsed to ``parsed`` (None:
    they did not); an eager start takes it before its call is sealed, with what the seal will parse."""
    body: str
    try:
        if parsed is not None:
            body = json.dumps(parsed, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
        else:
            body = str(arguments)
    except (TypeError, ValueError, RecursionError):
        body = str(arguments)
    name = name if isinstance(name, str) else ""
    return hashlib.sha256(_utf8(name) + b"\0" + _utf8(body)).hexdigest()[:32]


_HOST = socket.gethostname()
_process: tuple[int, str] | None = None
_process_lock = threading.Lock()


def _after_fork() -> None:
    # The child is another owner; a lock another thread held at the fork would never be released.
    global _process, _process_lock
    _process, _process_lock = None, threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)


def _process_token() -> str:
    """``host:pid:nonce`` of this process (a new nonce after a fork: the child is another owner).

    Made once under a lock: two threads that raced to make it would each sign claims with their own
    nonce, and :func:`_owner_gone` would then take the loser's live claims for a dead process's
    (outcome unknown for a call that is still running).
    """
    global _process
    pid = os.getpid()
    current = _process
    if current is None or current[0] != pid:
        with _process_lock:
            current = _process
            if current is None or current[0] != pid:
                current = _process = (pid, uuid.uuid4().hex[:12])
    return f"{_HOST}:{pid}:{current[1]}"


def new_owner() -> str:
    """A fresh owner token for one claim: ``host:pid:process-nonce:claim-nonce``."""
    return f"{_process_token()}:{uuid.uuid4().hex[:12]}"


def _owner_gone(owner: str | None) -> bool:
    """Whether the owner's process is known to be gone (only decidable on its own host)."""
    if not owner:
        return True
    parts = owner.rsplit(":", 3)  # host:pid:process-nonce:claim-nonce
    if len(parts) != 4:
        return False
    host, pid_text, nonce = parts[0], parts[1], parts[2]
    if host != _HOST or not pid_text.isascii() or not pid_text.isdigit() or len(pid_text) > 9:
        return False
    pid = int(pid_text)
    if pid == os.getpid():
        return not _process_token().endswith(":" + nonce)  # an earlier process with the same pid
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except (PermissionError, OSError):
        return False
    try:  # a killed child that was not reaped yet is a zombie: gone all the same
        with open(f"/proc/{pid}/stat", "rb") as f:
            state = f.read().rsplit(b")", 1)[-1].split()[:1]
        return state == [b"Z"]
    except OSError:
        return False


# ----------------------------------------------------------------------------- records


def _jsonable(value: Any) -> Any:
    from pydantic_core import to_jsonable_python

    try:
        return to_jsonable_python(value, fallback=str)
    except Exception:
        return str(value) if value is not None else None


@dataclass(frozen=True, slots=True)
class StoredResult:
    """What a finished entry keeps: the result's status, the model-facing text, the error, the value."""

    status: str
    content: str
    error: str | None = None
    value: Any = None

    def to_json(self) -> str:
        """Pure-ASCII JSON (lone surrogates escaped, so every backend can store it)."""
        data = {"status": self.status, "content": self.content, "error": self.error}
        try:
            return json.dumps({**data, "value": _jsonable(self.value)}, ensure_ascii=True)
        except (TypeError, ValueError, RecursionError):
            return json.dumps({**data, "value": None}, ensure_ascii=True)

    @classmethod
    def from_json(cls, text: str | bytes | None) -> StoredResult:
        """The inverse of :meth:`to_json`; anything unreadable is an ``error`` result."""
        try:
            data = json.loads(text) if text is not None else None
        except (TypeError, ValueError, RecursionError):
            data = None
        if not isinstance(data, dict):
            return cls("error", "Error: the recorded result of this call could not be read.")
        content = data.get("content")
        error = data.get("error")
        return cls(
            str(data.get("status") or "error"),
            content if isinstance(content, str) else "",
            error if isinstance(error, str) else None,
            data.get("value"),
        )


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
    owner: str | None = None
    """The token of the executor that holds (or held) the claim."""
    lease_expires: float | None = None
    """While ``started``: the claim is stale after this instant unless renewed."""
    scope: str = ""

    @property
    def result(self) -> StoredResult | None:
        """The stored result of a finished entry."""
        if self.state != "finished":
            return None
        return StoredResult(self.status or "error", self.content or "", self.error, self.value)


def finished_entry(
    key: str,
    fp: str,
    name: str,
    started_at: float,
    finished_at: float | None,
    result: StoredResult,
    owner: str | None = None,
    scope: str = "",
) -> LedgerEntry:
    """A ``finished`` entry carrying ``result`` (for backends)."""
    return LedgerEntry(
        key,
        fp,
        name,
        "finished",
        started_at,
        finished_at,
        result.status,
        result.content,
        result.error,
        result.value,
        owner,
        None,
        scope,
    )


@dataclass(frozen=True, slots=True)
class Claim:
    """What one ``try_claim`` saw: ``won`` (this owner's entry was inserted), and the entry as read back
    in the same transaction (None only if it vanished in between)."""

    won: bool
    entry: LedgerEntry | None


@dataclass(frozen=True, slots=True)
class Verdict:
    """What :meth:`ClaimLedger.acquire` decided for one call.

    ``run``      this executor owns the claim (``owner``): run the tool, then finish, release or abandon
    ``reuse``    the call finished elsewhere: ``entry`` holds its result
    ``unknown``  the call started elsewhere and its owner died: never run a side effect again
    ``wait``     the call is running elsewhere: wait for a change, then acquire again
    """

    action: Literal["run", "reuse", "unknown", "wait"]
    owner: str | None = None
    entry: LedgerEntry | None = None


# ----------------------------------------------------------------------------- the protocol


class ClaimLedger(abc.ABC):
    """The claim protocol (see the module docs); subclasses implement the atomic primitives.

    ``scope`` separates conversations that share one ledger: a provider that sends the same id for
    the same call in two conversations (TGI's ``"0"``) must not get one conversation's result in the
    other. ``lease`` is how long a claim lives without renewal (seconds; ``math.inf``: never stale by
    time, as for a ledger that dies with its process).
    """

    blocking_io: bool = True
    """The primitives do I/O: the async twins run them in a worker thread."""

    def __init__(self, *, scope: str = "", lease: float = DEFAULT_LEASE) -> None:
        if not isinstance(scope, str):
            raise TypeError("scope must be a str")
        if not (isinstance(lease, (int, float)) and lease > 0) or math.isnan(lease):
            raise ValueError("lease must be a positive number of seconds")
        self.scope = scope
        self.lease = float(lease)
        self._held: dict[tuple[str, str, str], None] = {}
        self._held_lock = threading.Lock()
        self._heartbeat: threading.Thread | None = None
        self._closed = threading.Event()

    # -- primitives (each one atomic) ------------------------------------------------------------

    @abc.abstractmethod
    def try_claim(self, key: str, fp: str, name: str, owner: str, lease_expires: float) -> Claim:
        """Insert a ``started`` entry owned by ``owner`` unless one exists; read the entry back."""

    @abc.abstractmethod
    def take_over(self, key: str, fp: str, stale: LedgerEntry, owner: str, lease_expires: float) -> bool:
        """Give a stale claim to ``owner`` if it is still ``started`` by ``stale.owner`` with
        ``stale.lease_expires`` (compare-and-set). True when ``owner`` now holds it."""

    @abc.abstractmethod
    def renew(self, claims: Sequence[tuple[str, str, str]], lease_expires: float) -> None:
        """Extend the lease of each ``(key, fp, owner)`` still ``started`` by that owner."""

    @abc.abstractmethod
    def store_result(self, key: str, fp: str, owner: str, result: StoredResult) -> bool:
        """``started`` by ``owner`` -> ``finished`` with ``result``; False if ``owner`` lost the claim."""

    @abc.abstractmethod
    def drop_claim(self, key: str, fp: str, owner: str) -> None:
        """Delete the entry if it is still ``started`` by ``owner`` (the call never started)."""

    @abc.abstractmethod
    def expire_claim(self, key: str, fp: str, owner: str) -> None:
        """Set the lease of the entry ``started`` by ``owner`` to 0: stale at once, outcome unknown."""

    @abc.abstractmethod
    def get(self, key: str, fp: str) -> LedgerEntry | None:
        """The entry of this call in this scope, or None."""

    @abc.abstractmethod
    def entries(self) -> list[LedgerEntry]:
        """Every entry of this scope, oldest first."""

    def close(self) -> None:
        """Stop renewing leases (subclasses also release their connections)."""
        self._closed.set()

    # -- decisions (shared by every backend) ---------------------------------------------------

    def is_stale(self, entry: LedgerEntry, at: float | None = None) -> bool:
        """A ``started`` entry whose lease expired or whose owner's process is gone."""
        if entry.state != "started":
            return False
        at = time.time() if at is None else at
        if entry.lease_expires is None or entry.lease_expires <= at:
            return True
        return _owner_gone(entry.owner)

    def _acquire_plan(self, key: str, fp: str, name: str, read_only: bool) -> Generator[_Step, Any, Verdict]:
        """The decision of :meth:`acquire`, written once, sans I/O: it yields each primitive it needs
        (``(name, arguments)``) and is sent the answer. :meth:`acquire` answers with the sync
        primitives, :meth:`aacquire` with their async twins."""
        for _ in range(16):  # each turn is a race lost to another executor; a few are plenty
            owner = new_owner()
            claim: Claim = yield ("try_claim", (key, fp, name, owner, self._expiry()))
            if claim.won:
                self._hold(key, fp, owner)
                return Verdict("run", owner, claim.entry)
            entry = claim.entry
            if entry is None:
                continue  # released between the insert and the read: claim again
            if entry.state == "finished":
                return Verdict("reuse", None, entry)
            if not self.is_stale(entry):
                return Verdict("wait", None, entry)
            if not read_only:
                return Verdict("unknown", None, entry)
            if (yield ("take_over", (key, fp, entry, owner, self._expiry()))):
                self._hold(key, fp, owner)
                return Verdict("run", owner, entry)
        latest: LedgerEntry | None = yield ("get", (key, fp))
        return Verdict("wait", None, latest)

    def acquire(self, key: str, fp: str, name: str, *, read_only: bool) -> Verdict:
        """Decide, without blocking, what this executor does with the call (see the module docs)."""
        plan = self._acquire_plan(key, fp, name, read_only)
        answer: Any = None
        try:
            while True:
                op, args = plan.send(answer)
                answer = getattr(self, op)(*args)
        except StopIteration as done:
            verdict: Verdict = done.value
            return verdict

    def finish(self, key: str, fp: str, owner: str, result: StoredResult) -> bool:
        """The tool ran to an outcome: record it (only the owner can)."""
        try:
            return self.store_result(key, fp, owner, result)
        finally:
            self._unhold(key, fp, owner)

    def release(self, key: str, fp: str, owner: str) -> None:
        """The tool never started: forget the claim, so that it can be claimed again."""
        try:
            self.drop_claim(key, fp, owner)
        finally:
            self._unhold(key, fp, owner)

    def abandon(self, key: str, fp: str, owner: str) -> None:
        """The tool started and its outcome will never be known: the claim is stale at once."""
        try:
            self.expire_claim(key, fp, owner)
        finally:
            self._unhold(key, fp, owner)

    def settled(self, entry: LedgerEntry | None) -> bool:
        """Whether waiting on this entry is over (gone, finished or stale)."""
        return entry is None or entry.state == "finished" or self.is_stale(entry)

    def wait(self, key: str, fp: str, timeout: float | None, stop: threading.Event | None = None) -> None:
        """Block until the entry is gone, finished or stale, ``timeout`` passed, or ``stop`` is set.

        Polls :meth:`get` with backoff (5 ms doubling to 250 ms); in-process backends override it
        with a condition variable.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        delay = 0.005
        while not self.settled(self.get(key, fp)):
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return
            pause = delay if left is None else min(delay, left)
            if stop is not None:
                if stop.wait(pause):
                    return
            else:
                time.sleep(pause)
            delay = min(delay * 2, 0.25)

    # -- async twins ----------------------------------------------------------------------------

    async def _io(self, fn: Any, *args: Any) -> Any:
        if not self.blocking_io:
            return fn(*args)
        return await asyncio.to_thread(fn, *args)

    async def atry_claim(self, key: str, fp: str, name: str, owner: str, lease_expires: float) -> Claim:
        """:meth:`try_claim` for the event loop (override with an async driver)."""
        claim: Claim = await self._io(self.try_claim, key, fp, name, owner, lease_expires)
        return claim

    async def atake_over(
        self, key: str, fp: str, stale: LedgerEntry, owner: str, lease_expires: float
    ) -> bool:
        """:meth:`take_over` for the event loop (override with an async driver)."""
        return bool(await self._io(self.take_over, key, fp, stale, owner, lease_expires))

    async def aget(self, key: str, fp: str) -> LedgerEntry | None:
        """:meth:`get` for the event loop (override with an async driver)."""
        entry: LedgerEntry | None = await self._io(self.get, key, fp)
        return entry

    async def _adecide(self, key: str, fp: str, name: str, read_only: bool) -> Verdict:
        plan = self._acquire_plan(key, fp, name, read_only)
        answer: Any = None
        try:
            while True:
                op, args = plan.send(answer)
                answer = await getattr(self, "a" + op)(*args)
        except StopIteration as done:
            verdict: Verdict = done.value
            return verdict

    async def aacquire(self, key: str, fp: str, name: str, *, read_only: bool) -> Verdict:
        """:meth:`acquire` on the async primitives (``atry_claim``, ``atake_over``, ``aget``). A claim
        won by a caller that was cancelled meanwhile is released (the tool never started:
        :meth:`_release_won`)."""
        if not self.blocking_io:
            return self.acquire(key, fp, name, read_only=read_only)
        future = asyncio.ensure_future(self._adecide(key, fp, name, read_only))
        try:
            return await asyncio.shield(future)
        except asyncio.CancelledError:

            def undo(done: asyncio.Future[Verdict]) -> None:
                if not done.cancelled() and done.exception() is None:
                    verdict = done.result()
                    if verdict.action == "run" and verdict.owner is not None:
                        self._release_won(key, fp, verdict.owner)

            future.add_done_callback(undo)
            raise

    def _release_won(self, key: str, fp: str, owner: str) -> None:
        """Release a claim :meth:`aacquire` won for a caller cancelled meanwhile, from the done
        callback of its decision (so it must not block for long, nor raise)."""
        with contextlib.suppress(Exception):
            self.release(key, fp, owner)

    async def afinish(self, key: str, fp: str, owner: str, result: StoredResult) -> bool:
        """:meth:`finish` without blocking the event loop."""
        return bool(await self._io(self.finish, key, fp, owner, result))

    async def arelease(self, key: str, fp: str, owner: str) -> None:
        """:meth:`release` without blocking the event loop."""
        await self._io(self.release, key, fp, owner)

    async def aabandon(self, key: str, fp: str, owner: str) -> None:
        """:meth:`abandon` without blocking the event loop."""
        await self._io(self.abandon, key, fp, owner)

    async def await_change(self, key: str, fp: str, timeout: float | None) -> None:
        """The async :meth:`wait`: polls the entry (``aget``) with backoff (5 ms doubling to 250 ms),
        sleeping on the event loop, until it is finished, stale or gone, or ``timeout`` passed."""
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        delay = 0.005
        while not self.settled(await self.aget(key, fp)):
            left = None if deadline is None else deadline - loop.time()
            if left is not None and left <= 0:
                return
            await asyncio.sleep(delay if left is None else min(delay, left))
            delay = min(delay * 2, 0.25)

    # -- compatibility -------------------------------------------------------------------------

    def lookup(self, key: str, fp: str) -> LedgerEntry | None:
        """The entry of this call, or None when it never started (same as :meth:`get`)."""
        return self.get(key, fp)

    def record_started(self, key: str, fp: str, name: str) -> None:
        """Record that the call started under an owner that is gone (no lease): a retry of a tool that
        is not ``read_only`` gets "outcome unknown". Kept for migrations and tests; executors
        :meth:`acquire` instead."""
        claim = self.try_claim(key, fp, name, "", 0.0)
        if not claim.won and claim.entry is not None and claim.entry.state == "started":
            self.expire_claim(key, fp, claim.entry.owner or "")

    def record_finished(self, key: str, fp: str, result: Any) -> None:
        """Record the outcome of a call, whoever holds its claim (kept for compatibility: executors
        :meth:`finish` their own claims). ``result`` is a ``ToolResult`` or a :class:`StoredResult`."""
        stored = result if isinstance(result, StoredResult) else stored_result(result)
        name = getattr(getattr(result, "call", None), "name", None)
        owner = new_owner()
        claim = self.try_claim(key, fp, name if isinstance(name, str) else "", owner, self._expiry())
        if not claim.won:
            if claim.entry is None or claim.entry.state == "finished":
                return
            if not self.take_over(key, fp, claim.entry, owner, self._expiry()):
                return
        self.store_result(key, fp, owner, stored)

    # -- leases ----------------------------------------------------------------------------------

    def _expiry(self) -> float:
        return math.inf if math.isinf(self.lease) else time.time() + self.lease

    def _hold(self, key: str, fp: str, owner: str) -> None:
        if math.isinf(self.lease):
            return
        with self._held_lock:
            self._held[(key, fp, owner)] = None
            if self._heartbeat is None or not self._heartbeat.is_alive():
                self._heartbeat = threading.Thread(
                    target=self._beat, name="toolstitch-ledger-heartbeat", daemon=True
                )
                self._heartbeat.start()

    def _unhold(self, key: str, fp: str, owner: str) -> None:
        with self._held_lock:
            self._held.pop((key, fp, owner), None)

    def _beat(self) -> None:
        """Renew the leases of the claims this ledger holds, every third of the lease."""
        while not self._closed.wait(self.lease / 3):
            with self._held_lock:
                held = list(self._held)
                if not held:
                    self._heartbeat = None
                    return
            with contextlib.suppress(Exception):  # a missed beat only shortens the lease
                self.renew(held, self._expiry())

    def __enter__(self) -> ClaimLedger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def stored_result(result: Any) -> StoredResult:
    """The part of a ``ToolResult`` that a ledger keeps."""
    status = getattr(result, "status", "error")
    content = getattr(result, "content", "")
    error = getattr(result, "error", None)
    return StoredResult(
        status if isinstance(status, str) else "error",
        content if isinstance(content, str) else str(content),
        error if isinstance(error, str) else None,
        getattr(result, "value", None),
    )


def stored_text(value: str) -> str:
    """Text as a database can bind and store it, one-to-one (the SQLite and PostgreSQL ledgers).

    Neither holds a lone surrogate (hostile call ids and names, a scope made from one), and
    PostgreSQL's text holds no NUL: such text, and text that starts with a double quote, is stored as
    its JSON form, which always starts with a quote, so that two different texts never share a
    stored form. :func:`loaded_text` reads it back.
    """
    if not value.startswith('"') and "\x00" not in value:
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            pass
        else:
            return value
    return json.dumps(value, ensure_ascii=True)


def loaded_text(stored: str) -> str:
    """The text :func:`stored_text` stored."""
    if stored.startswith('"'):
        with contextlib.suppress(ValueError):
            value = json.loads(stored)
            if isinstance(value, str):
                return value
    return stored
