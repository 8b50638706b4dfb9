"""Counts and timings: per call, per stream, per executed call and per loop step."""

from __future__ import annotations

from .core._accumulator import StreamMetrics
from .core._call import CallMetrics
from .loop._run import StepTimings
from .tools._executor import CallTimings

__all__ = ["CallMetrics", "CallTimings", "StepTimings", "StreamMetrics"]
