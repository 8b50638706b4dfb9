"""``toolstitch replay FILE [--html OUT] [--json] [--timing]`` through the real entry point."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import toolstitch as ts
from tests.conftest import offered
from toolstitch.cli._main import main
from toolstitch.recording._report_text import display_width
from toolstitch.testing import LocalServer, StreamScript, sse_body, tool_call_chunks

CALLS = [
    ("call_a", "get_weather", '{"city": "Zürich"}'),
    ("call_b", "get_weather", '{"city": "東京", "unit": '),  # cut short: never valid JSON
]
TOOLS = offered(["get_weather"])  # offered, so call_a can be ready


@pytest.fixture
def recording(tmp_path: Path) -> Path:
    """A real recording: the SDK over HTTP, through ``wrap(record=...)``."""
    script = tool_call_chunks(CALLS, pieces=4, content="Checking.")
    with LocalServer() as server:
        server.enqueue(StreamScript(script, delay=0.001))
        client = ts.wrap(server.client(), record=tmp_path / "rec")
        with client.chat.completions.create(model="m", messages=[], tools=TOOLS, stream=True) as stream:
            for _ in stream:
                pass
    assert stream.recorder is not None and stream.recorder.path is not None
    return stream.recorder.path


def test_replay_prints_calls_statuses_errors_and_a_timeline(
    recording: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["replay", str(recording)]) == 0
    out = capsys.readouterr().out
    assert "tool calls: 2" in out
    assert "#0 get_weather  ready  call_a" in out
    assert '{"city": "Zürich"}' in out
    assert "#1 get_weather  invalid  call_b" in out
    assert "error malformed_arguments" in out
    assert "Checking." in out
    assert "timeline: 0 to" in out and "latency (ms after the request started)" in out
    assert all(display_width(line) <= 80 for line in out.splitlines())


def test_replay_json_is_machine_readable(recording: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["replay", str(recording), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["format"] == "recording" and report["outcome"] == "completed" and report["unit"] == "ms"
    assert [(c["name"], c["status"]) for c in report["calls"]] == [
        ("get_weather", "ready"),
        ("get_weather", "invalid"),
    ]
    assert report["calls"][0]["parsed"] == {"city": "Zürich"}
    assert report["calls"][1]["error"]["code"] == "malformed_arguments"
    assert report["calls"][0]["timeline"]["sealed"] >= report["calls"][0]["timeline"]["opened"]
    assert report["content"] == {"0": "Checking."}


def test_replay_writes_an_html_report(
    recording: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "report.html"
    assert main(["replay", str(recording), "--html", str(out)]) == 0
    page = out.read_text(encoding="utf-8")
    assert "<svg" in page and "get_weather" in page and "malformed_arguments" in page
    assert f"HTML report: {out}" in capsys.readouterr().out


def test_replay_with_timing_shows_calls_as_they_open_and_seal(
    recording: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["replay", str(recording), "--timing"]) == 0
    live = capsys.readouterr().out.split("replay of")[0].splitlines()
    events = [re.sub(r"^\s*[\d.]+ ms  ", "", line) for line in live if " ms  #" in line]
    assert events == [
        "#0 get_weather  opened",
        "#1 get_weather  opened",
        "#0 get_weather  ready",
        "#1 get_weather  invalid",
    ]


def test_replay_reads_a_raw_sse_body(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "body.sse"
    path.write_bytes(sse_body(tool_call_chunks(CALLS[:1])))
    assert main(["replay", str(path)]) == 0
    out = capsys.readouterr().out
    assert "#0 get_weather  ready  call_a" in out
    assert "no timing recorded" in out


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda p: p / "missing.jsonl", "cannot read"),
        (lambda p: p, "cannot read"),  # a directory
        (lambda p: (p / "x.txt", (p / "x.txt").write_text("hello"))[0], "neither a toolstitch recording"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], make: object, message: str
) -> None:
    path = make(tmp_path)  # type: ignore[operator]
    assert main(["replay", str(path)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("toolstitch replay: ") and message in captured.err
    assert captured.err.count("\n") == 1


def test_an_unwritable_html_target_is_exit_2(
    recording: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["replay", str(recording), "--html", str(tmp_path / "no" / "such" / "dir.html")]) == 2
    assert capsys.readouterr().err.startswith("toolstitch replay: cannot write")


def test_help_lists_every_option(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["replay", "--help"]) == 0
    out = capsys.readouterr().out
    for option in ("FILE", "--html OUT", "--json", "--timing"):
        assert option in out
    assert main(["--help"]) == 0
    top = capsys.readouterr().out
    assert "replay" in top and "demo" in top and "check" in top
