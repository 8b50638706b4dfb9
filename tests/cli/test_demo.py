"""``toolstitch demo``: the whole job in one command, against the embedded local server."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from toolstitch.cli._demo import QUESTION, TOOLS, converse, local_model, run_demo
from toolstitch.recording._report_text import display_width
from toolstitch.testing import ErrorReply, LocalServer, check_messages_h01_h04

ROOT = Path(__file__).resolve().parents[2]
CALL_NAMES = ["get_weather", "get_weather", "convert_currency"]


@pytest.fixture(autouse=True)
def no_api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """The demo picks the real endpoint when a key is set; these tests are about the local one."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


def test_the_loop_completes_both_steps_over_real_http() -> None:
    with LocalServer(handler=local_model(delay=0), check_history=True) as server:
        with server.client() as client:
            result = converse(client, "toolstitch-demo")
        requests = server.requests
    assert len(requests) == 2  # tool calls, then the answer; no rejected history in between
    assert requests[0]["tools"] == TOOLS and requests[0]["stream"] is True
    first, second = result["steps"]
    assert [(c["name"], c["status"]) for c in first["report"]["calls"]] == [(n, "ready") for n in CALL_NAMES]
    assert [c["parsed"] for c in first["report"]["calls"]] == [
        {"city": "Zürich", "unit": "celsius"},
        {"city": "東京", "unit": "celsius"},
        {"amount": 100, "from_currency": "EUR", "to_currency": "JPY"},
    ]
    # The fragments really were fine and interleaved: many per call, calls open at the same time.
    tracks = first["replay"].timeline.calls
    assert all(len(t.fragments) > 10 for t in tracks)
    assert max(t.opened for t in tracks) < min(t.complete for t in tracks)
    # The second request carried the results, and the answer is written from them.
    tool_messages = [m for m in requests[1]["messages"] if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in tool_messages] == [c["id"] for c in first["report"]["calls"]]
    assert check_messages_h01_h04(requests[1]["messages"]) is None
    assert second["report"]["calls"] == []
    assert "東京 has 22 °C" in result["answer"] and "16,250.00 JPY" in result["answer"]
    assert [m["role"] for m in result["history"]] == [
        "system",
        "user",
        "assistant",
        "tool",
        "tool",
        "tool",
        "assistant",
    ]
    assert result["problems"] == []


def test_text_output_shows_calls_results_history_and_timeline_in_80_columns() -> None:
    out = io.StringIO()
    assert run_demo(delay=0, out=out) == 0
    text = out.getvalue()
    assert "embedded local server; no OPENAI_API_KEY" in text
    for marker in ("step 1", "step 2", "history (7 messages)", "validate_history: no problems"):
        assert marker in text
    assert "  #0 get_weather      ready    " in text
    assert "  #2 convert_currency ready    " in text
    assert "→ call_demo_fx_eur_jpy:" in text
    assert "timeline: 0 to" in text and "latency (ms after the request started)" in text
    assert "16,250.00 JPY" in text
    assert all(display_width(line) <= 80 for line in text.splitlines())


def test_json_output_is_machine_readable() -> None:
    out = io.StringIO()
    assert run_demo(delay=0, json_output=True, out=out) == 0
    report = json.loads(out.getvalue())
    assert report["mode"] == "local" and report["question"] == QUESTION
    assert [s["step"] for s in report["steps"]] == [1, 2]
    assert [c["name"] for c in report["steps"][0]["calls"]] == CALL_NAMES
    assert [r["role"] for r in report["steps"][0]["results"]] == ["tool"] * 3
    assert report["answer"] and report["history_problems"] == []


def test_with_a_key_the_same_loop_runs_against_the_configured_endpoint(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The real-endpoint path, pointed (through the environment, as a user would) at a local server."""
    with LocalServer(handler=local_model(delay=0)) as server:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        out = io.StringIO()
        assert run_demo(model="gpt-test", json_output=True, out=out) == 0
        assert server.request_headers[0]["authorization"] == "Bearer sk-test"
    report = json.loads(out.getvalue())
    assert report["mode"] == "remote" and report["model"] == "gpt-test"
    assert server.requests[0]["model"] == "gpt-test"


def test_a_refused_key_is_one_line_and_exit_2(monkeypatch: pytest.MonkeyPatch) -> None:
    from toolstitch.cli._main import main

    with LocalServer(handler=lambda body: ErrorReply(401)) as server:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-wrong")
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        err = io.StringIO()
        monkeypatch.setattr(sys, "stderr", err)
        assert main(["demo"]) == 2
    assert err.getvalue().startswith("toolstitch demo: AuthenticationError")
    assert err.getvalue().count("\n") == 1


def test_python_m_toolstitch_demo() -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL")}
    done = subprocess.run(
        [sys.executable, "-m", "toolstitch", "demo"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "validate_history: no problems" in done.stdout
    assert done.stderr == ""
