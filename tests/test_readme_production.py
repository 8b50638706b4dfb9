"""The README's "The agent loop in production" examples run as written, each in a fresh process (the
tracing one sets OpenTelemetry's global provider, which a process may set once), and print what the
README says they print."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT


def examples() -> dict[str, str]:
    """Each ``###`` subsection's python example, by its heading."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("\n## The agent loop in production\n", 1)[1].split("\n## ", 1)[0]
    found = {}
    for part in section.split("\n### ")[1:]:
        heading = part.splitlines()[0]
        code = re.search(r"```python\n(.*?)```", part, re.S)
        assert code is not None, f"{heading!r} has no python example"
        found[heading] = code.group(1)
    return found


def run(code: str, tmp_path: Path) -> str:
    script = tmp_path / "example.py"
    script.write_text(code, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    done = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_section_has_the_five_examples() -> None:
    assert list(examples()) == [
        "Asking before a tool runs: the confirm callback",
        "Watching the loop: `on_event` and timings",
        "What the model is told when a tool fails",
        "Approvals that wait for a person",
        "Tracing with OpenTelemetry",
    ]


def test_confirm_callback(tmp_path: Path) -> None:
    out = run(examples()["Asking before a tool runs: the confirm callback"], tmp_path)
    assert out.splitlines() == [
        "Error: the call to 'refund' was not approved; it was not run. Reason: refunds over 100 need a "
        "manager; offer a voucher instead"
    ]


def test_on_event_and_timings(tmp_path: Path) -> None:
    lines = run(examples()["Watching the loop: `on_event` and timings"], tmp_path).splitlines()
    assert lines[0] == "running get_weather {'city': 'Oslo'}"
    assert lines[1].startswith("result ok sunny in Oslo in ")
    assert lines[2].startswith('step 0 {"first_chunk": ') and '"attempts": 1}' in lines[2]
    assert lines[3].startswith("step 1 ")
    assert lines[4].startswith("{'fragments': ") and "'sealed_at': " in lines[4]


def test_error_policy(tmp_path: Path) -> None:
    out = run(examples()["What the model is told when a tool fails"], tmp_path)
    assert out.splitlines() == [
        "no order '7': order numbers start with A, ask the user again",
        "Error: get_order failed (ConnectionError); the details were logged, not shown. "
        "It did not return a result.",
    ]
    assert "hunter2" not in out


def test_approvals_that_wait(tmp_path: Path) -> None:
    out = run(examples()["Approvals that wait for a person"], tmp_path)
    assert out.splitlines() == [
        "awaiting_approval [('call_1', 'refund', {'order_id': 'A7', 'amount': 20})]",
        "done refunded 20.0 on A7 / Refunded.",
    ]


def test_tracing(tmp_path: Path) -> None:
    pytest.importorskip("opentelemetry.sdk")
    lines = run(examples()["Tracing with OpenTelemetry"], tmp_path).splitlines()
    assert lines[0].startswith("execute_tool get_weather {'gen_ai.tool.name': 'get_weather'")
    assert "'gen_ai.tool.call.id': 'call_1'" in lines[0]
    assert lines[2] == "answer the user {}"
    for name in ("started", "arguments_complete", "ready", "dispatched", "finished"):
        assert f"'toolstitch.tool_call.{name}'" in lines[3]
