"""Counts and timings: per call, per stream, per executed call and per loop step.

Every ``*_at`` value is a ``time.monotonic()`` instant (durations between two of them are exact,
whatever the system clock does). :data:`CLOCK_ANCHOR` is ``(time.monotonic(), time.time())`` read
together once at import; :func:`wall_clock` places an instant on the Unix time line through it. Each
class has ``as_dict()``: plain, JSON-ready data with instants as Unix time and durations in seconds.
"""

from __future__ import annotations

from .core import CLOCK_ANCHOR, CallMetrics, StreamMetrics, wall_clock
from .loop import StepTimings
from .tools import CallTimings

__all__ = ["CLOCK_ANCHOR", "CallMetrics", "CallTimings", "StepTimings", "StreamMetrics", "wall_clock"]
