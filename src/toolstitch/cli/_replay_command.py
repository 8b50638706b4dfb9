"""``toolstitch replay FILE``: a recorded stream, replayed, with its calls, timeline and latencies.

Exit 0 when replayed, 2 (one line on stderr) when the file cannot be read or is not a recording.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from ..errors import RecordingFormatError
from ..loop import Timeline
from ..recording import Replay, replay, report_data, report_html, report_text
from ._output import SafeOutput, fail

__all__ = ["add_command"]


def _live(replayed: Replay, out: SafeOutput) -> None:
    """``--timing``: as the chunks come out at their recorded pace, say when calls open and seal."""
    seen: dict[int, str] = {}
    for number, _ in enumerate(replayed):
        offset = replayed.offsets[number]
        when = f"{offset:9.1f} ms" if offset is not None else f"chunk {number + 1:>5}"
        for call in replayed.accumulator.calls():
            state = "opened" if call.status == "open" else call.status
            if seen.get(id(call)) != state:
                seen[id(call)] = state
                out.write(f"{when}  #{call.index} {call.name or '?'}  {state}\n")
                out.flush()
    out.write("\n")


def _timeline(path: str) -> Timeline | None:
    """The run timeline ``path`` holds (``RunResult.timeline.save``), or None for anything else."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read(64 * 1024 * 1024)
        data = json.loads(text)
    except (OSError, ValueError):
        return None
    try:
        return Timeline.from_dict(data) if isinstance(data, dict) and "format" in data else None
    except ValueError:
        return None


def _run_timeline(args: argparse.Namespace, timeline: Timeline) -> int:
    """A saved run timeline: its waterfall (``--html``), and one line per stage."""
    out = SafeOutput(sys.stdout)
    if args.html:
        try:
            Path(args.html).write_text(
                timeline.to_html(f"toolstitch run: {Path(args.file).name}"), encoding="utf-8"
            )
        except OSError as exc:
            return fail("replay", f"cannot write {args.html}: {exc.strerror or exc}")
    if args.json:
        out.write(json.dumps(timeline.as_dict(), ensure_ascii=False, indent=2) + "\n")
        return 0
    out.write(f"run: {len(timeline.steps)} steps, {len(timeline.calls)} calls, {timeline.total:.1f} ms\n")
    for step in timeline.steps:
        lanes = [(f"step {step.index}", step.stages)]
        lanes += [(f"  #{c.index} {c.name or '?'}", c.stages) for c in step.calls]
        for who, stages in lanes:
            for st in stages:
                end = "" if st.end is None else f" -> {st.end:8.1f}"
                out.write(f"{who:<28} {st.name:<15} {st.start:8.1f}{end} ms {st.detail}\n")
    if args.html:
        out.write(f"\nHTML waterfall: {args.html}\n")
    return 0


def _run(args: argparse.Namespace) -> int:
    timeline = _timeline(args.file)
    if timeline is not None:
        return _run_timeline(args, timeline)
    try:
        replayed = replay(args.file, timing=args.timing)
    except OSError as exc:
        return fail("replay", f"cannot read {args.file}: {exc.strerror or exc}")
    except RecordingFormatError as exc:
        return fail("replay", exc)
    out = SafeOutput(sys.stdout)
    if args.timing and not args.json:
        _live(replayed, out)
    replayed.until_done()
    if args.html:
        try:
            # A lone surrogate cannot be UTF-8: it is written as its escape, visible in the page.
            Path(args.html).write_text(report_html(replayed), encoding="utf-8", errors="backslashreplace")
        except OSError as exc:
            return fail("replay", f"cannot write {args.html}: {exc.strerror or exc}")
    if args.json:
        # allow_nan=False: the report is finite by construction, and the output stays strict JSON.
        out.write(json.dumps(report_data(replayed), ensure_ascii=False, indent=2, allow_nan=False) + "\n")
    else:
        out.write(report_text(replayed))
        if args.html:
            out.write(f"\nHTML report: {args.html}\n")
    return 0


def add_command(subparsers: Any) -> None:
    """Register ``toolstitch replay``."""
    # The same registration shape in every command module (see _main.COMMANDS): only the words
    # differ, and they are this command's own, so there is nothing to share.
    parser = subparsers.add_parser(
        "replay",
        help="replay a recorded stream (JSONL recording or raw .sse body) and show its tool calls",
        description=(
            "Replay a stream recorded by toolstitch.wrap(client, record=DIR) or stream.record(PATH), "
            "or a raw SSE response body, through the accumulator. Prints each tool call with its "
            "name, arguments, status and anomalies, a fragment timeline per call and the latency "
            "breakdown. Exit 0 when replayed, 2 when the file cannot be read or is not a recording."
        ),
    )
    parser.add_argument(
        "file",
        metavar="FILE",
        help="a .jsonl recording, a .sse body, or a run's timeline (RunResult.timeline.save(path))",
    )
    parser.add_argument("--html", metavar="OUT", help="also write a self-contained HTML report to OUT")
    parser.add_argument("--json", action="store_true", help="print a JSON report instead")
    parser.add_argument(
        "--timing",
        action="store_true",
        help="replay at the recorded pace, showing calls as they open and seal",
    )
    parser.set_defaults(run=_run)
