"""Hostile run timelines: ``toolstitch replay RUN.json`` never shows a traceback (issue 42, item 4).

A run's timeline (``RunResult.timeline.save(path)``) is a file like a recording: it can be edited,
cut short or written by something else, and it can hold any text a tool name or id held (a lone
surrogate, HTML). The same promise as for recordings (``test_hostile_files.py``, whose in-process
runner and checks this file shares): a file the command cannot use (a number that is NaN or
infinite, a value of the wrong type, a file cut short) gives exit 2 and exactly one line on stderr;
a file it can use gives output that encodes as strict UTF-8, ``--json`` that is strict JSON, and an
``--html`` page that is valid UTF-8 with every text escaped.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.cli.test_hostile_files import (
    DEEP,
    JSON_VALUES,
    TOO_DEEP,
    assert_one_line_exit_2,
    run_cli,
    run_process,
    strict_json,
)
from tests.conftest import examples
from toolstitch.loop import CallLane, Stage, StepLane, Timeline

S = "\udc00"  # a lone surrogate: valid JSON as the escape "\udc00", never valid UTF-8
FLAG_SETS = [[], ["--json"], ["--html", "OUT"], ["--json", "--html", "OUT"]]


def run_of(name: str = "search", text: str = "", total: float = 12.5) -> Timeline:
    """A run of two steps as the loop lays it out, with ``text`` added to every text it holds."""
    call = CallLane(
        0,
        0,
        f"call_1{text}",
        f"{name}{text}",
        f"ready{text}",
        f"ok{text}",
        [
            Stage(f"first_fragment{text}", 1.0),
            Stage("arguments", 1.0, 2.5),
            Stage("verdict", 2.5, None, f"sealed ready{text}"),
            Stage("execution", 2.0, 4.0, f"eager{text}"),
        ],
    )
    steps = [
        StepLane(0, [Stage("request", 0.0, 0.5), Stage(f"stream{text}", 0.5, 3.0, text)], [call]),
        StepLane(1, [Stage("answer", 5.0, 12.5)]),
    ]
    return Timeline(1_700_000_000.0, total, steps)


def saved(timeline: Timeline) -> Callable[[Path], None]:
    return lambda p: timeline.save(p)


def edited(change: Callable[[dict[str, Any]], object], raw: str | None = None) -> Callable[[Path], None]:
    """A saved run whose data ``change`` edited; ``raw`` replaces the text ``"@RAW@"`` in the JSON
    (so the file can hold what ``json.dumps`` never writes: ``NaN``, ``1e400``)."""

    def make(path: Path) -> None:
        data = run_of().as_dict()
        change(data)
        text = json.dumps(data, indent=1)
        if raw is not None:
            text = text.replace('"@RAW@"', raw)
        path.write_text(text, encoding="utf-8")

    return make


def put(*where: str | int, value: object = "@RAW@") -> Callable[[dict[str, Any]], None]:
    """Set the value at the path ``where`` (keys and list positions) in a run's data."""

    def change(data: dict[str, Any]) -> None:
        node: Any = data
        for key in where[:-1]:
            node = node[key]
        node[where[-1]] = value

    return change


def drop(*where: str | int) -> Callable[[dict[str, Any]], None]:
    def change(data: dict[str, Any]) -> None:
        node: Any = data
        for key in where[:-1]:
            node = node[key]
        del node[where[-1]]

    return change


CALL = ("steps", 0, "calls", 0)
STAGE = (*CALL, "stages", 1)

# Files that are usable, with hostile content: exit 0 and output that encodes.
USABLE_TIMELINES: dict[str, Callable[[Path], None]] = {
    "lone-surrogates-everywhere": saved(run_of(text=S)),
    "half-a-pair-everywhere": saved(run_of(text="\ud83d")),
    "html-in-every-text": saved(run_of(text='<script>alert("x")</script>&amp;')),
    "cjk-and-emoji": saved(run_of(text="東京 😀")),
    "line-breaks-in-text": saved(run_of(text="a\nb\r\nc")),
    "nulls-where-allowed": edited(
        lambda d: (
            [put(*CALL, k, value=None)(d) for k in ("id", "name", "result")] + [drop(*STAGE, "detail")(d)]
        )
    ),
    "no-steps": edited(put("steps", value=[])),
    "zero-total": edited(put("total", value=0)),
    "negative-start": edited(put(*STAGE, "start", value=-3.5)),  # a warm-up begun before the run
    "huge-but-finite": edited(put(*STAGE, "end", value=1e308)),
    "an-unknown-field": edited(put("extra", value=0)),
    "nested-900-deep-unused": lambda p: p.write_text(
        json.dumps(run_of().as_dict())[:-1] + ', "extra": ' + DEEP + "}", encoding="utf-8"
    ),
}

# Files no command can use: exit 2, one line, nothing on stdout.
UNUSABLE_TIMELINES: dict[str, Callable[[Path], None]] = {
    "nan-total": edited(put("total"), raw="NaN"),
    "infinite-total": edited(put("total"), raw="Infinity"),
    "minus-infinite-start": edited(put(*STAGE, "start"), raw="-Infinity"),
    "nan-end": edited(put(*STAGE, "end"), raw="NaN"),
    "nan-started-at": edited(put("started_at"), raw="NaN"),
    "overflowing-total": edited(put("total"), raw="1e400"),  # read as infinity
    "steps-a-number": edited(put("steps", value=5)),
    "steps-a-string": edited(put("steps", value="steps")),
    "steps-missing": edited(drop("steps")),
    "stages-an-object": edited(put(*CALL, "stages", value={"name": "x", "start": 1})),
    "stage-a-string": edited(put(*CALL, "stages", value=["execution"])),
    "index-a-string": edited(put(*CALL, "index", value="0")),
    "index-a-float": edited(put(*CALL, "index", value=0.5)),
    "index-a-boolean": edited(put("steps", 0, "index", value=True)),
    "name-a-number": edited(put(*CALL, "name", value=7)),
    "status-a-list": edited(put(*CALL, "status", value=["ready"])),
    "status-nested-900-deep": edited(put(*CALL, "status"), raw=DEEP),
    "start-a-string": edited(put(*STAGE, "start", value="1.0")),
    "start-a-boolean": edited(put(*STAGE, "start", value=False)),
    "detail-a-number": edited(put(*STAGE, "detail", value=3)),
    "call-without-status": edited(drop(*CALL, "status")),
    "another-version": edited(put("version", value=2)),
    "too-deep-to-read": lambda p: p.write_text(
        '{"format": "toolstitch.run-timeline", "version": 1, "steps": ' + TOO_DEEP + "}", encoding="utf-8"
    ),
    "truncated": lambda p: (run_of().save(p), p.write_bytes(p.read_bytes()[:200])),
    "non-utf8-bytes": lambda p: (
        run_of().save(p),
        p.write_bytes(p.read_bytes().replace(b"search", b"se\xffch")),
    ),
    "huge-integer-index": edited(put(*CALL, "index"), raw="9" * 5000),
}


def flags_for(flags: list[str], tmp_path: Path) -> list[str]:
    return [str(tmp_path / "run.html") if f == "OUT" else f for f in flags]


@pytest.mark.parametrize("flags", FLAG_SETS, ids=str)
@pytest.mark.parametrize("name", sorted(USABLE_TIMELINES))
def test_replay_of_a_hostile_timeline_prints_encodable_output(
    name: str, flags: list[str], tmp_path: Path
) -> None:
    path = tmp_path / f"{name}.json"
    USABLE_TIMELINES[name](path)
    result = run_cli("replay", str(path), *flags_for(flags, tmp_path))
    stderr = result.stderr.decode("utf-8", "replace")
    assert result.returncode == 0, stderr[-2000:]
    assert stderr == ""
    text = result.stdout.decode("utf-8")  # strict: no lone surrogate reached the bytes
    if "--json" in flags:
        report = strict_json(result.stdout)
        assert report["format"] == "toolstitch.run-timeline"
    else:
        assert text.startswith("run: ")
    if "--html" in flags:
        page = (tmp_path / "run.html").read_bytes().decode("utf-8")  # strict: valid UTF-8
        assert page.startswith("<!doctype html>") and page.endswith("</html>")
        assert "<script>" not in page


def test_every_text_keeps_its_lone_surrogate_as_an_escape(tmp_path: Path) -> None:
    path = tmp_path / "run.json"
    USABLE_TIMELINES["lone-surrogates-everywhere"](path)
    report = strict_json(run_cli("replay", str(path), "--json").stdout)
    call = report["steps"][0]["calls"][0]
    assert (call["id"], call["name"], call["status"], call["result"]) == (
        f"call_1{S}",
        f"search{S}",
        f"ready{S}",
        f"ok{S}",
    )
    assert report == run_of(text=S).as_dict()  # nothing lost, nothing replaced
    result = run_cli("replay", str(path), "--html", str(tmp_path / "run.html"))
    assert result.returncode == 0
    assert "search\\udc00" in result.stdout.decode("utf-8")
    page = (tmp_path / "run.html").read_text(encoding="utf-8")
    for text in ("search", "ok", "eager", "sealed ready", "first_fragment", "stream"):  # no id shown
        assert f"{text}\\udc00" in page, text


def test_a_file_name_that_is_not_utf8_is_escaped_in_the_page(tmp_path: Path) -> None:
    path = Path(os.fsdecode(bytes(tmp_path) + b"/run\xff.json"))  # the name holds "\udcff"
    run_of().save(path)
    result = run_cli("replay", str(path), "--html", str(tmp_path / "run.html"))
    assert result.returncode == 0, result.stderr
    result.stdout.decode("utf-8")
    assert "run\\udcff.json" in (tmp_path / "run.html").read_text(encoding="utf-8")


@pytest.mark.parametrize("flags", FLAG_SETS, ids=str)
@pytest.mark.parametrize("name", sorted(UNUSABLE_TIMELINES))
def test_replay_of_an_unusable_timeline_is_one_line_and_exit_2(
    name: str, flags: list[str], tmp_path: Path
) -> None:
    path = tmp_path / f"{name}.json"
    UNUSABLE_TIMELINES[name](path)
    result = run_cli("replay", str(path), *flags_for(flags, tmp_path))
    assert_one_line_exit_2(result, "replay")
    assert result.stdout == b""
    assert not (tmp_path / "run.html").exists()


def test_a_non_finite_timeline_says_what_is_wrong(tmp_path: Path) -> None:
    path = tmp_path / "run.json"
    UNUSABLE_TIMELINES["nan-total"](path)
    result = run_cli("replay", str(path), "--json")
    assert_one_line_exit_2(result, "replay")
    assert "run timeline" in result.stderr.decode("utf-8") and "total" in result.stderr.decode("utf-8")


@pytest.mark.parametrize("name", sorted([*USABLE_TIMELINES, *UNUSABLE_TIMELINES]))
def test_the_library_raises_only_value_error(name: str, tmp_path: Path) -> None:
    path = tmp_path / f"{name}.json"
    {**USABLE_TIMELINES, **UNUSABLE_TIMELINES}[name](path)
    try:
        timeline = Timeline.load(path)
    except ValueError as exc:
        assert name in UNUSABLE_TIMELINES, exc
        return
    assert name in USABLE_TIMELINES
    json.dumps(timeline.as_dict(), allow_nan=False)
    timeline.to_html()


@pytest.mark.parametrize(
    ("name", "flags", "code"),
    [
        ("lone-surrogates-everywhere", ["--html", "OUT"], 0),
        ("nan-total", ["--json"], 2),
    ],
)
def test_the_real_process_agrees(name: str, flags: list[str], code: int, tmp_path: Path) -> None:
    path = tmp_path / "run.json"
    {**USABLE_TIMELINES, **UNUSABLE_TIMELINES}[name](path)
    result = run_process("replay", str(path), *flags_for(flags, tmp_path))
    stderr = result.stderr.decode("utf-8")
    assert result.returncode == code, stderr
    assert "Traceback" not in stderr
    result.stdout.decode("utf-8")
    if code == 2:
        assert stderr.count("\n") == 1 and stderr.startswith("toolstitch replay: ")
    else:
        (tmp_path / "run.html").read_bytes().decode("utf-8")


# ------------------------------------------------------------------------------ any timeline at all

TEXTS = st.text(max_size=6) | st.sampled_from([S, "\ud83d", "<b>", "東京"])
VALUES = JSON_VALUES | TEXTS
PLACES = [
    ("started_at",),
    ("total",),
    ("version",),
    ("steps",),
    ("steps", 0),
    ("steps", 0, "index"),
    ("steps", 0, "stages"),
    ("steps", 0, "stages", 0, "start"),
    ("steps", 0, "stages", 1, "end"),
    ("steps", 0, "stages", 1, "detail"),
    (*CALL,),
    *((*CALL, key) for key in ("step", "index", "id", "name", "status", "result", "stages")),
    *((*STAGE, key) for key in ("name", "start", "end", "detail")),
    ("steps", 1, "calls"),
]


@settings(max_examples=examples(80), suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    changes=st.lists(st.tuples(st.sampled_from(PLACES), VALUES), min_size=1, max_size=3),
    flags=st.sampled_from(FLAG_SETS),
)
def test_any_timeline_shaped_file_is_drawn_or_refused(
    changes: list[tuple[tuple[str | int, ...], Any]], flags: list[str], tmp_path: Path
) -> None:
    data: Any = run_of(text=S).as_dict()
    for where, value in changes:
        node = data
        try:
            for key in where[:-1]:
                node = node[key]
            node[where[-1]] = value
        except (KeyError, IndexError, TypeError):
            continue  # an earlier change removed the place
    path = tmp_path / "run.json"
    path.write_text(json.dumps(data), encoding="utf-8")  # NaN and Infinity as JSON writes them
    out = tmp_path / "run.html"
    out.unlink(missing_ok=True)
    result = run_cli("replay", str(path), *flags_for(flags, tmp_path))
    if result.returncode == 2:
        assert_one_line_exit_2(result, "replay")
        assert result.stdout == b""
        return
    assert result.returncode == 0, result.stderr
    assert result.stderr == b""
    result.stdout.decode("utf-8")
    if "--json" in flags:
        strict_json(result.stdout)
    if "--html" in flags:
        out.read_bytes().decode("utf-8")
