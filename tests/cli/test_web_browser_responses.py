"""``toolstitch demo --web --api responses`` in a real browser: the page over the Responses API.

The same page and the same checks as ``test_web_browser`` (chromium through Playwright, nothing
timed: a ``MutationObserver`` records every state a card passes through), with the conversation run
by ``ts.run_events(..., api="responses")`` against a scripted Responses model that checks every
``input`` as OpenAI does.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Iterator

import pytest

pytest.importorskip("openai.types.responses", reason="this openai release has no Responses API")

from tests.browser import Watched, browser_context, watched  # noqa: F401 (fixtures)
from tests.cli.test_web_browser import city_shown, run_conversation
from tests.conftest import ROOT
from toolstitch.cli._web import WebDemo, page_html


@pytest.fixture(scope="module")
def demo() -> Iterator[WebDemo]:
    with WebDemo(delay=0.03, api="responses") as server:
        yield server


def test_a_card_shows_a_partial_city_before_the_whole_one(watched: Watched, demo: WebDemo) -> None:  # noqa: F811
    states = run_conversation(watched, demo)
    key = states[0]["key"]
    shown = [city_shown(s) for s in states if s["key"] == key]
    seen = [c for c in shown if c]
    assert "Zürich" in seen, shown
    before = seen[: seen.index("Zürich")]
    assert [c for c in before if "Zürich".startswith(c) and c != "Zürich"], seen
    statuses = [s["status"] for s in states if s["key"] == key]
    assert statuses[0] == "streaming" and statuses[-1] == "ready"
    assert all(city_shown(s) == "Zürich" for s in states if s["key"] == key and s["status"] == "ready")
    assert not watched.errors


def test_what_a_person_sees_at_the_end(watched: Watched, demo: WebDemo) -> None:  # noqa: F811
    run_conversation(watched, demo)
    page = watched.page
    assert page.text_content("#api") == "the Responses API"
    answer = page.text_content("#answer") or ""
    assert "Zürich has 14 °C and overcast" in answer and "東京 has 22 °C and sunny" in answer
    assert "16,250.00 JPY" in answer and page.is_visible("#answer")
    cards = page.query_selector_all(".card")
    assert [c.get_attribute("data-status") for c in cards] == ["ready", "ready", "ready"]
    names = [c.query_selector(".name").text_content() for c in cards]  # type: ignore[union-attr]
    assert names == ["get_weather", "get_weather", "convert_currency"]
    ids = [c.query_selector(".id").text_content() for c in cards]  # type: ignore[union-attr]
    assert ids == ["call_demo_weather_zrh", "call_demo_weather_tyo", "call_demo_fx_eur_jpy"]
    results = [c.query_selector(".result").text_content() for c in cards]  # type: ignore[union-attr]
    shown = [json.loads(r.removeprefix("→ ")) for r in results]
    assert shown[1]["city"] == "東京" and shown[2]["result"] == 16250.0
    assert [c.get_attribute("data-run") for c in cards] == ["done", "done", "done"]
    assert page.text_content("#status") == "done" and page.is_enabled("#ask")
    assert not watched.errors


def test_the_page_names_the_api_it_runs_over() -> None:
    assert b'<span id="api" data-api="responses">the Responses API</span>' in page_html("responses")
    assert b'<span id="api" data-api="chat">Chat Completions</span>' in page_html("chat")
    with pytest.raises(ValueError, match="api must be"):
        WebDemo(api="assistants")  # type: ignore[arg-type]


def test_the_conversation_events_without_a_browser() -> None:
    """What the page is sent over the Responses API, in order (runs where chromium is missing)."""
    from toolstitch.cli._demo_model import LOCAL_MODEL
    from toolstitch.cli._demo_responses import local_responses_model
    from toolstitch.cli._web import conversation
    from toolstitch.testing import LocalServer

    with (
        LocalServer(handler=local_responses_model(0.0), check_history=True) as server,
        server.client() as client,
    ):
        events = list(conversation(client, LOCAL_MODEL, "responses"))
        second = server.requests[1]["input"]
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
    # the reasoning the calls came with went back beside them
    assert [i.get("type", i.get("role")) for i in second][:4] == [
        "system",
        "user",
        "reasoning",
        "function_call",
    ]


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_the_command_serves_the_responses_page_and_stops_on_ctrl_c() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    env.pop("OPENAI_API_KEY", None)
    command = [
        sys.executable,
        "-m",
        "toolstitch",
        "demo",
        "--web",
        "--api",
        "responses",
        "--port",
        "0",
        "--delay",
        "0",
    ]
    process = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        preexec_fn=_default_sigint,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line.startswith("toolstitch demo: open http://127.0.0.1:"), line
        url = line.split("open ", 1)[1].split()[0]
        with urllib.request.urlopen(url, timeout=30) as reply:
            assert b'data-api="responses"' in reply.read()
        with urllib.request.urlopen(url + "run", timeout=60) as reply:
            body = reply.read().decode()
        assert '"type": "answer"' in body and "16,250.00 JPY" in body
        assert body.rstrip().endswith('data: {"type": "done", "ok": true}')
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=30) == 0
        assert "Traceback" not in (process.stderr.read() if process.stderr else "")
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
