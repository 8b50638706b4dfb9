"""The replay report for an 80-column terminal: calls, problems, the timeline and the latencies.

Widths are terminal columns, not characters: CJK text takes two columns, combining marks none, so
labels and bars line up whatever the script of a city name. Every loop over provider text stops
at what it shows, so a 50 MB content string costs what its first lines cost.
"""

from __future__ import annotations

import math
import unicodedata
from collections.abc import Iterable
from typing import TYPE_CHECKING

from ..core import ToolCall
from ._report_data import report_data, request_summary
from ._timeline import Timeline, Unit

if TYPE_CHECKING:
    from ._replay import Replay

__all__ = [
    "call_label",
    "clip",
    "display_width",
    "latency_rows",
    "position",
    "render_latency",
    "render_timeline",
    "report_text",
    "wrap_text",
]

_LABEL = 20
_STATUS = 11
_LEVELS = "▂▄▆█"
_SEAL = {"ready": "✓", "invalid": "✗", "incomplete": "?"}


def call_label(call: ToolCall, multi_choice: bool) -> str:
    """``#0 get_weather`` (``c1#0 ...`` when several choices have calls), clipped to the label column."""
    prefix = f"c{call.choice}" if multi_choice else ""
    return clip(f"{prefix}#{call.index} {call.name or '?'}", _LABEL - 1)


def _pad(text: str, width: int) -> str:
    return text + " " * max(0, width - display_width(text))


def position(at: float | None, unit: Unit) -> str:
    """A position for people: milliseconds with one decimal, or a chunk number counted from 1."""
    if at is None:
        return "-"
    if not math.isfinite(at):  # replay refuses such offsets; a hand-made Timeline may still hold one
        return str(at)
    return f"{at:.1f}" if unit == "ms" else f"{int(at) + 1}"


def render_timeline(timeline: Timeline, width: int = 80) -> str:
    """Fragments per call over time, one row per call, fitting ``width`` columns."""
    if not timeline.chunks:
        return "timeline: no chunks\n"
    bar = max(10, width - _LABEL - 2 - _STATUS)
    span = timeline.span
    unit = timeline.unit

    def col(at: float) -> int:
        where = at / span * bar
        return min(bar - 1, max(0, int(where))) if math.isfinite(where) else bar - 1

    def density(positions: Iterable[tuple[float, int]]) -> list[str]:
        counts = [0] * bar
        for at, n in positions:
            counts[col(at)] += n
        return [_LEVELS[min(n, len(_LEVELS)) - 1] if n else " " for n in counts]

    if unit == "ms":
        step = span / bar
        lines = [f"timeline: 0 to {span:.1f} ms after the request, one column ≈ {step:.1f} ms"]
        left, right = "0 ms", f"{span:.0f} ms"
    else:
        lines = [f"timeline: {len(timeline.chunks)} chunks (no timing recorded: columns count chunks)"]
        left, right = "chunk 1", f"chunk {len(timeline.chunks)}"
    lines.append(" " * (_LABEL + 1) + left + right.rjust(bar - len(left)))

    def row(label: str, cells: list[str], status: str = "") -> str:
        return f"{_pad(label, _LABEL)}│{''.join(cells)}│ {status}".rstrip()

    lines.append(row("chunks", density((at, 1) for at in timeline.chunks)))
    if timeline.content:
        lines.append(row("text", density((at, 1) for at in timeline.content)))
    multi = timeline.multi_choice
    for track in timeline.calls:
        end = track.settled if track.settled is not None else span
        cells = [" "] * bar
        for c in range(col(track.opened), col(end) + 1):
            cells[c] = "·"
        for c, mark in enumerate(density((f.at, f.count) for f in track.fragments)):
            if mark != " ":
                cells[c] = mark
        seal = _SEAL.get(track.call.status)
        if seal is not None and track.settled is not None:
            cells[col(track.settled)] = seal
        lines.append(row(call_label(track.call, multi), cells, track.call.status))
    lines.append("▂▄▆█ 1/2/3/4+ per column   · open   ✓ ready   ✗ invalid   ? incomplete")
    return "\n".join(lines) + "\n"


def render_latency(timeline: Timeline) -> str:
    """The latency breakdown: stream milestones, then each call's milestones and sizes."""
    unit = timeline.unit
    if unit == "ms":
        head = "latency (ms after the request started)"
        end = position(timeline.end, unit)
    else:
        head = "latency (chunk numbers: a raw .sse body carries no timing)"
        end = str(len(timeline.chunks))
    lines = [
        head,
        f"  first chunk {position(timeline.first_chunk, unit):>9}   first tool call"
        f" {position(timeline.first_tool_call, unit):>9}   end {end:>9}",
    ]
    if timeline.calls:
        lines.append(
            f"  {'call':<{_LABEL}}{'opened':>9}{'1st arg':>9}{'complete':>9}{'sealed':>9}"
            f"{'frags':>7}{'bytes':>8}"
        )
        for label, *cells in latency_rows(timeline):
            widths = (9, 9, 9, 9, 7, 8)
            lines.append(
                f"  {_pad(label, _LABEL)}" + "".join(c.rjust(w) for c, w in zip(cells, widths, strict=True))
            )
    return "\n".join(lines) + "\n"


def latency_rows(timeline: Timeline) -> list[list[str]]:
    """One row of text per call, for the text and HTML tables alike: label, opened, first
    argument, complete, sealed, fragments, bytes."""
    multi, unit = timeline.multi_choice, timeline.unit
    rows = []
    for t in timeline.calls:
        metrics = t.call.metrics
        milestones = (t.opened, t.first_argument, t.complete, t.sealed)
        rows.append(
            [
                call_label(t.call, multi),
                *(position(at, unit) for at in milestones),
                str(metrics.fragments),
                str(metrics.bytes),
            ]
        )
    return rows


def _char_width(c: str) -> int:
    if unicodedata.combining(c):
        return 0
    return 2 if unicodedata.east_asian_width(c) in ("W", "F") else 1


def display_width(text: str) -> int:
    """Terminal columns ``text`` takes: CJK characters take two, combining marks none."""
    return sum(_char_width(c) for c in text)


def clip(text: str, width: int) -> str:
    """One line of at most ``width`` terminal columns (line breaks become spaces; ``…`` marks a cut).
    Reads no further than the cut, however long the text."""
    out: list[str] = []
    used = 0
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == "\r" and text.startswith("\r\n", i):
            i += 1  # one line break, one space
        if c in "\r\n":
            c = " "
        w = _char_width(c)
        if used + w > width:
            while out and used > width - 1:  # make room for the ellipsis
                used -= _char_width(out.pop())
            return "".join(out) + "…"
        out.append(c)
        used += w
        i += 1
    return "".join(out)


def wrap_text(text: str, width: int, indent: str = "", max_lines: int = 12) -> list[str]:
    """Cut ``text`` into lines of at most ``width`` terminal columns, at spaces when possible.

    Unlike ``textwrap``, widths are terminal columns (CJK text is twice as wide) and long tokens
    such as JSON without spaces are cut anywhere. It stops once ``max_lines`` are full (a 50 MB
    string costs what its first lines cost) and says about how much it left out.
    """
    room = max(8, width - display_width(indent))
    lines: list[str] = []
    for paragraph in text.splitlines() or [""]:
        line, used, last_space = "", 0, -1
        for c in paragraph:
            w = _char_width(c)
            if used + w > room:
                if last_space > 0:
                    lines.append(line[:last_space])
                    line = line[last_space + 1 :]
                else:
                    lines.append(line)
                    line = ""
                used, last_space = display_width(line), -1
                if len(lines) > max_lines:
                    break
            if c == " ":
                last_space = len(line)
            line += c
            used += w
        if len(lines) > max_lines:
            break
        lines.append(line)
    out = [indent + line.rstrip() for line in lines[:max_lines]]
    if len(lines) > max_lines:
        rest = len(text) - sum(len(line) for line in lines[:max_lines])
        out.append(f"{indent}… ({rest} more characters)")
    return out


def report_text(replay: Replay, width: int = 80) -> str:
    """``toolstitch replay FILE``: the calls, their problems, the timeline and the latencies."""
    data = report_data(replay)
    timeline = replay.timeline
    facts = [data["format"]]
    if data["model"]:
        facts.append(f"model {data['model']}")
    facts.append(f"{data['chunks']} chunks")
    if timeline.unit == "ms" and timeline.end is not None:
        facts.append(f"{timeline.end:.1f} ms")
    facts.append(data["outcome"])
    out = [*wrap_text(f"replay of {replay.source}", width, "", 3), "  " + " · ".join(facts)]
    if data["error"]:
        out.append(f"  stream error: {data['error']['type']}: {data['error']['message']}")
    if replay.header is not None:
        facts_line, last_user = request_summary(data["request"])
        out.extend(wrap_text(f"request: {facts_line}", width, "  ", 3))
        if last_user:
            out.extend(wrap_text(f"user: {last_user}", width, "  ", 3))
    calls = data["calls"]
    out.append("")
    out.append(f"tool calls: {len(calls)}" if calls else "tool calls: none")
    for call in calls:
        label = f"#{call['index']}"
        if len(data["finish_reasons"]) > 1:
            label = f"c{call['choice']}{label}"
        out.append(
            clip(f"  {label} {call['name'] or '?'}  {call['status']}  {call['id'] or ''}".rstrip(), width)
        )
        out.extend(wrap_text(call["arguments"] or '""', width, "      "))
        if call["error"]:
            problem = f"error {call['error']['code']}: {call['error']['message']}"
            out.extend(wrap_text(problem, width, "      ", 3))
        for anomaly in call["anomalies"]:
            out.extend(wrap_text(f"anomaly {anomaly['code']}: {anomaly['message']}", width, "      ", 2))
    for choice, text in data["content"].items():
        if text:
            out.append("")
            out.append("content" if len(data["content"]) == 1 else f"content (choice {choice})")
            out.extend(wrap_text(text, width, "  ", 8))
    stream_anomalies = [a for a in data["anomalies"] if a["call_index"] is None]
    if stream_anomalies:
        out.append("")
        out.append("stream anomalies")
        for anomaly in stream_anomalies:
            out.extend(wrap_text(f"{anomaly['code']}: {anomaly['message']}", width, "  ", 2))
    out.append("")
    return "\n".join(out) + "\n" + render_timeline(timeline, width) + "\n" + render_latency(timeline)
