"""The README's "Streaming to a person" example runs as written, offline, and prints what it says."""

from __future__ import annotations

import re

import pytest

from tests.conftest import ROOT


def example() -> str:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("\n## Streaming to a person\n", 1)[1].split("\n## ", 1)[0]
    found = re.search(r"```python\n(.*?)```", section, re.S)
    assert found is not None, "the section has no python example"
    return found.group(1)


def test_the_streaming_example_runs_and_shows_a_partial_city_first(
    capsys: pytest.CaptureFixture[str],
) -> None:
    exec(compile(example(), "README.md", "exec"), {"__name__": "readme_example"})
    out = capsys.readouterr().out
    lines = out.splitlines()
    previews = [line for line in lines if line.startswith("get_weather {") and not line.endswith("ready")]
    assert any("'San F" in p and "San Francisco" not in p for p in previews), previews
    assert previews[-1] == "get_weather {'city': 'San Francisco'}"
    assert "get_weather {'city': 'San Francisco'} ready" in lines
    assert "-> sunny in San Francisco" in lines
    assert "It is sunny." in out and out.rstrip().endswith("4 messages, done")
