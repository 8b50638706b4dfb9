"""What a repair reports: one :class:`RepairChange` per change, and what is left.

Shared by the two repairs (:mod:`._repair` for chat histories, :mod:`._repair_input` for a
Responses ``input`` list), so that both give the same report.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ._validate import HistoryProblem

__all__ = ["NOT_EXECUTED", "Action", "RepairChange", "RepairReport"]

Action = Literal["dropped", "moved", "reordered", "inserted", "rewrote_id", "fixed"]

#: The content of the tool message :func:`repair_history` inserts for a call that has no result.
NOT_EXECUTED = "Error: not executed. No result was recorded for this tool call; do not assume it ran."


@dataclass(frozen=True)
class RepairChange:
    """One change :func:`repair_history` made. ``index`` is the message's position in the input
    (``None`` for an inserted message), ``new_index`` in the output (``None`` when dropped)."""

    action: Action
    rule: str
    index: int | None
    new_index: int | None
    detail: str

    def __str__(self) -> str:
        old = "new" if self.index is None else f"#{self.index}"
        new = "dropped" if self.new_index is None else f"#{self.new_index}"
        return f"{old} -> {new} {self.rule} {self.action}: {self.detail}"


@dataclass(frozen=True)
class RepairReport:
    """Every change made, and the problems left that repair cannot fix without inventing facts
    (bad function names or arguments, Mistral's role order, ...)."""

    changes: tuple[RepairChange, ...] = ()
    remaining: tuple[HistoryProblem, ...] = ()

    @property
    def changed(self) -> bool:
        return bool(self.changes)

    @property
    def ok(self) -> bool:
        """True when the repaired history has no errors left (warnings may remain)."""
        return not any(p.severity == "error" for p in self.remaining)

    def __str__(self) -> str:
        lines = [str(c) for c in self.changes] or ["no changes"]
        lines += [f"remaining: {p}" for p in self.remaining]
        return "\n".join(lines)
