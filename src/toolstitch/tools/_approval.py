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
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeAlias

from ._claim import ClaimLedger, StoredResult, fingerprint

if TYPE_CHECKING:
    from ..core import ToolCall

__all__ = [
    "Approval",
    "Deny",
    "approval_problems",
    "check_record",
    "duplicate_ids",
    "record_key",
    "record_waiting",
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
            f"{key!r}: this ledger has no record that the call awaits approval (pass the ledger, and "
            "scope, of the run that returned it)"
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
