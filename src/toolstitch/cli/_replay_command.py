"""``toolstitch replay FILE``: a recorded stream, replayed, with its calls, timeline and latencies.

Exit 0 when replayed, 2 (one line on stderr) when the file cannot be read or is not a recording
or a run timeline. A file is hostile input: whatever it holds, the command ends with 0 or 2, its
output encodes, ``--json`` is strict JSON and ``--html`` is valid UTF-8.
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
from ._output import SafeOutput, fail, json_text, one_line, write_page

__all__ = ["DESCRIPTION", "HELP", "NAME", "add_arguments", "run"]


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


def _saved_run(path: str) -> dict[str, Any] | None:
    """The data of ``path`` when it says it is a run timeline (``RunResult.timeline.save``), or
    None for anything else, which is then read as a recording (or refused as one)."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read(64 * 1024 * 1024)
        data = json.loads(text)
    except (OSError, ValueError, RecursionError):  # RecursionError: nested too deep to read
        return None
    return data if isinstance(data, dict) and data.get("format") == Timeline.FORMAT else None


def _run_timeline(args: argparse.Namespace, data: dict[str, Any]) -> int:
    """A saved run timeline: its waterfall (``--html``), and one line per stage (or ``--json``).

    What it holds is refused, in one line, unless it is what ``Timeline.save`` writes (the types,
    finite numbers: ``Timeline.from_dict``), so every output below is drawn from checked values.
    """
    try:
        timeline = Timeline.from_dict(data)
    except ValueError as exc:
        return fail("replay", f"{args.file}: not a usable run timeline: {exc}")
    out = SafeOutput(sys.stdout)
    if args.html:
        try:
            write_page(args.html, timeline.to_html(f"toolstitch run: {Path(args.file).name}"))
        except OSError as exc:
            return fail("replay", f"cannot write {args.html}: {exc.strerror or exc}")
    if args.json:
        out.write(json_text(timeline.as_dict()))
        return 0
    out.write(f"run: {len(timeline.steps)} steps, {len(timeline.calls)} calls, {timeline.total:.1f} ms\n")
    for step in timeline.steps:
        lanes = [(f"step {step.index}", step.stages)]
        lanes += [(f"  #{c.index} {one_line(c.name or '?', 60)}", c.stages) for c in step.calls]
        for who, stages in lanes:
            for st in stages:
                end = "" if st.end is None else f" -> {st.end:8.1f}"
                name, detail = one_line(st.name, 60), one_line(st.detail, 60)
                out.write(f"{who:<28} {name:<15} {st.start:8.1f}{end} ms {detail}".rstrip() + "\n")
    if args.html:
        out.write(f"\nHTML waterfall: {args.html}\n")
    return 0


def run(args: argparse.Namespace) -> int:
    saved_run = _saved_run(args.file)
    if saved_run is not None:
        return _run_timeline(args, saved_run)
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
            write_page(args.html, report_html(replayed))
        except OSError as exc:
            return fail("replay", f"cannot write {args.html}: {exc.strerror or exc}")
    if args.json:
        out.write(json_text(report_data(replayed)))
    else:
        out.write(report_text(replayed))
        if args.html:
            out.write(f"\nHTML report: {args.html}\n")
    return 0


NAME = "replay"
HELP = "replay a recorded stream (JSONL recording or raw .sse body) and show its tool calls"
DESCRIPTION = """\
Replay a stream recorded by toolstitch.wrap(client, record=DIR) or stream.record(PATH), or a raw SSE
response body, through the accumulator. Prints each tool call with its name, arguments, status and
anomalies, a fragment timeline per call and the latency breakdown. Exit 0 when replayed, 2 when the
file cannot be read or is not a recording.
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``toolstitch replay``."""
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
