"""The framework examples of docs/frameworks.md (fenced ```` ```python interop ````) run as written,
each in a fresh process and an empty folder, in the frameworks' environment (instructor's run in
test_instructor.py, in its own). The main suite's docs test leaves these blocks to this one."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, interop_blocks

BLOCKS = interop_blocks(ROOT / "docs" / "frameworks.md", "frameworks")
OUTPUTS = {
    "pydantic_ai": ["Sunny.", "[('get_weather', 'ready', {'city': 'Paris'})]", "[]"],
    "agents": ["refused: [('get_weather', 'invalid', '{\"city\": \"Par')]"],
    "langchain_openai": ["{'city': 'Paris'}", "[('get_weather', 'ready')]"],
    "litellm": ["[('get_weather', 'ready', {'city': 'Paris'})]", '{"city": "Paris"}'],
}


def run(code: str, folder: Path) -> str:
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=folder, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize("code", [code for _, code in BLOCKS], ids=[block_id for block_id, _ in BLOCKS])
def test_the_example_runs_and_prints_what_the_page_says(code: str, tmp_path: Path) -> None:
    [framework] = [name for name in OUTPUTS if f"from {name}" in code or f"import {name}" in code]
    lines = run(code, tmp_path).splitlines()
    assert sorted(lines) == sorted(OUTPUTS[framework]), lines


def test_every_framework_of_this_environment_has_its_example() -> None:
    assert len(BLOCKS) == len(OUTPUTS)
