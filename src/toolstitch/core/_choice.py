"""What an accumulator keeps for one choice (its own module so that the fast path's compiled twin,
bound in ``_fast.py``, can name the class without importing the accumulator)."""

from __future__ import annotations

from typing import Any

from ._call import ToolCall
from ._route import CallTable

__all__ = ["ChoiceState"]


class ChoiceState:
    """Everything accumulated for one choice."""

    __slots__ = (
        "content",
        "extra",
        "finish_reason",
        "finish_reasons",
        "first_call",
        "index",
        "logprobs_content",
        "logprobs_refusal",
        "reasoning",
        "refusal",
        "role",
        "table",
    )

    def __init__(self, index: int) -> None:
        self.index = index
        self.role: str | None = None
        self.content: list[str] = []
        self.refusal: list[str] = []
        self.reasoning: dict[str, list[str]] = {}
        self.extra: dict[str, Any] = {}
        self.logprobs_content: list[Any] | None = None
        self.logprobs_refusal: list[Any] | None = None
        self.finish_reason: str | None = None
        self.finish_reasons: list[str] = []
        self.table = CallTable()
        self.first_call: ToolCall | None = None
        """The choice's first call (by index), fixed when its calls are first sealed."""
