"""The one clock of every timestamp toolstitch records, and its anchor on the Unix time line.

Every layer stamps instants with :func:`now` (monotonic, so durations survive wall-clock changes) and
turns them into Unix time only when it hands data out (:func:`wall_clock`, :func:`timings_dict`). It
lives in its own module, re-exported by :mod:`toolstitch.core`, so that the layers above share it
through the core's ``__init__`` rather than through the call buffer that first needed it.
"""

from __future__ import annotations

import time
from typing import Any

__all__ = ["CLOCK_ANCHOR", "now", "timings_dict", "wall_clock"]


def now() -> float:
    """The clock used for every timestamp: monotonic, immune to wall-clock changes."""
    return time.monotonic()


CLOCK_ANCHOR: tuple[float, float] = (time.monotonic(), time.time())
"""The wall-clock anchor of every timestamp: ``(now(), time.time())`` read together once, when
toolstitch was imported. Every ``*_at`` value toolstitch records is a :func:`now` instant (monotonic,
so durations survive clock changes); ``wall_clock`` places one on the Unix time line."""


def wall_clock(instant: float) -> float:
    """The Unix time (``time.time()`` seconds) of a :func:`now` instant, through
    :data:`CLOCK_ANCHOR`: exact relative to the anchor; as right as the system clock was then."""
    mono, wall = CLOCK_ANCHOR
    return wall + (instant - mono)


def timings_dict(values: dict[str, Any]) -> dict[str, Any]:
    """``values`` with every ``*_at`` instant (a :func:`now` value) as Unix time: the shape of every
    ``as_dict()`` of the metrics and timings classes."""
    return {
        k: (wall_clock(v) if k.endswith("_at") and isinstance(v, int | float) else v)
        for k, v in values.items()
    }
