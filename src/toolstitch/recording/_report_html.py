"""The replay report as one self-contained HTML page: inline CSS and SVG, no scripts, no external
assets, so it opens offline and can be attached to a bug report.

Every text that came from the recording is escaped with :func:`html.escape`; the page is written
from :func:`~._report_data.report_data`, so its values are bounded and finite.
"""

from __future__ import annotations

import html
import json
import math
from typing import TYPE_CHECKING

from ._report_data import report_data, request_summary
from ._report_text import call_label, clip, latency_rows, position
from ._timeline import CallTrack, Timeline

if TYPE_CHECKING:
    from ._replay import Replay

__all__ = ["MAX_FRAGMENT_ROWS", "MAX_REQUEST_CHARS", "report_html"]

#: Fragment rows the page lists, over all calls: a stream of a million fragments stays readable.
MAX_FRAGMENT_ROWS = 2000
#: Characters of the recorded request the page shows (a long conversation is cut, and says so).
MAX_REQUEST_CHARS = 20000

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
.frags td{vertical-align:top}.frag{white-space:pre-wrap;word-break:break-all;background:#eef1f8;
border-radius:3px;padding:0 .2rem;text-align:left}
details{margin:.3rem 0}summary{cursor:pointer;color:#445}
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


def _titled(tag: str, attributes: str, title: str) -> str:
    """An SVG shape with its ``title`` (escaped already) as its child: the text a browser shows when
    the pointer rests on the shape, which is how the timeline says what each mark is."""
    return f"<{tag} {attributes}><title>{title}</title></{tag}>"


def _svg(timeline: Timeline) -> str:
    left, plot, lane, top = 170, 620, 26, 26
    rows: list[tuple[str, CallTrack | None]] = [("chunks", None)]
    multi = timeline.multi_choice
    rows += [(call_label(t.call, multi), t) for t in timeline.calls]
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
                where = f'x="{x(at):.1f}" y="{y + 7}" width="1.5" height="{lane - 14}" fill="#8894b0"'
                parts.append(_titled("rect", where, f"chunk at {position(at, unit)}"))
            continue
        call = track.call
        colour = _COLOURS.get(call.status, "#667")
        end = track.settled if track.settled is not None else span
        wide = max(1.0, x(end) - x(track.opened))
        where = f'x="{x(track.opened):.1f}" y="{mid - 2:.1f}" width="{wide:.1f}" height="4"'
        title = f"open from {position(track.opened, unit)} to {position(end, unit)}"
        parts.append(_titled("rect", f'{where} fill="{colour}" opacity=".25"', title))
        for f in track.fragments:
            h = 4 + (lane - 10) * (f.bytes / biggest)
            where = f'x="{x(f.at) - 1:.1f}" y="{mid - h / 2:.1f}" width="2.5" height="{h:.1f}"'
            title = (
                f"{f.count} fragment(s), {f.bytes} bytes at {position(f.at, unit)}: {esc(clip(f.text, 60))}"
            )
            parts.append(_titled("rect", f'{where} fill="{colour}"', title))
        if track.complete is not None:
            diamond = f'd="M{x(track.complete):.1f} {mid - 6:.1f}l5 6-5 6-5-6z" fill="none" stroke="{colour}"'
            parts.append(_titled("path", diamond, f"arguments complete at {position(track.complete, unit)}"))
        if track.sealed is not None:
            dot = f'cx="{x(track.sealed):.1f}" cy="{mid:.1f}" r="5" fill="{colour}"'
            title = f"sealed {esc(call.status)} at {position(track.sealed, unit)}"
            parts.append(_titled("circle", dot, title))
        elif track.ended is not None:
            ex = x(track.ended)
            box = f'x="{ex - 4.5:.1f}" y="{mid - 4.5:.1f}" width="9" height="9" fill="#fff"'
            title = f"never sealed: incomplete at {position(track.ended, unit)}"
            parts.append(_titled("rect", f'{box} stroke="{colour}" stroke-width="2"', title))
    parts.append("</svg>")
    return "".join(parts)


def _fragment_table(fragments: list[list[object]], unit: str, rows: int) -> str:
    """One call's fragments, chunk by chunk: where, how many bytes, and the text as it arrived
    (escaped; each chunk's text bounded by the timeline, the rows by :data:`MAX_FRAGMENT_ROWS`)."""
    esc = html.escape
    what = "ms" if unit == "ms" else "chunk"
    out = [
        f"<details class=frags open><summary>{len(fragments)} chunk(s) with fragments:"
        " the text as it arrived</summary>",
        f"<table><tr><th>{what}</th><th>bytes</th><th>text</th></tr>",
    ]
    for at, _count, size, text, cut in fragments[:rows]:
        shown = esc(str(text)) + ("<i>…</i>" if cut else "")
        where = position(at if isinstance(at, (int, float)) else None, "ms" if unit == "ms" else "chunk")
        out.append(f"<tr><td>{esc(where)}</td><td>{esc(str(size))}</td><td class=frag>{shown}</td></tr>")
    out.append("</table>")
    if len(fragments) > rows:
        out.append(f"<p class=facts>… {len(fragments) - rows} more not shown.</p>")
    out.append("</details>")
    return "".join(out)


def _request_section(request: dict[str, object]) -> str:
    """The recorded request: a line of facts, the last user message, then the parameters as the
    recording holds them (credentials were masked when it was written), bounded."""
    esc = html.escape
    facts, last_user = request_summary(request)
    out = [f"<h2>Request</h2><p class=facts>{esc(facts)}</p>"]
    if last_user:
        out.append(f"<p>user: {esc(clip(last_user, 300))}</p>")
    text = json.dumps(request, ensure_ascii=False, indent=2)
    more = len(text) - MAX_REQUEST_CHARS
    if more > 0:
        text = text[:MAX_REQUEST_CHARS] + f"\n… ({more} more characters)"
    out.append(
        "<details><summary>parameters as recorded (credentials masked)</summary>"
        f"<pre class=request>{esc(text)}</pre></details>"
    )
    return "".join(out)


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
    if replay.header is not None:
        body.append(_request_section(data["request"]))
    body.append("<h2>Timeline</h2>")
    if unit == "chunk":
        body.append("<p>A raw <code>.sse</code> body carries no timing: the axis counts chunks.</p>")
    body.append(_svg(timeline) if timeline.chunks else "<p>No chunks.</p>")
    body.append(
        "<p class=facts>Bars: fragments (height ∝ bytes; hover for their text); ◇ arguments complete;"
        " ● sealed (ready or invalid); □ never sealed (incomplete: the stream ended first).</p>"
    )
    body.append("<h2>Latency</h2><table>")
    what = "ms after the request" if unit == "ms" else "chunk number"
    body.append(
        f"<tr><th>stream ({esc(what)})</th><th>first chunk</th><th>first tool call</th><th>end</th></tr>"
        f"<tr><td>stream</td><td>{position(timeline.first_chunk, unit)}</td>"
        f"<td>{position(timeline.first_tool_call, unit)}</td>"
        f"<td>{position(timeline.end, unit) if unit == 'ms' else len(timeline.chunks)}</td></tr></table>"
    )
    if timeline.calls:
        body.append(
            "<table><tr><th>call</th><th>opened</th><th>first argument</th><th>complete</th>"
            "<th>sealed</th><th>fragments</th><th>bytes</th></tr>"
        )
        for row in latency_rows(timeline):
            body.append("<tr>" + "".join(f"<td>{esc(cell)}</td>" for cell in row) + "</tr>")
        body.append("</table>")
    body.append(f"<h2>Tool calls ({len(data['calls'])})</h2>")
    rows_left = MAX_FRAGMENT_ROWS
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
        fragments = (call.get("timeline") or {}).get("fragments") or []
        if fragments:
            body.append(_fragment_table(fragments, unit, rows_left))
            rows_left = max(0, rows_left - len(fragments))
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
