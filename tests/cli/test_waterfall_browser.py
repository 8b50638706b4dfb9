"""The run waterfall (``RunResult.to_html()``, ``toolstitch replay --html OUT RUN.json``) in Chromium.

What a person reads at a glance: one row per step and per call, each stage a bar on one time axis
(the eager call's execution bar begins before its stream's bar ends, the sealed call's after it),
a legend, and names from the model that look like HTML kept as text (nothing runs, the console
stays clean). Driven by chromium through Playwright (see ``tests/browser.py``).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import toolstitch as ts
from tests.browser import Watched, browser_context, watched  # noqa: F401 (fixtures)
from tests.tools._support import first_chunk_of, text_reply, user
from toolstitch.cli import main
from toolstitch.loop import Timeline
from toolstitch.testing import LocalServer, StreamScript, tool_call_chunks

HOSTILE = "<img src=x onerror=\"console.error('ran')\">"
searching = threading.Event()


@ts.tool(read_only=True)
def search(city: str) -> str:
    """Search hotels."""
    searching.set()
    return f"hotels in {city}"


@ts.tool
def book(city: str) -> str:
    """Book a room."""
    return "booked"


@pytest.fixture
def page_file(tmp_path: Path) -> Iterator[Path]:
    calls = [("c1", "search", '{"city": "Rome"}'), ("c2", "book", '{"city": "Rome"}'), ("c3", "lookup", "{}")]
    chunks = tool_call_chunks(calls, interleave=False, pieces=4)
    searching.clear()
    with LocalServer() as server, ts.Toolbox([search, book]) as box:
        server.enqueue(
            # The model writes the next call only once the eager search began: its bar begins
            # inside the stream's on any machine, however loaded.
            StreamScript(chunks, delay=0.003, hold={first_chunk_of(chunks, "c2"): searching}),
            text_reply("Booked."),
        )
        result = ts.run(server.client(), model="m", messages=user(), toolbox=box)
    assert result.timeline is not None
    # A saved run file is read as data from anywhere: a name in it that looks like HTML stays text.
    data = result.timeline.as_dict()
    data["steps"][0]["calls"][2]["name"] = HOSTILE
    timeline = Timeline.from_dict(data)
    saved, out = tmp_path / "run.json", tmp_path / "run.html"
    timeline.save(saved)
    assert main(["replay", str(saved), "--html", str(out)]) == 0
    assert out.read_text(encoding="utf-8") == timeline.to_html(f"toolstitch run: {saved.name}")
    yield out


def box_of(page: Any, selector: str) -> dict[str, float]:
    found = page.query_selector(selector)
    assert found is not None, selector
    box: dict[str, float] = found.bounding_box()
    return box


def test_the_waterfall_shows_each_step_and_call_on_one_axis(watched: Watched, page_file: Path) -> None:  # noqa: F811
    page = watched.page
    page.goto(page_file.as_uri())
    assert len(page.query_selector_all(".row.step")) == 2
    assert len(page.query_selector_all(".row.call")) == 3
    stream = box_of(page, '.row.step[data-step="0"] .bar[data-stage="stream"]')
    eager = box_of(page, '.row.call[data-call="0"] .bar[data-stage="execution"]')
    sealed = box_of(page, '.row.call[data-call="1"] .bar[data-stage="execution"]')
    assert (
        page.get_attribute('.row.call[data-call="0"] .bar[data-stage="execution"]', "data-detail") == "eager"
    )
    # Read by eye: the eager call's bar begins left of the stream's end, the sealed call's right of it.
    assert eager["x"] < stream["x"] + stream["width"]
    assert sealed["x"] >= stream["x"] + stream["width"] - 1
    assert all(page.is_visible(f'.legend span:has-text("{n}")') for n in ("stream", "execution", "warm_up"))
    assert page.inner_text("#total").endswith(" ms")


def test_names_from_the_model_stay_text(watched: Watched, page_file: Path) -> None:  # noqa: F811
    page = watched.page
    page.goto(page_file.as_uri())
    assert page.query_selector_all("img") == [] and page.query_selector_all("script") == []
    assert HOSTILE in page.inner_text(".row.call[data-call='2'] .label")
    refused = page.inner_text(".row.call[data-call='2'] .label")
    assert "refused" in refused
    assert not watched.errors
