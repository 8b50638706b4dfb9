"""``toolstitch demo --web`` in a real browser: what a person sees while the conversation streams.

The page is driven by chromium through Playwright (see ``tests/browser.py``). Nothing is timed: a
``MutationObserver`` installed before the conversation starts records every state the cards pass
through, and the test waits on DOM states (``wait_for_function``), then reads the sequence.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from tests.browser import Watched, browser_context, watched  # noqa: F401 (fixtures)
from tests.conftest import ROOT
from toolstitch.cli._web import WebDemo, page_html

#: Records, for each card, every (status, shown arguments, raw text) it passes through, in order.
OBSERVE = """() => {
  window.__states = [];
  const snapshot = () => {
    for (const card of document.querySelectorAll('.card')) {
      const args = {};
      for (const dd of card.querySelectorAll('dl.args dd')) args[dd.dataset.key] = dd.textContent;
      const state = {key: card.dataset.key, status: card.dataset.status,
                     args: args, raw: card.querySelector('pre.raw').textContent,
                     name: card.querySelector('.name').textContent};
      const last = window.__states.filter(s => s.key === state.key).pop();
      if (!last || JSON.stringify(last) !== JSON.stringify(state)) window.__states.push(state);
    }
  };
  new MutationObserver(snapshot).observe(document.body,
      {subtree: true, childList: true, characterData: true, attributes: true});
}"""


@pytest.fixture(scope="module")
def demo() -> Iterator[WebDemo]:
    # 30 ms between chunks: a person sees each argument arrive; the test does not depend on it.
    with WebDemo(delay=0.03) as server:
        yield server


def city_shown(state: dict[str, Any]) -> str | None:
    """The city a card shows: from its preview rows, or else from the argument text as it arrived."""
    if "city" in state["args"]:
        return str(state["args"]["city"]).strip('"')
    raw = state["raw"]
    marker = '"city": "'
    if marker in raw:
        return raw.split(marker, 1)[1].split('"', 1)[0]
    return None


def run_conversation(watched: Watched, demo: WebDemo) -> list[dict[str, Any]]:  # noqa: F811
    page = watched.page
    page.goto(demo.url)
    page.evaluate(OBSERVE)
    page.click("#ask")
    page.wait_for_function("document.body.dataset.done !== undefined")
    assert page.evaluate("document.body.dataset.done") == "ok", page.text_content("#status")
    states: list[dict[str, Any]] = page.evaluate("window.__states")
    return states


def test_a_card_shows_a_partial_city_before_the_whole_one(watched: Watched, demo: WebDemo) -> None:  # noqa: F811
    states = run_conversation(watched, demo)
    # The scripted model cuts arguments every 3 characters: "Zürich" arrives as `"Zü`, `ric`, `h",`
    # (東京 arrives whole, in one piece). The first card is Zürich's.
    for key, city in ((states[0]["key"], "Zürich"),):
        shown = [city_shown(s) for s in states if s["key"] == key]
        seen = [c for c in shown if c]
        assert city in seen, (key, shown)
        first_whole = seen.index(city)
        partial = [c for c in seen[:first_whole] if city.startswith(c) and c != city]
        assert partial, f"card {key} never showed a partial city before {city!r}: {seen}"
        statuses = [s["status"] for s in states if s["key"] == key]
        assert statuses[0] == "streaming" and statuses[-1] == "ready"
        # Ready only once the whole city was there: never a ready card with a partial value.
        assert all(city_shown(s) == city for s in states if s["key"] == key and s["status"] == "ready")
    assert not watched.errors


def test_what_a_person_sees_at_the_end(watched: Watched, demo: WebDemo) -> None:  # noqa: F811
    run_conversation(watched, demo)
    page = watched.page
    answer = page.text_content("#answer") or ""
    assert "Zürich has 14 °C and overcast" in answer and "東京 has 22 °C and sunny" in answer
    assert "16,250.00 JPY" in answer
    assert page.is_visible("#answer")
    cards = page.query_selector_all(".card")
    assert [c.get_attribute("data-status") for c in cards] == ["ready", "ready", "ready"]
    names = [c.query_selector(".name").text_content() for c in cards]  # type: ignore[union-attr]
    assert names == ["get_weather", "get_weather", "convert_currency"]
    city = cards[0].query_selector('dd[data-key="city"]')
    assert city is not None and city.text_content().strip('"') == "Zürich"
    results = [c.query_selector(".result").text_content() for c in cards]  # type: ignore[union-attr]
    shown = [json.loads(r.removeprefix("→ ")) for r in results]
    assert shown[0]["conditions"] == "overcast" and shown[2]["result"] == 16250.0
    assert [c.get_attribute("data-run") for c in cards] == ["done", "done", "done"]
    assert page.text_content("#status") == "done" and page.is_enabled("#ask")
    assert not watched.errors


def test_the_page_asks_again(watched: Watched, demo: WebDemo) -> None:  # noqa: F811
    """A second question in the same page starts from a clean conversation."""
    run_conversation(watched, demo)
    page = watched.page
    page.evaluate("delete document.body.dataset.done")
    page.click("#ask")
    page.wait_for_function("document.body.dataset.done === 'ok'")
    assert len(page.query_selector_all(".card")) == 3
    assert not watched.errors


def test_the_page_is_one_file_with_no_external_asset() -> None:
    page = page_html().decode()
    assert "<script>" in page and "EventSource" in page
    for outside in ("http://", "https://", "src=", '<link rel="stylesheet"'):
        assert outside not in page, outside


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_the_command_prints_its_url_serves_the_page_and_stops_on_ctrl_c() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    env.pop("OPENAI_API_KEY", None)
    process = subprocess.Popen(
        [sys.executable, "-m", "toolstitch", "demo", "--web", "--port", "0", "--delay", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        # Ctrl-C as a terminal delivers it: a test run in the background (``./dev test`` runs two
        # pytest processes with ``&``) has SIGINT ignored, which a child would inherit.
        preexec_fn=_default_sigint,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line.startswith("toolstitch demo: open http://127.0.0.1:"), line
        url = line.split("open ", 1)[1].split()[0]
        with urllib.request.urlopen(url, timeout=30) as reply:
            assert b"EventSource" in reply.read()
        with urllib.request.urlopen(url + "run", timeout=60) as reply:
            body = reply.read().decode()
        assert '"type": "answer"' in body and body.rstrip().endswith('data: {"type": "done", "ok": true}')
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=30) == 0
        assert "Traceback" not in (process.stderr.read() if process.stderr else "")
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_a_port_in_use_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    from toolstitch.cli import main

    with WebDemo() as taken:
        port = int(taken.url.rsplit(":", 1)[1].strip("/"))
        assert main(["demo", "--web", "--port", str(port)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("toolstitch demo: cannot listen on port") and err.count("\n") == 1


@pytest.mark.parametrize("option", [["--port", "70000"], ["--delay", "-1"]])
def test_bad_web_options_are_exit_2(option: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    from toolstitch.cli import main

    assert main(["demo", "--web", *option]) == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_the_conversation_events_without_a_browser() -> None:
    """What the page is sent, in order, from run_events (runs where chromium is missing, too)."""
    from toolstitch.cli._demo_model import LOCAL_MODEL, local_model
    from toolstitch.cli._web import conversation
    from toolstitch.testing import LocalServer

    with LocalServer(handler=local_model(0.0)) as server, server.client() as client:
        events = list(conversation(client, LOCAL_MODEL))
    kinds = [e["type"] for e in events]
    assert kinds[0] == "step" and kinds[-1] == "answer" and kinds.count("step") == 2
    first_step = kinds[: kinds.index("step", 1)]
    assert first_step.count("call") == 3 and first_step.count("status") == 3
    assert first_step.count("running") == 3 and first_step.count("result") == 3
    # Each call's result is shown only once its card turned ready (the demo's read-only tools start
    # eagerly, on their complete arguments, so "running" may come first).
    step_events = events[: len(first_step)]
    for key in {e["key"] for e in step_events if e["type"] == "result"}:
        mine = [e for e in step_events if e.get("key") == key and e["type"] in ("status", "result")]
        assert [(e["type"], e.get("status")) for e in mine] == [("status", "ready"), ("result", None)], key
    zurich = [e for e in events if e["type"] == "arguments" and e["id"] == "call_demo_weather_zrh"]
    assert "".join(e["text"] for e in zurich) == '{"city": "Zürich", "unit": "celsius"}'
    text = "".join(e["text"] for e in events if e["type"] == "text")
    assert text == events[-1]["text"] and "Zürich has 14 °C" in text
