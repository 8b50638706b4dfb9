"""The HTML waterfall of a run (``RunResult.to_html()``, ``toolstitch replay --html OUT RUN.json``).

One self-contained page, no script: a row per step and a row per call under it, each stage a bar
placed on one shared time axis (an instant is a thin mark), coloured by stage, with a legend and
the milliseconds in each bar's tooltip and in a table below. Every text from the run (tool names,
ids) is escaped: a name that looks like HTML stays text.
"""

from __future__ import annotations

import html
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._timeline import Stage, Timeline

__all__ = ["waterfall_html"]

COLOURS = {
    "request": "#9aa5b1",
    "stream": "#4c78a8",
    "answer": "#54a24b",
    "results_sent": "#222222",
    "abandoned": "#d62728",
    "first_fragment": "#222222",
    "arguments": "#72b7b2",
    "verdict": "#e45756",
    "warm_up": "#f2cf5b",
    "gate": "#b279a2",
    "execution": "#f58518",
}

_CSS = """
body { font: 14px system-ui, sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.3em; }
.row { display: flex; align-items: center; height: 26px; border-bottom: 1px solid #eee; }
.label { width: 16em; flex: none; overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }
.label.call { padding-left: 1.5em; }
.track { position: relative; flex: 1; height: 18px; background: #fafafa; }
.bar { position: absolute; top: 3px; height: 12px; min-width: 2px; border-radius: 2px; opacity: .9; }
.bar.instant { width: 2px; top: 0; height: 18px; }
.axis { display: flex; justify-content: space-between; margin-left: 16em; color: #666; font-size: 12px; }
.legend span { display: inline-block; margin-right: 1em; }
.legend i { display: inline-block; width: 12px; height: 12px; margin-right: 4px; vertical-align: -2px; }
table { border-collapse: collapse; margin-top: 1.5em; font-size: 13px; }
td, th { border: 1px solid #ddd; padding: 2px 8px; text-align: left; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
"""


def _bar(stage: Stage, total: float, lane: str) -> str:
    left = 100.0 * stage.start / total
    width = 100.0 * stage.duration / total
    colour = COLOURS.get(stage.name, "#888")
    span = f"{stage.start:.1f} ms" if stage.end is None else f"{stage.start:.1f} → {stage.end:.1f} ms"
    tip = html.escape(f"{lane}: {stage.name} {stage.detail} {span}".replace("  ", " "))
    kind = "bar instant" if stage.end is None else "bar"
    style = f"left:{left:.3f}%;background:{colour}" + ("" if stage.end is None else f";width:{width:.3f}%")
    return (
        f'<div class="{kind}" data-stage="{html.escape(stage.name)}" data-start="{stage.start:.3f}" '
        f'data-end="{"" if stage.end is None else f"{stage.end:.3f}"}" '
        f'data-detail="{html.escape(stage.detail)}" style="{style}" title="{tip}"></div>'
    )


def waterfall_html(timeline: Timeline, title: str = "toolstitch run") -> str:
    """The page (see the module docs)."""
    total = max(timeline.total, 1.0)
    rows: list[str] = []
    table: list[str] = []
    for step in timeline.steps:
        lane = f"step {step.index}"
        bars = "".join(_bar(s, total, lane) for s in step.stages)
        rows.append(
            f'<div class="row step" data-step="{step.index}"><div class="label"><b>{lane}</b></div>'
            f'<div class="track">{bars}</div></div>'
        )
        for s in step.stages:
            table.append(_table_row(lane, s))
        for call in step.calls:
            name = html.escape(call.name or "?")
            label = f"#{call.index} {name} <small>({html.escape(call.result or call.status)})</small>"
            who = f"step {step.index} #{call.index} {call.name or '?'}"
            bars = "".join(_bar(s, total, who) for s in call.stages)
            rows.append(
                f'<div class="row call" data-step="{step.index}" data-call="{call.index}" '
                f'data-name="{name}"><div class="label call">{label}</div>'
                f'<div class="track">{bars}</div></div>'
            )
            for s in call.stages:
                table.append(_table_row(who, s))
    ticks = "".join(f"<span>{total * k / 5:.0f} ms</span>" for k in range(6))
    legend = "".join(f'<span><i style="background:{c}"></i>{n}</span>' for n, c in COLOURS.items())
    return (
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        f"<title>{html.escape(title)}</title><style>{_CSS}</style></head><body>"
        f"<h1>{html.escape(title)}</h1>"
        f'<p class="total">{len(timeline.steps)} steps, {len(timeline.calls)} calls, '
        f'<b id="total">{timeline.total:.1f} ms</b></p>'
        f'<div class="legend">{legend}</div><div class="waterfall">{"".join(rows)}</div>'
        f'<div class="axis">{ticks}</div>'
        "<table><tr><th>lane</th><th>stage</th><th>detail</th><th>start ms</th><th>end ms</th></tr>"
        f"{''.join(table)}</table></body></html>"
    )


def _table_row(lane: str, s: Stage) -> str:
    end = "" if s.end is None else f"{s.end:.1f}"
    return (
        f"<tr><td>{html.escape(lane)}</td><td>{html.escape(s.name)}</td><td>{html.escape(s.detail)}</td>"
        f'<td class="num">{s.start:.1f}</td><td class="num">{end}</td></tr>'
    )
