"""The HTML replay report (``toolstitch replay FILE --html OUT``) in a real browser.

What a person reading a bug report sees: an incomplete call is never drawn or listed as sealed, the
stream's error has its original type, each fragment's text is there to read, the request is shown
with its credentials masked, and provider text that looks like HTML stays text (nothing runs, the
console stays clean). Driven by chromium through Playwright (see ``tests/browser.py``).
"""

from __future__ import annotations

from pathlib import Path

import openai
import pytest

import toolstitch as ts
from tests.browser import Watched, browser_context, watched  # noqa: F401 (fixtures)
from tests.conftest import WEATHER_TOOLS
from toolstitch.cli import main
from toolstitch.testing import LocalServer, StreamScript, chunk, tool_call_chunks

HOSTILE = "<img src=x onerror=\"console.error('ran')\"><script>console.error('ran')</script>"
SECRET = "sk-proj-" + "Z9y8X7w6V5u4T3s2R1q0" * 2


def record(server: LocalServer, folder: Path, script: StreamScript) -> Path:
    server.enqueue(script)
    client = ts.wrap(server.client(api_key=SECRET), record=folder)
    try:
        with client.chat.completions.create(
            model="m",
            messages=[{"role": "user", "content": f"Weather? {HOSTILE}"}],
            tools=WEATHER_TOOLS,
            stream=True,
        ) as stream:
            for _ in stream:
                pass
    except openai.APIConnectionError:
        pass
    return max(folder.glob("*.jsonl"))


@pytest.fixture
def cut_report(server: LocalServer, tmp_path: Path) -> Path:
    calls = [("call_1", "get_weather", '{"city": "Zürich", "unit": "celsius"}')]
    script = [chunk(delta={"role": "assistant", "content": HOSTILE}), *tool_call_chunks(calls, pieces=6)[1:]]
    path = record(server, tmp_path / "rec", StreamScript(script, cut_after=6))
    out = tmp_path / "report.html"
    assert main(["replay", str(path), "--html", str(out)]) == 0
    return out


def test_an_incomplete_call_is_never_shown_as_sealed(watched: Watched, cut_report: Path) -> None:  # noqa: F811
    page = watched.page
    page.goto(cut_report.as_uri())
    assert page.text_content(".call .badge") == "incomplete"
    header = [th.text_content() for th in page.query_selector_all("table:has(th:text('sealed')) th")]
    row = [
        td.text_content() for td in page.query_selector_all("table:has(th:text('sealed')) tr:nth-child(2) td")
    ]
    assert row[0] == "#0 get_weather" and row[header.index("sealed")] == "-"
    titles = page.eval_on_selector_all("svg title", "ts => ts.map(t => t.textContent)")
    assert any(t.startswith("never sealed: incomplete at") for t in titles)
    assert not any(t.startswith("sealed") for t in titles)
    body = page.inner_text("body")
    assert "stream error: APIConnectionError: Connection error." in body
    assert "the stream failed (APIConnectionError) before the call was sealed" in body
    assert "RecordedError" not in page.content()
    assert not watched.errors


def test_fragments_and_the_request_are_there_to_read(watched: Watched, cut_report: Path) -> None:  # noqa: F811
    page = watched.page
    page.goto(cut_report.as_uri())
    fragments = page.query_selector_all("td.frag")
    assert fragments and all(f.is_visible() for f in fragments)
    text = "".join(f.text_content() or "" for f in fragments)
    assert text.startswith('{"city": "Z') and '{"city": "Zürich", "unit": "celsius"}'.startswith(text)
    assert page.is_visible("h2:text('Request')")
    assert "model m · 1 message · tools get_weather" in page.inner_text("body")
    page.click("summary:text('parameters as recorded')")
    request = page.text_content("pre.request") or ""
    assert '"tools"' in request and SECRET not in page.content()
    assert not watched.errors


def test_provider_text_that_looks_like_html_stays_text(watched: Watched, cut_report: Path) -> None:  # noqa: F811
    page = watched.page
    page.goto(cut_report.as_uri())
    assert page.query_selector_all("img") == [] and len(page.query_selector_all("script")) == 0
    assert HOSTILE in page.inner_text("body")  # the content, and the user's question, as text
    assert not watched.errors
