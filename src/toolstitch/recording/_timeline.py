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

from ..core import ArgumentsDelta, ContentDelta, Event, ReasoningDelta, RefusalDelta, ToolCall

if TYPE_CHECKING:
    from ..core import CallStore

__all__ = ["FRAGMENT_TEXT_CHARS", "CallTrack", "Fragment", "Timeline", "TimelineBuilder", "Unit"]

Unit = Literal["ms", "chunk"]

#: How much of one chunk's argument text a fragment keeps for the reports: enough to read what a
#: provider cut where, bounded so a 4 MB argument costs the timeline no more than a short one.
FRAGMENT_TEXT_CHARS = 200


@dataclass(frozen=True, slots=True)
class Fragment:
    """Tool-call fragments that arrived in one chunk: when, how many, how many argument bytes, and
    their text (at most :data:`FRAGMENT_TEXT_CHARS` characters; ``cut`` says when there was more)."""

    at: float
    count: int
    bytes: int
    text: str = ""
    cut: bool = False


@dataclass(slots=True)
class CallTrack:
    """One call over time; positions are milliseconds since the request (or chunk numbers).

    ``sealed`` is when the call was sealed (``ready`` or ``invalid``); a call that was never sealed
    has ``sealed is None`` and ``ended`` says when the stream ended under it (``incomplete``).
    """

    call: ToolCall
    opened: float
    first_argument: float | None = None
    complete: float | None = None
    sealed: float | None = None
    ended: float | None = None
    fragments: list[Fragment] = field(default_factory=list)
    _seen: tuple[int, int] = (0, 0)

    @property
    def settled(self) -> float | None:
        """When the call stopped changing: sealed, or ended incomplete (``None`` while open)."""
        return self.sealed if self.sealed is not None else self.ended


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
        last = max([0.0, *self.chunks, *(t.settled or 0.0 for t in self.calls)])
        if self.end is not None:
            last = max(last, self.end)
        return last if last > 0 else 1.0


class TimelineBuilder:
    """Watches an accumulator while a recording is re-fed, at the recorded positions."""

    def __init__(self, unit: Unit) -> None:
        self.timeline = Timeline(unit)
        self._tracks: dict[int, CallTrack] = {}
        self._texts: dict[int, list[str]] = {}

    def observe(self, at: float, accumulator: CallStore, events: Sequence[Event]) -> None:
        """Call after ``accumulator.feed(chunk)`` with that chunk's position and events."""
        self.timeline.chunks.append(at)
        texts = self._texts
        texts.clear()
        content = False
        for event in events:
            if isinstance(event, ArgumentsDelta):
                texts.setdefault(id(event.call), []).append(event.text)
            elif isinstance(event, (ContentDelta, RefusalDelta, ReasoningDelta)):
                content = True
        if content:
            self.timeline.content.append(at)
        self._poll(at, accumulator)
        texts.clear()

    def finish(self, at: float, accumulator: CallStore) -> Timeline:
        """Call after ``accumulator.end(...)`` with the end's position."""
        self._poll(at, accumulator)
        self.timeline.end = at
        return self.timeline

    def _poll(self, at: float, accumulator: CallStore) -> None:
        for call in accumulator.calls():
            track = self._tracks.get(id(call))
            if track is None:
                track = self._tracks[id(call)] = CallTrack(call, opened=at)
                self.timeline.calls.append(track)
            metrics = call.metrics
            fragments, size = track._seen
            if metrics.fragments != fragments or metrics.bytes != size:
                added = max(0, metrics.bytes - size)
                text, cut = _bounded(self._texts.get(id(call), ()))
                track.fragments.append(Fragment(at, metrics.fragments - fragments, added, text, cut))
                track._seen = (metrics.fragments, metrics.bytes)
                if track.first_argument is None and added:
                    track.first_argument = at
            if track.complete is None and call.scanner.complete:
                track.complete = at
            if track.settled is None and call.status != "open":
                if call.status == "incomplete":
                    track.ended = at
                else:
                    track.sealed = at


def _bounded(pieces: Sequence[str]) -> tuple[str, bool]:
    """One chunk's argument pieces joined, at most :data:`FRAGMENT_TEXT_CHARS` characters."""
    out: list[str] = []
    room = FRAGMENT_TEXT_CHARS
    for piece in pieces:
        if len(piece) > room:
            out.append(piece[:room])
            return "".join(out), True
        out.append(piece)
        room -= len(piece)
    return "".join(out), False
