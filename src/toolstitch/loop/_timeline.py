"""The waterfall of a run: each step's and each call's stages on one time line (``RunResult.timeline``).

What a person waits for in a tool-using turn is spread over several clocks: the request, the first
chunk, each call's first fragment and the moment its arguments closed, the verdict (sealed, or
refused early while the stream still ran), the tool's warm-up, the gate, the function itself, the
results going back, the answer. The loop already keeps each of those instants (the calls' metrics,
the results' timings, the step's marks); this module only lays them out, in milliseconds since the
run began, as plain data (:meth:`Timeline.as_dict`, JSON through :meth:`Timeline.save`), as an HTML
waterfall (:meth:`Timeline.to_html`, ``loop/_waterfall.py``) and as OpenTelemetry span events
(``toolstitch.stage``, one per stage, stamped with the stage's own start time).

Stage names: per step ``request`` (sent → first chunk), ``stream`` (first chunk → end),
``results_sent`` (the next request, carrying the results), ``answer`` (the last step's text),
``abandoned`` (``fail_fast`` closed the stream);
per call ``first_fragment``, ``arguments`` (first fragment → complete JSON), ``verdict``
(``detail``: ``sealed`` or ``early``, and the status), ``warm_up``, ``gate``, ``execution``
(``detail``: ``eager``, ``cached``, ``reused`` when so).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from ..core import ToolCall, wall_clock
from ..tools import stage_event
from ._waterfall import waterfall_html

if TYPE_CHECKING:
    from ..tools import Toolbox, ToolResult
    from ._results import Step

__all__ = [
    "CallLane",
    "Stage",
    "StepLane",
    "Timeline",
    "build_timeline",
    "stage_events",
]  # the package exports all but the last two

FORMAT = "toolstitch.run-timeline"
#: The version :meth:`Timeline.as_dict` writes, and the only one :meth:`Timeline.from_dict` reads.
VERSION = 1


class _PlainData:
    """``as_dict()`` for the timeline's dataclasses: their fields in order, a list of stages or lanes
    as theirs, so adding a field cannot leave it out of the saved file."""

    __slots__ = ()

    def as_dict(self) -> dict[str, Any]:
        form: dict[str, Any] = {}
        for item in fields(self):  # type: ignore[arg-type]  # every subclass is a dataclass
            value = getattr(self, item.name)
            form[item.name] = [part.as_dict() for part in value] if isinstance(value, list) else value
        return form


@dataclass(frozen=True, slots=True)
class Stage(_PlainData):
    """One stage: ``start`` and ``end`` in milliseconds since the run began (``end`` None: an
    instant); ``detail`` a short word (``eager``, ``early``, ``cached`` …)."""

    name: str
    start: float
    end: float | None = None
    detail: str = ""

    @property
    def duration(self) -> float:
        return 0.0 if self.end is None else self.end - self.start


@dataclass(slots=True)
class CallLane(_PlainData):
    """One call's stages (its result's status in ``result``, None when it has none)."""

    step: int
    index: int
    id: str | None
    name: str | None
    status: str
    result: str | None
    stages: list[Stage] = field(default_factory=list)

    def stage(self, name: str) -> Stage | None:
        """The first stage called ``name``, or None."""
        return next((s for s in self.stages if s.name == name), None)


@dataclass(slots=True)
class StepLane(_PlainData):
    """One step's own stages and its calls'."""

    index: int
    stages: list[Stage] = field(default_factory=list)
    calls: list[CallLane] = field(default_factory=list)

    def stage(self, name: str) -> Stage | None:
        return next((s for s in self.stages if s.name == name), None)


@dataclass(slots=True)
class Timeline(_PlainData):
    """The stages of a run, per step and per call, in milliseconds since ``started_at`` (Unix time).

    ``total`` is the run's length in milliseconds. Plain data: :meth:`as_dict`, :meth:`save` and
    :meth:`load` (what ``toolstitch replay --html OUT RUN.json`` reads), :meth:`to_html`.
    """

    #: What :meth:`as_dict` writes as ``format``: a file that says so is a run timeline, to be read
    #: as one or refused (``toolstitch replay`` reads it before trying a recording).
    FORMAT: ClassVar[str] = FORMAT

    started_at: float
    total: float
    steps: list[StepLane] = field(default_factory=list)

    @property
    def calls(self) -> list[CallLane]:
        """Every call of the run, in order."""
        return [c for s in self.steps for c in s.calls]

    def as_dict(self) -> dict[str, Any]:
        return {"format": FORMAT, "version": VERSION, **_PlainData.as_dict(self)}

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write :meth:`as_dict` as JSON (``toolstitch replay --html OUT PATH`` draws it)."""
        Path(path).write_text(json.dumps(self.as_dict(), indent=1), encoding="utf-8")

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Timeline:
        """A timeline from :meth:`as_dict`'s data; ``ValueError`` when it is not one.

        A saved run is a file like any other (edited, cut short, written by something else), and
        what is read here is drawn and printed: every value must have the type :meth:`as_dict`
        writes (a number that is not finite, NaN or an infinity, is refused, so a report is always
        strict JSON), and nothing but ``ValueError`` comes out, however odd the data.
        """
        if not isinstance(data, Mapping) or data.get("format") != FORMAT:
            raise ValueError(f"not a {FORMAT} document")
        try:
            if _integer(data.get("version"), "version") != VERSION:
                raise ValueError(f"version {data['version']} (this release reads version {VERSION})")
            steps = [
                StepLane(
                    _integer(s["index"], "a step's index"),
                    [_stage(x) for x in _list(s["stages"], "a step's stages")],
                    [
                        CallLane(
                            _integer(c["step"], "a call's step"),
                            _integer(c["index"], "a call's index"),
                            _text(c.get("id"), "a call's id"),
                            _text(c.get("name"), "a call's name"),
                            _string(c["status"], "a call's status"),
                            _text(c.get("result"), "a call's result"),
                            [_stage(x) for x in _list(c["stages"], "a call's stages")],
                        )
                        for c in _list(s["calls"], "a step's calls")
                    ],
                )
                for s in _list(data["steps"], "steps")
            ]
            return cls(_number(data["started_at"], "started_at"), _number(data["total"], "total"), steps)
        except (KeyError, TypeError, ValueError, AttributeError, RecursionError) as exc:
            raise ValueError(f"a malformed {FORMAT} document: {type(exc).__name__}: {exc}") from None

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Timeline:
        """Read what :meth:`save` wrote (``ValueError`` when the file is not a run timeline)."""
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except (ValueError, RecursionError) as exc:  # RecursionError: nested too deep to read
            raise ValueError(f"not JSON: {exc}") from None
        return cls.from_dict(data)

    def to_html(self, title: str = "toolstitch run") -> str:
        """One self-contained HTML page: the waterfall (see ``loop/_waterfall.py``)."""
        return waterfall_html(self, title)


def _stage(data: Any) -> Stage:
    if not isinstance(data, Mapping):
        raise TypeError(f"a stage is {type(data).__name__}, not an object")
    end = data.get("end")
    detail = data.get("detail")
    return Stage(
        _string(data["name"], "a stage's name"),
        _number(data["start"], "a stage's start"),
        None if end is None else _number(end, "a stage's end"),
        "" if detail is None else _string(detail, "a stage's detail"),
    )


def _list(value: Any, what: str) -> list[Any]:
    if not isinstance(value, list):
        raise TypeError(f"{what} is {type(value).__name__}, not a list")
    return value


def _number(value: Any, what: str) -> float:
    """A finite number (``bool`` is not one): NaN or an infinity would reach the reports."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{what} is {type(value).__name__}, not a number")
    try:
        number = float(value)
    except OverflowError:  # an integer beyond a double's range
        number = math.inf
    if not math.isfinite(number):
        raise ValueError(f"{what} is not a finite number ({number})")
    return number


def _integer(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{what} is {type(value).__name__}, not an integer")
    return value


def _string(value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{what} is {type(value).__name__}, not a string")
    return value


def _text(value: Any, what: str) -> str | None:
    return None if value is None else _string(value, what)


# ----------------------------------------------------------------------------- building


def build_timeline(steps: Sequence[Step], t0: float, box: Toolbox | None) -> Timeline:
    """The timeline of ``steps`` (monotonic instants from their marks, calls and results), in
    milliseconds since ``t0``. ``box`` gives the tools' warm-ups."""

    def ms(at: float | None) -> float | None:
        return None if at is None else round((at - t0) * 1000.0, 3)

    lanes: list[StepLane] = []
    end = t0
    for n, step in enumerate(steps):
        marks = step.marks
        lane = StepLane(step.index)
        sent, first, ended = marks.get("request_sent"), marks.get("first_chunk"), marks.get("stream_end")
        if sent is not None:
            lane.stages.append(Stage("request", ms(sent) or 0.0, ms(first if first is not None else ended)))
        if first is not None and ended is not None:
            lane.stages.append(Stage("stream", ms(first) or 0.0, ms(ended)))
        nxt = steps[n + 1].marks.get("request_sent") if n + 1 < len(steps) else None
        if step.results and nxt is not None:
            lane.stages.append(Stage("results_sent", ms(nxt) or 0.0))
        if step.correction is not None and ended is not None:
            lane.stages.append(Stage("abandoned", ms(ended) or 0.0, None, "fail_fast"))
        if not step.calls and first is not None and ended is not None:
            lane.stages.append(Stage("answer", ms(first) or 0.0, ms(ended)))
        results = {id(r.call): r for r in step.results}
        for call in step.calls:
            lane.calls.append(_call_lane(step.index, call, results.get(id(call)), marks, box, ms))
        lanes.append(lane)
        for value in (*marks.values(), *(r.timings.finished_at or 0.0 for r in step.results)):
            end = max(end, value)
    return Timeline(wall_clock(t0), round((end - t0) * 1000.0, 3), lanes)


def _call_lane(
    step: int, call: ToolCall, result: ToolResult | None, marks: Mapping[str, float], box: Any, ms: Any
) -> CallLane:
    m = call.metrics
    lane = CallLane(step, call.index, call.id, call.name, call.status, result.status if result else None)
    if m.opened_at is not None:
        lane.stages.append(Stage("first_fragment", ms(m.opened_at)))
        if m.arguments_complete_at is not None:
            lane.stages.append(Stage("arguments", ms(m.opened_at), ms(m.arguments_complete_at)))
    if m.sealed_at is not None:
        finish = marks.get("finish")
        early = call.status == "invalid" and (finish is None or m.sealed_at < finish)
        lane.stages.append(
            Stage("verdict", ms(m.sealed_at), None, f"{'early' if early else 'sealed'} {call.status}")
        )
    if result is None:
        return lane
    timings = result.timings
    warm = box.warm_state(call.name) if box is not None and call.name else None
    if warm is not None and timings.started_at is not None and not timings.cached:
        lane.stages.append(Stage("warm_up", ms(warm.started_at), ms(warm.finished_at), warm.status))
    start = timings.started_at
    anchor = start if start is not None else marks.get("stream_end")
    if anchor is not None and timings.validation:
        gate_end = anchor - timings.warm if start is not None else anchor
        lane.stages.append(Stage("gate", ms(gate_end - timings.validation), ms(gate_end)))
    detail = " ".join(
        w for w, on in (("eager", timings.eager), ("cached", result.cached), ("reused", result.reused)) if on
    )
    if start is not None:
        lane.stages.append(Stage("execution", ms(start), ms(timings.finished_at), detail))
    elif result.cached or result.reused:
        at = marks.get("stream_end")
        if at is not None:
            lane.stages.append(Stage("execution", ms(at), ms(at), detail))
    return lane


def stage_events(timeline: Timeline) -> None:
    """The timeline's stages as OpenTelemetry span events (``toolstitch.stage``) on the current
    span, each stamped with its stage's start (nothing without OpenTelemetry)."""
    origin = timeline.started_at
    for step in timeline.steps:
        for s in step.stages:
            stage_event({"step": step.index, **s.as_dict()}, origin + s.start / 1000.0)
        for c in step.calls:
            for s in c.stages:
                where = {"step": step.index, "call.index": c.index, "call.id": c.id, "tool": c.name}
                stage_event({**where, **s.as_dict()}, origin + s.start / 1000.0)


_BACKGROUND_FP = "background-response"
