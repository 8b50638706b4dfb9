"""``RunResult.timeline``: the waterfall of a run as data (issue 30, item 6), over real HTTP."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

import toolstitch as ts
from tests.tools._support import first_chunk_of, text_reply, user
from toolstitch.cli import main
from toolstitch.loop import Timeline
from toolstitch.testing import LocalServer, StreamScript, tool_call_chunks
from toolstitch.tools import Toolbox, tool

warmed = threading.Event()
searching = threading.Event()


def connect() -> None:
    warmed.set()


@tool(read_only=True, warm=connect, cache=60)
def search(city: str) -> str:
    """Search hotels."""
    searching.set()
    return f"hotels in {city}"


@tool
def book(city: str) -> str:
    """Book (a side effect: never eager)."""
    return "booked"


@pytest.fixture
def server() -> Iterator[LocalServer]:
    with LocalServer(check_history=True) as srv:
        yield srv


def turn(server: LocalServer) -> ts.RunResult:
    calls = [("c1", "search", '{"city": "Rome"}'), ("c2", "book", '{"city": "Rome"}')]
    again = [("c3", "search", '{"city": "Rome"}')]
    chunks = tool_call_chunks(calls, interleave=False, pieces=4)
    searching.clear()
    server.enqueue(
        # The eager search starts as soon as its arguments are complete; the model writes the book
        # call only once it began, so it began inside the stream on any machine, however loaded.
        StreamScript(chunks, delay=0.003, hold={first_chunk_of(chunks, "c2"): searching}),
        StreamScript(tool_call_chunks(again)),
        text_reply("Booked in Rome."),
    )
    with Toolbox([search, book]) as box:
        return ts.run(server.client(), model="m", messages=user(), toolbox=box)


def test_each_step_and_call_has_its_stages_in_order(server: LocalServer) -> None:
    result = turn(server)
    timeline = result.timeline
    assert timeline is not None and [s.index for s in timeline.steps] == [0, 1, 2]
    first, second, last = timeline.steps
    assert [s.name for s in first.stages] == ["request", "stream", "results_sent"]
    assert [s.name for s in last.stages] == ["request", "stream", "answer"]
    request, stream = first.stage("request"), first.stage("stream")
    assert request is not None and stream is not None and request.end == stream.start
    eager, sealed = first.calls
    assert (eager.name, eager.result, sealed.name) == ("search", "ok", "book")
    names = [s.name for s in eager.stages]
    assert names == ["first_fragment", "arguments", "verdict", "warm_up", "gate", "execution"]
    execution, verdict = eager.stage("execution"), eager.stage("verdict")
    assert execution is not None and verdict is not None and stream.end is not None
    assert execution.detail == "eager" and verdict.detail == "sealed ready"
    # The eager call started while the stream still ran; the other only after its seal.
    assert execution.start < stream.end
    booked = sealed.stage("execution")
    assert booked is not None and booked.detail == "" and booked.start >= stream.end
    warm = eager.stage("warm_up")
    assert warm is not None and warm.start <= (request.end or 0) and warm.detail == "ok"
    results_sent = first.stage("results_sent")
    assert results_sent is not None and execution.end is not None and results_sent.start >= execution.end
    # The second step's search is answered from the cache.
    [cached] = second.calls
    cached_run = cached.stage("execution")
    assert cached_run is not None and cached_run.detail == "cached"
    assert timeline.total >= (last.stage("answer") or request).start


def test_the_timeline_is_plain_data_and_comes_back_from_a_file(server: LocalServer, tmp_path: Path) -> None:
    timeline = turn(server).timeline
    assert timeline is not None
    data = json.loads(json.dumps(timeline.as_dict()))
    assert data["format"] == "toolstitch.run-timeline"
    path = tmp_path / "run.json"
    timeline.save(path)
    assert Timeline.load(path) == timeline
    with pytest.raises(ValueError):
        Timeline.from_dict({"format": "something else"})
    with pytest.raises(ValueError):
        Timeline.from_dict({"format": "toolstitch.run-timeline", "steps": [{"index": "x"}]})


def test_replay_draws_a_saved_run(
    server: LocalServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    result = turn(server)
    assert result.timeline is not None
    path, out = tmp_path / "run.json", tmp_path / "run.html"
    result.timeline.save(path)
    assert main(["replay", str(path), "--html", str(out)]) == 0
    text = capsys.readouterr().out
    assert text.startswith("run: 3 steps, 3 calls, ") and "execution" in text and "eager" in text
    page = out.read_text(encoding="utf-8")
    assert page.startswith("<!doctype html>") and 'data-stage="execution"' in page
    assert main(["replay", str(path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["format"] == "toolstitch.run-timeline"
    assert result.to_html().startswith("<!doctype html>")
