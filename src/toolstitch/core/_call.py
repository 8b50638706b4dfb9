"""One tool call: its buffer, its state machine, its limits and its timings.

The state machine (rule 4 of the design, "seal, check, then execute")::

    open ──seal──▶ ready       arguments parse and (when the tool is known) fit its schema
      │      └───▶ invalid     they do not; ``error`` says why and keeps the raw text
      ├──limit───▶ invalid     a Limits bound was exceeded (``LimitExceeded``), further text dropped
      └──end─────▶ incomplete  the stream ended before the call's choice got a finish_reason

A sealed call is frozen: a late non-empty fragment never changes its text; it turns the call
``invalid`` with :class:`~toolstitch.LateFragment` instead, so nothing that changed after the check
can be executed.

Argument text is kept as a list of fragments and joined once (rule 7: linear in bytes). The JSON is
parsed once, at seal, with a strict parser (rule 2).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any, Literal

from ..errors import (
    ArgumentsNotAnObject,
    CallIncomplete,
    EmptyArguments,
    LateFragment,
    LimitExceeded,
    MalformedArguments,
    MissingName,
    ToolCallError,
)
from ._anomaly import Anomaly
from ._limits import Limits
from ._scanner import JSONScanner

__all__ = ["CallMetrics", "CallStatus", "ToolCall"]

CallStatus = Literal["open", "ready", "invalid", "incomplete"]


@dataclass(slots=True)
class CallMetrics:
    """Counts and monotonic timestamps (``time.monotonic()`` seconds) for one call."""

    fragments: int = 0
    """Tool-call fragments received for this call (empty ones included)."""
    bytes: int = 0
    """UTF-8 bytes of argument text received (including text dropped after a limit)."""
    opened_at: float | None = None
    """When the call's first fragment arrived."""
    first_argument_at: float | None = None
    """When the first non-empty argument text arrived."""
    arguments_complete_at: float | None = None
    """When the scanner saw the top-level JSON value close."""
    sealed_at: float | None = None
    """When the call's choice received its finish_reason (or the call hit a limit)."""


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def parse_arguments(text: str) -> tuple[Any, ToolCallError | None]:
    """Parse argument text strictly: RFC 8259 JSON, an object at the top level, no NaN/Infinity."""
    if text == "":
        return None, EmptyArguments(
            "no argument text arrived (arguments is an empty string, not {})", raw=text
        )
    try:
        value = json.loads(text, parse_constant=_reject_constant)
    except (ValueError, RecursionError) as exc:
        pos = getattr(exc, "pos", None)
        return None, MalformedArguments(f"arguments are not valid JSON: {exc}", raw=text, position=pos)
    if not isinstance(value, dict):
        return value, ArgumentsNotAnObject(
            f"arguments must be a JSON object, got {type(value).__name__}", raw=text
        )
    return value, None


class ToolCall:
    """A tool call being assembled from fragments, then sealed and checked.

    Public attributes (read them; do not assign them):

    ``choice``     the choice index the call belongs to
    ``index``      the call's ``index`` as the provider sent it (or as assigned when it sent none)
    ``id``         the call id (first non-empty value; synthesized when the provider sent none)
    ``name``       the function name (first non-empty value)
    ``arguments``  the raw argument text exactly as received (a bounded sample after a limit)
    ``status``     ``"open"``, ``"ready"``, ``"invalid"`` or ``"incomplete"``
    ``parsed``     the parsed arguments once sealed and parsed (kept for ``invalid`` schema failures too)
    ``error``      why the call is ``invalid`` or ``incomplete``, else ``None``
    ``anomalies``  what the provider did differently for this call
    ``metrics``    counts and timings
    ``extra``      unknown provider fields sent on the call (e.g. ``extra_content``), kept for replay
    """

    __slots__ = (
        "_bytes_left",
        "_dropped",
        "_joined",
        "_parts",
        "_sample_chars",
        "anomalies",
        "chars",
        "choice",
        "error",
        "extra",
        "id",
        "index",
        "metrics",
        "name",
        "parsed",
        "scanner",
        "slot",
        "status",
        "type",
    )

    def __init__(self, choice: int, index: int, slot: int, limits: Limits) -> None:
        self.choice = choice
        self.index = index
        self.slot = slot
        """Opening order of the call within its choice (0, 1, …); distinct even when indexes repeat."""
        self.id: str | None = None
        self.name: str | None = None
        self.type: str | None = None
        self.status: CallStatus = "open"
        self.parsed: Any = None
        self.error: ToolCallError | None = None
        self.anomalies: list[Anomaly] = []
        self.metrics = CallMetrics()
        self.extra: dict[str, Any] = {}
        self.scanner = JSONScanner()
        self.chars = 0
        """Characters of argument text kept so far."""
        self._parts: list[str] = []
        self._joined: str | None = ""
        self._bytes_left = limits.max_argument_bytes
        self._sample_chars = limits.sample_chars
        self._dropped = 0

    def __repr__(self) -> str:
        return (
            f"ToolCall(choice={self.choice}, index={self.index}, id={self.id!r}, "
            f"name={self.name!r}, status={self.status!r}, arguments={self.arguments!r})"
        )

    # -- reading ---------------------------------------------------------------------------

    @property
    def arguments(self) -> str:
        """The argument text as received, joined once and cached."""
        joined = self._joined
        if joined is None:
            joined = self._joined = "".join(self._parts)
            self._parts = [joined] if joined else []
        return joined

    @property
    def sealed(self) -> bool:
        """True once the call can no longer change (``ready``, ``invalid`` or ``incomplete``)."""
        return self.status != "open"

    @property
    def ready(self) -> bool:
        """True when the call is safe to execute."""
        return self.status == "ready"

    # -- writing (used by the accumulator only) --------------------------------------------

    def append(self, text: str, now: float) -> bool:
        """Append an argument fragment. Returns False when the text was not kept."""
        metrics = self.metrics
        if not text:
            return True
        size = len(text) if text.isascii() else len(text.encode("utf-8"))
        metrics.bytes += size
        if self.status != "open":
            if self.status == "invalid" and isinstance(self.error, LimitExceeded):
                self._dropped += size
            else:
                self.reject_late(text)
            return False
        if metrics.first_argument_at is None:
            metrics.first_argument_at = now
        self._bytes_left -= size
        if self._bytes_left < 0:
            self._exceed_bytes(text, now)
            return False
        self._parts.append(text)
        self._joined = None
        self.chars += len(text)
        scanner = self.scanner
        was_complete = scanner.complete
        scanner.feed(text)
        if scanner.complete and not was_complete:
            metrics.arguments_complete_at = now
        return True

    def replace_arguments(self, text: str, now: float) -> None:
        """Replace all argument text (a provider resent the arguments whole)."""
        self._parts = []
        self._joined = ""
        self.chars = 0
        self.scanner = JSONScanner()
        self._bytes_left += self.metrics.bytes
        self.metrics.bytes = 0
        self.append(text, now)

    def _exceed_bytes(self, text: str, now: float) -> None:
        sample = (self.arguments + text)[: self._sample_chars]
        limit = self._bytes_left + self.metrics.bytes
        self._parts = [sample]
        self._joined = sample
        self.chars = len(sample)
        self.status = "invalid"
        self.metrics.sealed_at = now
        self.error = LimitExceeded(
            f"arguments exceed Limits.max_argument_bytes={limit}; kept the first {len(sample)} characters",
            raw=sample,
            limit="max_argument_bytes",
            value=limit,
        )

    def exceed_call_limit(self, limit: int, now: float) -> None:
        """Mark this call invalid because its choice already holds ``limit`` calls."""
        self.status = "invalid"
        self.metrics.sealed_at = now
        self._bytes_left = self._sample_chars  # keep no more than a sample of its text
        self.error = LimitExceeded(
            f"more than Limits.max_calls_per_choice={limit} tool calls in one choice",
            limit="max_calls_per_choice",
            value=limit,
        )

    def reject_late(self, text: str) -> None:
        """A non-empty fragment arrived after sealing: keep the text frozen, refuse the call."""
        if isinstance(self.error, LateFragment):
            self.error.raw = (self.error.raw + text)[: self._sample_chars]
            return
        self.status = "invalid"
        self.error = LateFragment(
            "a fragment arrived after the call was sealed; the sealed text was kept and the call refused",
            raw=text[: self._sample_chars],
        )

    def seal(self, now: float, empty_as_object: bool) -> None:
        """Close the call and parse its arguments. Schema checks are applied by the accumulator."""
        if self.status != "open":
            return
        self.metrics.sealed_at = now
        text = self.arguments
        if text == "" and empty_as_object:
            text = "{}"
        parsed, error = parse_arguments(text)
        self.parsed = parsed
        if error is None and not self.name:
            error = MissingName("the call was sealed without a function name", raw=text)
        if error is not None:
            self.status = "invalid"
            self.error = error
        else:
            self.status = "ready"

    def invalidate(self, error: ToolCallError) -> None:
        """Turn a sealed, parsed call invalid (used for schema and tool checks)."""
        self.status = "invalid"
        self.error = error

    def mark_incomplete(self, reason: str) -> None:
        """The stream ended (or failed) before this call was sealed."""
        if self.status == "open":
            self.status = "incomplete"
            self.error = CallIncomplete(f"{reason}; the arguments may be truncated", raw=self.arguments)


def now() -> float:
    """The clock used for every timestamp: monotonic, immune to wall-clock changes."""
    return time.monotonic()
