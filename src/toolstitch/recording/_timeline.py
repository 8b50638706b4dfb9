"""The timeline model: where each tool call's fragments arrived, chunk by chunk.

The accumulator keeps a few timestamps per call (first fragment, first argument, completion,
sealing) and no per-fragment list: the hot path stays lean (rule 7). A timeline is built
afterwards, by replaying a recording: :class:`TimelineBuilder` watches the accumulator after each
re-fed chunk and notes, at that chunk's recorded time, which calls received fragments and which
changed state. A raw ``.sse`` body has no timing, so its timeline counts chunks instead of
milliseconds (``unit == "chunk"``).

The reports that draw it live beside it: ``_report_text`` (terminal), ``_report_html`` (one
self-contained page) and ``_report_data`` (the JSON report both are written from).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from ..core._call import ToolCall
from ..core._events import ContentDelta, Event, ReasoningDelta, RefusalDelta

if TYPE_CHECKING:
    from ..core._accumulator import Accumulator

__all__ = ["CallTrack", "Fragment", "Timeline", "TimelineBuilder", "Unit"]

Unit = Literal["ms", "chunk"]


@dataclass(frozen=True, slots=True)
class Fragment:
    """Tool-call fragments that arrived in one chunk: when, how many, how many argument bytes."""

    at: float
    count: int
    bytes: int


@dataclass(slots=True)
class CallTrack:
    """One call over time; positions are milliseconds since the request (or chunk numbers)."""

    call: ToolCall
    opened: float
    first_argument: float | None = None
    complete: float | None = None
    sealed: float | None = None
    fragments: list[Fragment] = field(default_factory=list)
    _seen: tuple[int, int] = (0, 0)


@dataclass(slots=True)
class Timeline:
    """Every chunk's position, content arrivals, and a track per tool call."""

    unit: Unit
    chunks: list[float] = field(default_factory=list)
    content: list[float] = field(default_factory=list)
    calls: list[CallTrack] = field(default_factory=list)
    end: float | None = None

    @property
    def first_chunk(self) -> float | None:
        return self.chunks[0] if self.chunks else None

    @property
    def first_tool_call(self) -> float | None:
        return min((t.opened for t in self.calls), default=None)

    @property
    def multi_choice(self) -> bool:
        """Do calls of more than one choice appear (then labels name the choice)?"""
        return len({t.call.choice for t in self.calls}) > 1

    @property
    def span(self) -> float:
        """The position the drawing ends at (never zero)."""
        last = max([0.0, *self.chunks, *(t.sealed or 0.0 for t in self.calls)])
        if self.end is not None:
            last = max(last, self.end)
        return last if last > 0 else 1.0


class TimelineBuilder:
    """Watches an accumulator while a recording is re-fed, at the recorded positions."""

    def __init__(self, unit: Unit) -> None:
        self.timeline = Timeline(unit)
        self._tracks: dict[int, CallTrack] = {}

    def observe(self, at: float, accumulator: Accumulator, events: Sequence[Event]) -> None:
        """Call after ``accumulator.feed(chunk)`` with that chunk's position and events."""
        self.timeline.chunks.append(at)
        if any(isinstance(e, (ContentDelta, RefusalDelta, ReasoningDelta)) for e in events):
            self.timeline.content.append(at)
        self._poll(at, accumulator)

    def finish(self, at: float, accumulator: Accumulator) -> Timeline:
        """Call after ``accumulator.end(...)`` with the end's position."""
        self._poll(at, accumulator)
        self.timeline.end = at
        return self.timeline

    def _poll(self, at: float, accumulator: Accumulator) -> None:
        for call in accumulator.calls():
            track = self._tracks.get(id(call))
            if track is None:
                track = self._tracks[id(call)] = CallTrack(call, opened=at)
                self.timeline.calls.append(track)
            metrics = call.metrics
            fragments, size = track._seen
            if metrics.fragments != fragments or metrics.bytes != size:
                added = max(0, metrics.bytes - size)
                track.fragments.append(Fragment(at, metrics.fragments - fragments, added))
                track._seen = (metrics.fragments, metrics.bytes)
                if track.first_argument is None and added:
                    track.first_argument = at
            if track.complete is None and call.scanner.complete:
                track.complete = at
            if track.sealed is None and call.status != "open":
                track.sealed = at
