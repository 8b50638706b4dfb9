"""Where the time went: per-call fragment timelines, as terminal text and as one HTML page.

The accumulator keeps a few timestamps per call (first fragment, first argument, completion,
sealing) and no per-fragment list: the hot path stays lean (rule 7). A timeline is built
afterwards, by replaying a recording: :class:`TimelineBuilder` watches the accumulator after each
re-fed chunk and notes, at that chunk's recorded time, which calls received fragments and which
changed state. A raw ``.sse`` body has no timing, so its timeline counts chunks instead of
milliseconds (``unit == "chunk"``).

Rendering is plain text for an 80-column terminal, a JSON-ready dict, and a self-contained HTML
page (inline CSS and SVG, no scripts, no external assets) that can be opened offline.
"""

from __future__ import annotations

import html
import json
import math
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from ..core._call import ToolCall
from ..core._events import ContentDelta, Event, ReasoningDelta, RefusalDelta
from ..errors import IncompleteStreamError

if TYPE_CHECKING:
    from ..core._accumulator import Accumulator
    from ._replay import Replay

__all__ = [
    "CallTrack",
    "Fragment",
    "Timeline",
    "TimelineBuilder",
    "render_latency",
    "render_timeline",
    "report_data",
    "report_html",
    "report_text",
]

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


# ------------------------------------------------------------------------------ text rendering

_LABEL = 20
_STATUS = 11
_LEVELS = "▂▄▆█"
_SEAL = {"ready": "✓", "invalid": "✗", "incomplete": "?"}


def _label(call: ToolCall, multi_choice: bool) -> str:
    prefix = f"c{call.choice}" if multi_choice else ""
    return clip(f"{prefix}#{call.index} {call.name or '?'}", _LABEL - 1)


def _pad(text: str, width: int) -> str:
    return text + " " * max(0, width - display_width(text))


def _fmt(at: float | None, unit: Unit) -> str:
    if at is None:
        return "-"
    return f"{at:.1f}" if unit == "ms" else f"{int(at) + 1}"


def render_timeline(timeline: Timeline, width: int = 80) -> str:
    """Fragments per call over time, one row per call, fitting ``width`` columns."""
    if not timeline.chunks:
        return "timeline: no chunks\n"
    bar = max(10, width - _LABEL - 2 - _STATUS)
    span = timeline.span
    unit = timeline.unit

    def col(at: float) -> int:
        return min(bar - 1, max(0, int(at / span * bar)))

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
    multi = len({t.call.choice for t in timeline.calls}) > 1
    for track in timeline.calls:
        end = track.sealed if track.sealed is not None else span
        cells = [" "] * bar
        for c in range(col(track.opened), col(end) + 1):
            cells[c] = "·"
        for c, mark in enumerate(density((f.at, f.count) for f in track.fragments)):
            if mark != " ":
                cells[c] = mark
        seal = _SEAL.get(track.call.status)
        if seal is not None and track.sealed is not None:
            cells[col(track.sealed)] = seal
        lines.append(row(_label(track.call, multi), cells, track.call.status))
    lines.append("▂▄▆█ 1/2/3/4+ per column   · open   ✓ ready   ✗ invalid   ? incomplete")
    return "\n".join(lines) + "\n"


def render_latency(timeline: Timeline) -> str:
    """The latency breakdown: stream milestones, then each call's milestones and sizes."""
    unit = timeline.unit
    if unit == "ms":
        head = "latency (ms after the request started)"
        end = _fmt(timeline.end, unit)
    else:
        head = "latency (chunk numbers: a raw .sse body carries no timing)"
        end = str(len(timeline.chunks))
    lines = [
        head,
        f"  first chunk {_fmt(timeline.first_chunk, unit):>9}   first tool call"
        f" {_fmt(timeline.first_tool_call, unit):>9}   end {end:>9}",
    ]
    if timeline.calls:
        lines.append(
            f"  {'call':<{_LABEL}}{'opened':>9}{'1st arg':>9}{'complete':>9}{'sealed':>9}"
            f"{'frags':>7}{'bytes':>8}"
        )
        multi = len({t.call.choice for t in timeline.calls}) > 1
        for t in timeline.calls:
            m = t.call.metrics
            lines.append(
                f"  {_pad(_label(t.call, multi), _LABEL)}{_fmt(t.opened, unit):>9}"
                f"{_fmt(t.first_argument, unit):>9}{_fmt(t.complete, unit):>9}"
                f"{_fmt(t.sealed, unit):>9}{m.fragments:>7}{m.bytes:>8}"
            )
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------ replay reports


def _completion_data(replay: Replay) -> dict[str, Any]:
    """The finished (or partial) completion as plain data, for content and finish reasons."""
    try:
        completion = replay.accumulator.get_final_completion()
    except IncompleteStreamError as exc:
        completion = exc.partial
    data = completion.model_dump(mode="json", warnings=False)
    return data if isinstance(data, dict) else {}


def _call_data(track: CallTrack | None, call: ToolCall) -> dict[str, Any]:
    error = call.error
    data: dict[str, Any] = {
        "choice": call.choice,
        "index": call.index,
        "id": call.id,
        "name": call.name,
        "status": call.status,
        "arguments": call.arguments,
        "parsed": call.parsed if call.status == "ready" else None,
        "error": None if error is None else {"code": error.code, "message": str(error)},
        "anomalies": [{"code": a.code, "message": a.message} for a in call.anomalies],
        "fragments": call.metrics.fragments,
        "bytes": call.metrics.bytes,
    }
    if track is not None:
        data["timeline"] = {
            "opened": track.opened,
            "first_argument": track.first_argument,
            "complete": track.complete,
            "sealed": track.sealed,
            "fragments": [[f.at, f.count, f.bytes] for f in track.fragments],
        }
    return data


def report_data(replay: Replay) -> dict[str, Any]:
    """Everything ``toolstitch replay --json`` prints: calls, content, anomalies, timeline."""
    replay.until_done()
    timeline = replay.timeline
    tracks = {id(t.call): t for t in timeline.calls}
    completion = _completion_data(replay)
    acc = replay.accumulator
    return {
        "source": replay.source,
        "format": replay.format,
        "model": completion.get("model") or replay.request.get("model"),
        "outcome": replay.outcome,
        "error": None if replay.error is None else replay.error.data(),
        "unit": timeline.unit,
        "chunks": len(timeline.chunks),
        "first_chunk": timeline.first_chunk,
        "first_tool_call": timeline.first_tool_call,
        "end": timeline.end,
        "finish_reasons": {str(k): v for k, v in acc.finish_reasons.items()},
        "content": {
            str(c.get("index")): (c.get("message") or {}).get("content") for c in completion["choices"] or []
        },
        "calls": [_call_data(tracks.get(id(c)), c) for c in acc.calls()],
        "anomalies": [
            {"code": a.code, "message": a.message, "choice": a.choice, "call_index": a.call_index}
            for a in acc.anomalies
        ],
        "usage": completion.get("usage"),
    }


def _char_width(c: str) -> int:
    if unicodedata.combining(c):
        return 0
    return 2 if unicodedata.east_asian_width(c) in ("W", "F") else 1


def display_width(text: str) -> int:
    """Terminal columns ``text`` takes: CJK characters take two, combining marks none."""
    return sum(_char_width(c) for c in text)


def clip(text: str, width: int) -> str:
    """One line of at most ``width`` terminal columns (line breaks become spaces; ``…`` marks a cut)."""
    text = text.replace("\r\n", " ").replace("\n", " ").replace("\r", " ")
    if display_width(text) <= width:
        return text
    out, used = [], 0
    for c in text:
        w = _char_width(c)
        if used + w > width - 1:
            break
        out.append(c)
        used += w
    return "".join(out) + "…"


def wrap_text(text: str, width: int, indent: str = "", max_lines: int = 12) -> list[str]:
    """Cut ``text`` into lines of at most ``width`` terminal columns, at spaces when possible.

    Unlike ``textwrap``, widths are terminal columns (CJK text is twice as wide) and long tokens
    such as JSON without spaces are cut anywhere.
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
            if c == " ":
                last_space = len(line)
            line += c
            used += w
        lines.append(line)
    out = [indent + line.rstrip() for line in lines[:max_lines]]
    if len(lines) > max_lines:
        rest = sum(len(line) for line in lines[max_lines:])
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


# ------------------------------------------------------------------------------ HTML report

_CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,sans-serif;margin:2rem auto;max-width:60rem;
color:#1d2330;padding:0 1rem}
h1{font-size:1.4rem;margin:0 0 .2rem}h2{font-size:1.1rem;margin:2rem 0 .5rem;border-bottom:1px solid #dde}
.facts{color:#556;margin:0}
table{border-collapse:collapse;font-variant-numeric:tabular-nums}
td,th{padding:.2rem .7rem;text-align:right;border-bottom:1px solid #eef}
td:first-child,th:first-child{text-align:left}
pre{background:#f5f6fa;padding:.6rem .8rem;overflow-x:auto;white-space:pre-wrap;word-break:break-all;
margin:.3rem 0}
.call{margin:1rem 0}
.badge{display:inline-block;padding:0 .5rem;border-radius:.6rem;font-size:.85rem;color:#fff}
.ready{background:#2e8540}.invalid{background:#c0392b}.incomplete{background:#b7791f}.open{background:#667}
.anomaly{color:#8a5a00}.err{color:#c0392b}
svg text{font:11px system-ui,sans-serif;fill:#334}
"""

_COLOURS = {"ready": "#2e8540", "invalid": "#c0392b", "incomplete": "#b7791f", "open": "#667"}


def _nice_step(span: float, ticks: int = 8) -> float:
    raw = span / ticks
    power = 10 ** math.floor(math.log10(raw)) if raw > 0 else 1.0
    for factor in (1, 2, 5, 10):
        if raw <= factor * power:
            return float(factor * power)
    return float(10 * power)


def _svg(timeline: Timeline) -> str:
    left, plot, lane, top = 170, 620, 26, 26
    rows: list[tuple[str, CallTrack | None]] = [("chunks", None)]
    multi = len({t.call.choice for t in timeline.calls}) > 1
    rows += [(_label(t.call, multi), t) for t in timeline.calls]
    height = top + lane * len(rows) + 8
    span = timeline.span
    unit = timeline.unit

    def x(at: float) -> float:
        return left + plot * (at / span)

    esc = html.escape
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{left + plot + 20}" height="{height}"'
        f' viewBox="0 0 {left + plot + 20} {height}" role="img" aria-label="fragment timeline">'
    ]
    step = _nice_step(span)
    tick = 0.0
    while tick <= span + 1e-9:
        label = f"{tick:g} ms" if unit == "ms" else f"#{int(tick) + 1}"
        parts.append(
            f'<line x1="{x(tick):.1f}" y1="{top - 6}" x2="{x(tick):.1f}" y2="{height - 6}" stroke="#e3e6ee"/>'
            f'<text x="{x(tick):.1f}" y="{top - 10}" text-anchor="middle">{esc(label)}</text>'
        )
        tick += step
    biggest = max([1, *(f.bytes for t in timeline.calls for f in t.fragments)])
    for i, (label, track) in enumerate(rows):
        y = top + i * lane
        mid = y + lane / 2
        parts.append(f'<text x="{left - 8}" y="{mid + 4:.1f}" text-anchor="end">{esc(label)}</text>')
        if track is None:
            for at in timeline.chunks:
                parts.append(
                    f'<rect x="{x(at):.1f}" y="{y + 7}" width="1.5" height="{lane - 14}" fill="#8894b0">'
                    f"<title>chunk at {_fmt(at, unit)}</title></rect>"
                )
            continue
        call = track.call
        colour = _COLOURS.get(call.status, "#667")
        end = track.sealed if track.sealed is not None else span
        wide = max(1.0, x(end) - x(track.opened))
        parts.append(
            f'<rect x="{x(track.opened):.1f}" y="{mid - 2:.1f}" width="{wide:.1f}"'
            f' height="4" fill="{colour}" opacity=".25"><title>open from {_fmt(track.opened, unit)}'
            f" to {_fmt(end, unit)}</title></rect>"
        )
        for f in track.fragments:
            h = 4 + (lane - 10) * (f.bytes / biggest)
            parts.append(
                f'<rect x="{x(f.at) - 1:.1f}" y="{mid - h / 2:.1f}" width="2.5" height="{h:.1f}"'
                f' fill="{colour}">'
                f"<title>{f.count} fragment(s), {f.bytes} bytes at {_fmt(f.at, unit)}</title></rect>"
            )
        if track.complete is not None:
            cx = x(track.complete)
            parts.append(
                f'<path d="M{cx:.1f} {mid - 6:.1f}l5 6-5 6-5-6z" fill="none" stroke="{colour}">'
                f"<title>arguments complete at {_fmt(track.complete, unit)}</title></path>"
            )
        if track.sealed is not None:
            parts.append(
                f'<circle cx="{x(track.sealed):.1f}" cy="{mid:.1f}" r="5" fill="{colour}">'
                f"<title>{esc(call.status)} at {_fmt(track.sealed, unit)}</title></circle>"
            )
    parts.append("</svg>")
    return "".join(parts)


def report_html(replay: Replay) -> str:
    """One self-contained page: facts, the timeline drawing, the latency table, the calls."""
    data = report_data(replay)
    timeline = replay.timeline
    unit = timeline.unit
    esc = html.escape
    facts = [data["format"], f"{data['chunks']} chunks", data["outcome"]]
    if data["model"]:
        facts.insert(1, f"model {data['model']}")
    header = replay.header or {}
    if header.get("toolstitch"):
        facts.append(f"toolstitch {header['toolstitch']}, openai {header.get('openai')}")
    body = [
        "<!doctype html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width,initial-scale=1">',
        f"<title>toolstitch replay: {esc(replay.source)}</title><style>{_CSS}</style></head><body>",
        f"<h1>toolstitch replay</h1><p class=facts><code>{esc(replay.source)}</code><br>"
        f"{esc(' · '.join(facts))}</p>",
    ]
    if data["error"]:
        error = data["error"]
        body.append(f"<p class=err>stream error: {esc(error['type'])}: {esc(error['message'])}</p>")
    body.append("<h2>Timeline</h2>")
    if unit == "chunk":
        body.append("<p>A raw <code>.sse</code> body carries no timing: the axis counts chunks.</p>")
    body.append(_svg(timeline) if timeline.chunks else "<p>No chunks.</p>")
    body.append("<p class=facts>Bars: fragments (height ∝ bytes); ◇ arguments complete; ● sealed.</p>")
    body.append("<h2>Latency</h2><table>")
    what = "ms after the request" if unit == "ms" else "chunk number"
    body.append(
        f"<tr><th>stream ({esc(what)})</th><th>first chunk</th><th>first tool call</th><th>end</th></tr>"
        f"<tr><td>stream</td><td>{_fmt(timeline.first_chunk, unit)}</td>"
        f"<td>{_fmt(timeline.first_tool_call, unit)}</td>"
        f"<td>{_fmt(timeline.end, unit) if unit == 'ms' else len(timeline.chunks)}</td></tr></table>"
    )
    if timeline.calls:
        body.append(
            "<table><tr><th>call</th><th>opened</th><th>first argument</th><th>complete</th>"
            "<th>sealed</th><th>fragments</th><th>bytes</th></tr>"
        )
        multi = len({t.call.choice for t in timeline.calls}) > 1
        for t in timeline.calls:
            m = t.call.metrics
            body.append(
                f"<tr><td>{esc(_label(t.call, multi))}</td><td>{_fmt(t.opened, unit)}</td>"
                f"<td>{_fmt(t.first_argument, unit)}</td><td>{_fmt(t.complete, unit)}</td>"
                f"<td>{_fmt(t.sealed, unit)}</td><td>{m.fragments}</td><td>{m.bytes}</td></tr>"
            )
        body.append("</table>")
    body.append(f"<h2>Tool calls ({len(data['calls'])})</h2>")
    for call in data["calls"]:
        body.append(
            f"<div class=call><b>#{call['index']} {esc(call['name'] or '?')}</b> "
            f"<span class='badge {esc(call['status'])}'>{esc(call['status'])}</span> "
            f"<code>{esc(call['id'] or '')}</code>"
        )
        shown = (
            json.dumps(call["parsed"], ensure_ascii=False, indent=2)
            if call["parsed"] is not None
            else call["arguments"]
        )
        body.append(f"<pre>{esc(shown)}</pre>")
        if call["error"]:
            body.append(f"<div class=err>{esc(call['error']['code'])}: {esc(call['error']['message'])}</div>")
        for anomaly in call["anomalies"]:
            body.append(f"<div class=anomaly>{esc(anomaly['code'])}: {esc(anomaly['message'])}</div>")
        body.append("</div>")
    for choice, text in data["content"].items():
        if text:
            body.append(f"<h2>Content (choice {esc(choice)})</h2><pre>{esc(text)}</pre>")
    stream_anomalies = [a for a in data["anomalies"] if a["call_index"] is None]
    if stream_anomalies:
        body.append("<h2>Stream anomalies</h2><ul>")
        body += [f"<li class=anomaly>{esc(a['code'])}: {esc(a['message'])}</li>" for a in stream_anomalies]
        body.append("</ul>")
    body.append("</body></html>")
    return "\n".join(body) + "\n"
