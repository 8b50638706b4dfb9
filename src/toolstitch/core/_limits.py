"""Bounds that keep one misbehaving stream from exhausting memory.

Defaults are generous enough for agents that write whole files through a tool call, and small enough
that a runaway or hostile stream is stopped long before it hurts the process.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Limits"]


@dataclass(frozen=True, slots=True)
class Limits:
    """Per-stream bounds. Exceeding one makes the offending call ``invalid`` with ``LimitExceeded``.

    The stream keeps flowing; only a bounded sample (``sample_chars``) of the call's text is kept.
    """

    max_argument_bytes: int = 4 * 1024 * 1024
    """UTF-8 bytes of argument text for one call."""
    max_calls_per_choice: int = 128
    """Tool calls in one choice (OpenAI accepts at most 128 tools per request)."""
    sample_chars: int = 2048
    """How much of an oversized call's text is kept for diagnosis."""

    def __post_init__(self) -> None:
        for name in ("max_argument_bytes", "max_calls_per_choice", "sample_chars"):
            if getattr(self, name) < 0:
                raise ValueError(f"Limits.{name} must be >= 0")
