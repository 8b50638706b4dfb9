"""``toolstitch check FILE.json``: a saved history in, one line per problem out, a useful exit code."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from toolstitch.cli._main import main

SRC = Path(__file__).resolve().parents[2] / "src"

CALL = {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
VALID = [
    {"role": "user", "content": "hi"},
    {"role": "assistant", "content": None, "tool_calls": [CALL]},
    {"role": "tool", "tool_call_id": "call_1", "content": "ok"},
]
BROKEN = [
    {"role": "tool", "tool_call_id": "call_0", "content": "stray result from a trimmed turn"},
    {"role": "user", "content": "hi"},
    {"role": "assistant", "content": None, "tool_calls": [CALL]},
    {"role": "user", "content": "and?"},
]


def write(tmp_path: Path, data: Any, name: str = "history.json") -> str:
    path = tmp_path / name
    path.write_text(json.dumps(data), encoding="utf-8")
    return str(path)


def test_a_valid_history_exits_0(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, VALID)
    assert main(["check", path]) == 0
    out = capsys.readouterr().out
    assert out == f"{path}: valid for openai (3 messages, 0 error(s), 0 warning(s))\n"


def test_problems_are_printed_one_per_line_and_exit_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, BROKEN)
    assert main(["check", path]) == 1
    out = capsys.readouterr().out
    entries = [line for line in out.splitlines() if line.startswith("#")]
    assert [e.split(":")[0] for e in entries] == ["#0 H01 error", "#2 H03 error"]
    assert "must be a response to a preceeding message with 'tool_calls'" in out.replace("\n    ", " ")
    assert all(len(line) <= 80 for line in out.splitlines()[:-1])  # readable at 80 columns
    assert out.splitlines()[-1].endswith("invalid for openai (4 messages, 2 error(s), 0 warning(s))")


def test_warnings_alone_exit_0(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    history = [
        VALID[0],
        {**VALID[1], "tool_calls": [CALL, {**CALL, "id": "call_2"}]},
        {"role": "tool", "tool_call_id": "call_2", "content": "2"},
        {"role": "tool", "tool_call_id": "call_1", "content": "1"},
    ]
    path = write(tmp_path, history)
    assert main(["check", path]) == 0
    assert "#2 H05 warning:" in capsys.readouterr().out
    assert main(["check", path, "--dialect", "vllm"]) == 1  # vLLM pairs results by position


def test_dialect_option(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, VALID)
    assert main(["check", path, "--dialect", "mistral"]) == 1
    assert "#1 H35 error: id 'call_1' is not 9 letters or digits" in capsys.readouterr().out


def test_json_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, BROKEN)
    assert main(["check", path, "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["valid"] is False and report["errors"] == 2 and report["dialect"] == "openai"
    first = report["problems"][0]
    assert first["index"] == 0 and first["rule"] == "H01" and first["severity"] == "error"
    assert first["server_error"].startswith("Invalid parameter: messages with role 'tool'")


def test_a_request_body_is_checked_with_its_tools(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, {"model": "m", "messages": VALID, "tools": []})
    assert main(["check", path]) == 1
    assert "#- H16 error: tools is an empty list" in capsys.readouterr().out


# ----------------------------------------------------------------------------- Responses API input

ITEMS = [
    {"role": "user", "content": [{"type": "input_text", "text": "hi"}]},
    {"type": "function_call", "call_id": "call_1", "name": "f", "arguments": "{}"},
    {"type": "function_call_output", "call_id": "call_1", "output": "ok"},
]
BROKEN_ITEMS = [
    {"role": "user", "content": "hi"},
    {"type": "function_call_output", "call_id": "call_9", "output": "stray"},
    {"type": "function_call", "call_id": "call_1", "name": "f", "arguments": "{}"},
]


def test_a_responses_input_is_told_by_its_shape_and_checked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A list of input items is checked with ``validate_input`` (it was read as chat messages: every
    item a problem), reported the same way, in input items."""
    assert main(["check", write(tmp_path, ITEMS)]) == 0
    out = capsys.readouterr().out
    assert out.endswith(": valid for openai (3 input items, 0 error(s), 0 warning(s))\n")

    path = write(tmp_path, BROKEN_ITEMS)
    assert main(["check", path]) == 1
    out = capsys.readouterr().out
    entries = [line for line in out.splitlines() if line.startswith("#")]
    assert [e.split(":")[0] for e in entries] == ["#1 R01 error", "#2 R02 error"]
    assert "No tool output found for function call call_1." in out.replace("\n    ", " ")
    assert all(len(line) <= 80 for line in out.splitlines()[:-1])
    assert out.splitlines()[-1] == f"{path}: invalid for openai (3 input items, 2 error(s), 0 warning(s))"


def test_a_responses_request_body_is_checked_by_its_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, {"model": "m", "input": BROKEN_ITEMS, "tools": []})
    assert main(["check", path]) == 1
    assert "#1 R01 error" in capsys.readouterr().out
    assert main(["check", write(tmp_path, {"model": "m", "input": "hi"})]) == 0
    assert "(1 input items, 0 error(s)" in capsys.readouterr().out
    # A plain role/content list is valid in both APIs: it reads as chat, as it always did.
    assert main(["check", write(tmp_path, [{"role": "user", "content": "hi"}])]) == 0
    assert "(1 messages, 0 error(s)" in capsys.readouterr().out


def test_json_report_of_a_responses_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", write(tmp_path, BROKEN_ITEMS), "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["api"] == "responses" and report["valid"] is False and report["errors"] == 2
    assert [(p["index"], p["rule"]) for p in report["problems"]] == [(1, "R01"), (2, "R02")]
    assert main(["check", write(tmp_path, VALID), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["api"] == "chat"


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (None, "cannot read"),
        ("{not json", "is not valid JSON"),
        ("42", 'expected a JSON list of messages or an object with a "messages" list'),
        ('{"model": "m"}', 'an object with a "messages" list'),
    ],
)
def test_unreadable_input_exits_2_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str | None, expected: str
) -> None:
    path = tmp_path / "in.json"
    if content is not None:
        path.write_text(content, encoding="utf-8")
    assert main(["check", str(path)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1
    assert captured.err.startswith("toolstitch check: ") and expected in captured.err


def test_bad_usage_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "x.json", "--dialect", "nope"]) == 2
    assert "invalid choice: 'nope'" in capsys.readouterr().err
    assert main(["check", "--help"]) == 0
    assert "--dialect" in capsys.readouterr().out


def test_python_dash_m_toolstitch_check(tmp_path: Path) -> None:
    path = write(tmp_path, BROKEN)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [sys.executable, "-m", "toolstitch", "check", path, "--dialect", "deepseek"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode == 1, done.stderr
    assert done.stdout.startswith("#0 H01 error:")
    unwrapped = done.stdout.replace("\n    ", " ")
    assert "Messages with role 'tool' must be a response to a preceding message" in unwrapped
