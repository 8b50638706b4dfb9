"""Approvals: what a confirmation callback (or a person, later) answers, and the ledger's record of
calls that wait for one.

A ``confirm=True`` tool runs only after a yes. The answer comes from the toolbox's callback, or, when
there is none, from a person later: ``ts.run`` then returns ``stop_reason == "awaiting_approval"``
and a later ``ts.run(..., approvals={call_id: True or ts.Deny("why")})`` resumes, maybe in another
process. Only ``True`` itself is a yes (fail closed: ``1``, ``"yes"`` or ``None`` are not);
``False`` is a no with a generic reason; ``Deny("reason")`` is a no whose reason the model reads.

**The record of a deferred call.** A person approves what they were shown. So that a history edited
between the deferral and the approval (other arguments under the same call id) cannot run, the run
that defers a call records it in the ledger, as a finished entry under the key
``awaiting-approval:<call id>`` holding the call's :func:`~toolstitch.tools.fingerprint` (its name
and canonical arguments). An approval is accepted only for a call whose record exists in the ledger
passed to the resuming run and whose fingerprint is unchanged, and that holds for *every* call of
the history carrying the approved id: an id is what a person approved by, so a history carrying one
id twice (a changed copy beside the original) is refused before anything runs. The record uses the
claim protocol's own primitives, so every ledger (in memory, SQLite, PostgreSQL) keeps it without a
schema change.

**Without a ledger, within one process.** A run given no ``ledger=`` keeps its records in a fresh
in-memory ledger of its own. So that ``ts.run(..., approvals=...)`` works without one too, a run
given no ledger that stops awaiting approval leaves that ledger with :func:`remember_ledger`,
keyed by a digest of the whole history it returns; a later run of the same process, given no ledger
and that very history, takes it back (:func:`remembered_ledger`). Never one ledger shared by every
run: providers reuse call ids (``call_0``), and an unrelated run must never be answered from, or
deduplicated against, another's records. Two runs that return the same history cannot be told
apart, so such a history finds neither ledger (fail closed). At most :data:`REMEMBERED` ledgers are
kept, the least recently used forgotten first. What is not found (another process, a forgotten
ledger) is refused with the fix: pass the same ``ledger=`` to the run that asked and to the run that
answers.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any, Final, TypeAlias

from ._claim import ClaimLedger, StoredResult, fingerprint

if TYPE_CHECKING:
    from ..core import ToolCall

__all__ = [
    "REMEMBERED",
    "Approval",
    "Deny",
    "approval_problems",
    "check_record",
    "duplicate_ids",
    "record_key",
    "record_waiting",
    "remember_ledger",
    "remembered_ledger",
    "validated_approvals",
]


@dataclass(frozen=True, slots=True)
class Deny:
    """A "no" with a reason the model reads: ``ts.Deny("the budget is 100 EUR; ask for less")``.

    Return it from a confirmation callback, or give it in ``ts.run(..., approvals={call_id:
    ts.Deny("...")})``. The call does not run; its tool message says it was not approved, and why.
    """

    reason: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.reason, str):
            object.__setattr__(self, "reason", str(self.reason))


Approval: TypeAlias = "bool | Deny"
"""What a confirmation callback returns and what ``approvals`` maps call ids to."""

_RECORD_FP = "awaiting-approval"
_RECORD_STATUS = "awaiting_approval"


def record_key(key: str) -> str:
    """The ledger key of the record that call ``key`` awaits approval."""
    return f"awaiting-approval:{key}"


def record_waiting(ledger: ClaimLedger, key: str, call: ToolCall) -> None:
    """Record that ``call`` (history id ``key``) awaits approval, with its fingerprint. The first
    record of a key stays: a later, edited copy of the history cannot overwrite it."""
    fp = fingerprint(call)
    stored = StoredResult(_RECORD_STATUS, fp, None, {"fingerprint": fp, "name": call.name})
    ledger.record_finished(record_key(key), _RECORD_FP, stored)


def check_record(ledger: ClaimLedger, key: str, call: ToolCall) -> str | None:
    """None when the ledger recorded exactly this call as awaiting approval, else what is wrong."""
    entry = ledger.get(record_key(key), _RECORD_FP)
    if entry is None or entry.state != "finished" or entry.status != _RECORD_STATUS:
        return (
            f"{key!r}: the ledger has no record that this call awaits approval. Pass the same ledger= "
            "(and scope) to the run that asked and to the run that answers: ts.SQLiteLedger or "
            "ts.PostgresLedger across processes, ts.MemoryLedger within one (a run given no ledger "
            "keeps its record in this process's memory only, for the history it returned, unchanged)"
        )
    value = entry.value if isinstance(entry.value, dict) else {}
    if value.get("fingerprint") != fingerprint(call):
        return (
            f"{key!r}: the call's name or arguments in the history differ from the call that awaited "
            "approval; it is not run"
        )
    return None


def validated_approvals(approvals: Any) -> tuple[dict[str, Approval], list[str]]:
    """``approvals`` as ``{call id: True | Deny}`` (``False`` becomes a ``Deny`` with a generic
    reason), and the problems of the entries that are none of those."""
    if approvals is None:
        return {}, []
    if not isinstance(approvals, Mapping):
        got = type(approvals).__name__
        return {}, [f"approvals must be a mapping of call ids to True, False or ts.Deny, got {got}"]
    out: dict[str, Approval] = {}
    problems: list[str] = []
    for key, value in list(approvals.items()):
        if not isinstance(key, str) or not key:
            problems.append(f"{key!r}: a call id must be a non-empty str")
        elif value is True or isinstance(value, Deny):
            out[key] = value
        elif value is False:
            out[key] = Deny("")
        else:
            problems.append(
                f"{key!r}: an approval must be True, False or ts.Deny(reason), got {type(value).__name__}"
            )
    return out, problems


def duplicate_ids(keys: Iterable[str]) -> list[str]:
    """The ids that ``keys`` holds more than once, in the order they first repeat."""
    seen: set[str] = set()
    repeated: list[str] = []
    for key in keys:
        if key in seen and key not in repeated:
            repeated.append(key)
        seen.add(key)
    return repeated


def approval_problems(
    approvals: Mapping[str, Approval],
    unanswered: Sequence[tuple[str, ToolCall]],
    needs_approval: Callable[[ToolCall], bool],
    ledger: ClaimLedger,
    duplicates: Sequence[str] = (),
) -> list[str]:
    """What is wrong with ``approvals`` for the unanswered calls of the history (``(history id,
    call)`` pairs): every approval must name one of them, and *every* call carrying an approved id
    must be one whose tool needs approval and that the ledger recorded, unchanged, as awaiting it.

    Each call is checked, not each id: a history edited to hold a changed copy of an approved call
    under the same id must not run the copy because the original beside it matches the record.
    ``duplicates`` (ids the history's last assistant message carries twice or more) are refused
    outright: which of two calls a person approved cannot be told from an id they share.
    """
    problems = [
        f"{key!r}: the history carries this call id more than once; an approval cannot tell the "
        "calls apart, so none is run"
        for key in duplicates
    ]
    keys = {key for key, _ in unanswered}
    for key in approvals:
        if key not in keys:
            problems.append(f"{key!r}: no unanswered call of the history has this id")
    for key, call in unanswered:
        if key not in approvals:
            continue
        if call.status == "incomplete":
            problems.append(
                f"{key!r}: the history's item for this call never completed (its status says so); "
                "it is not run"
            )
            continue
        if not needs_approval(call):
            problems.append(
                f"{key!r}: this call does not await approval (its tool needs none, or is unknown)"
            )
            continue
        try:
            problem = check_record(ledger, key, call)
        except Exception as exc:  # a ledger that cannot be read: nothing is approved
            problem = f"{key!r}: the ledger could not be read ({type(exc).__name__})"
        if problem is not None and problem not in problems:
            problems.append(problem)
    return problems


# ----------------------------------------------------------------------------- runs given no ledger

REMEMBERED = 256
"""How many ledgers of runs given no ledger, awaiting approval, a process keeps (least recently
used forgotten first)."""


class _Ambiguous(Enum):
    """What is kept for a history that two runs, with two ledgers, left: neither is handed out."""

    AMBIGUOUS = "ambiguous"


_AMBIGUOUS: Final = _Ambiguous.AMBIGUOUS
_remembered: OrderedDict[str, ClaimLedger | _Ambiguous] = OrderedDict()
_remembered_lock = threading.Lock()


def _history_key(history: Sequence[Any]) -> str | None:
    """A digest of ``history`` as JSON (keys sorted): the same for the history a run returned and
    for that history stored as JSON and read back. None when it is not JSON (it is then never
    remembered, and its approvals are refused with the fix)."""
    try:
        text = json.dumps(list(history), sort_keys=True, ensure_ascii=True, separators=(",", ":"))
    except Exception:  # not JSON, nested too deep, a hostile value: not remembered
        return None
    return hashlib.sha256(text.encode()).hexdigest()


def remember_ledger(history: Sequence[Any], ledger: ClaimLedger) -> None:
    """A run given no ledger stopped awaiting approval with ``history``: keep its ``ledger`` for
    the run that answers (:func:`remembered_ledger`). Another ledger already kept for the same
    history makes it ambiguous: neither is handed out."""
    key = _history_key(history)
    if key is None:
        return
    with _remembered_lock:
        kept = _remembered.get(key)
        _remembered[key] = ledger if kept is None or kept is ledger else _AMBIGUOUS
        _remembered.move_to_end(key)
        while len(_remembered) > REMEMBERED:
            _remembered.popitem(last=False)


def remembered_ledger(history: Sequence[Any]) -> ClaimLedger | None:
    """The ledger a run given no ledger left with exactly this ``history`` (see
    :func:`remember_ledger`), or None: none, forgotten, or two runs left the same history."""
    key = _history_key(history)
    if key is None:
        return None
    with _remembered_lock:
        kept = _remembered.get(key)
        if kept is None or kept is _AMBIGUOUS:
            return None
        _remembered.move_to_end(key)
        return kept
