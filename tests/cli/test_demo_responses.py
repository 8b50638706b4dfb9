"""``toolstitch demo --api responses``: the demo's conversation over the Responses API, over HTTP."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("openai.types.responses", reason="this openai release has no Responses API")

from toolstitch.cli._demo_responses import (
    FLAT_TOOLS,
    converse_responses,
    local_responses_model,
    run_responses_demo,
)
from toolstitch.recording._report_text import display_width
from toolstitch.testing import LocalServer, check_response_input

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def no_api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


def test_the_loop_completes_both_steps_over_real_http() -> None:
    with LocalServer(handler=local_responses_model(delay=0), check_history=True) as server:
        with server.client() as client:
            result = converse_responses(client, "toolstitch-demo")
        requests = server.requests
    assert len(requests) == 2
    assert requests[0]["tools"] == FLAT_TOOLS and requests[0]["stream"] is True
    first, second = result["steps"]
    assert [(c["name"], c["status"]) for c in first["calls"]] == [
        ("get_weather", "ready"),
        ("get_weather", "ready"),
        ("convert_currency", "ready"),
    ]
    assert check_response_input(requests[1]["input"]) is None
    assert second["calls"] == []
    assert "東京 has 22 °C" in result["answer"] and "16,250.00 JPY" in result["answer"]
    assert result["problems"] == []


def test_text_output_in_80_columns() -> None:
    out = io.StringIO()
    assert run_responses_demo(local=True, out=out) == 0
    text = out.getvalue()
    for marker in (
        "step 1",
        "step 2",
        "input for the next request (10 items)",
        "validate_input: no problems",
    ):
        assert marker in text
    assert "→ call_demo_fx_eur_jpy:" in text and "16,250.00 JPY" in text
    assert all(display_width(line) <= 80 for line in text.splitlines())


def test_json_output_and_the_remote_path(monkeypatch: pytest.MonkeyPatch) -> None:
    with LocalServer(handler=local_responses_model(delay=0)) as server:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        out = io.StringIO()
        assert run_responses_demo(model="gpt-test", json_output=True, out=out) == 0
    report = json.loads(out.getvalue())
    assert report["api"] == "responses" and report["mode"] == "remote" and report["model"] == "gpt-test"
    assert server.requests[0]["model"] == "gpt-test"


def test_python_m_toolstitch_demo_api_responses() -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL")}
    done = subprocess.run(
        [sys.executable, "-m", "toolstitch", "demo", "--api", "responses"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "validate_input: no problems" in done.stdout


def test_drop_shows_the_stream_resume() -> None:
    """``--drop``: the first stream's connection drops mid-call; the stream resumes, the calls are
    ready, the model was asked once per step and the rest came from one retrieve."""
    with LocalServer(handler=local_responses_model(delay=0, drop=True), check_history=True) as server:
        with server.client() as client:
            result = converse_responses(client, "toolstitch-demo", background=True)
        assert len(server.requests) == 2 and len(server.retrieves) == 1
    first = result["steps"][0]
    [resume] = first["resumes"]
    assert resume["resumed"] and resume["requests"] == 1
    assert [c["status"] for c in first["calls"]] == ["ready", "ready", "ready"]
    assert result["answer"] is not None and result["problems"] == []


def test_drop_from_the_command_line() -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL")}
    done = subprocess.run(
        [sys.executable, "-m", "toolstitch", "demo", "--api", "responses", "--drop"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "dropped after event" in done.stdout and "resumed, 1 retrieve" in done.stdout
    assert "requests: 2 create, 1 retrieve" in done.stdout
    assert all(display_width(line) <= 80 for line in done.stdout.splitlines())
    chat = subprocess.run(
        [sys.executable, "-m", "toolstitch", "demo", "--drop"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert chat.returncode == 2 and "no resume protocol" in chat.stderr
