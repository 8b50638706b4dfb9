"""``docs/statuses.md`` maps the four status vocabularies onto each other; its table lists every value
the code defines, and no other, so the page cannot drift from the code."""

from __future__ import annotations

import contextlib
import re
from pathlib import Path
from typing import get_args

import openai

import toolstitch as ts
from tests.conftest import ROOT
from toolstitch.core import CallStatus
from toolstitch.loop._results import StopReason
from toolstitch.recording._replay import Outcome
from toolstitch.testing import LocalServer, StreamScript, tool_call_chunks
from toolstitch.tools._result import ResultStatus

PAGE = ROOT / "docs" / "statuses.md"
CODE = {"call": CallStatus, "result": ResultStatus, "run": StopReason, "replay": Outcome}
ROW = re.compile(r"^\| (\w+) \| `(\w+)` \|")


def table() -> dict[str, list[str]]:
    """The values each row of the page's table gives, by vocabulary, in order."""
    found: dict[str, list[str]] = {}
    for line in PAGE.read_text(encoding="utf-8").splitlines():
        row = ROW.match(line)
        if row:
            found.setdefault(row.group(1), []).append(row.group(2))
    return found


def test_the_table_lists_every_value_the_code_defines_once() -> None:
    rows = table()
    assert set(rows) == set(CODE)
    for name, literal in CODE.items():
        assert sorted(rows[name]) == sorted(get_args(literal)), name


def test_each_outcome_happens(server: LocalServer, tmp_path: Path) -> None:
    """A recorded stream that completes, one closed early, one cut (the SDK raises) and one whose
    recording lost its footer replay as the four outcomes, and no other."""
    script = tool_call_chunks([("call_1", "get_weather", '{"city": "Oslo"}')])
    server.enqueue(StreamScript(script), StreamScript(script), StreamScript(script, cut_after=3))
    tools = [{"type": "function", "function": {"name": "get_weather"}}]
    outcomes = []
    for folder, read in (("completed", -1), ("closed", 2), ("error", -1)):
        client = ts.wrap(server.client(), record=tmp_path / folder)
        request = client.chat.completions.create(model="m", messages=[], tools=tools, stream=True)
        with contextlib.suppress(openai.APIConnectionError), request as stream:
            for n, _ in enumerate(stream):
                if n == read:
                    break
        [path] = (tmp_path / folder).glob("*.jsonl")
        outcomes.append(ts.replay(path).outcome)
    lines = path.read_text(encoding="utf-8").splitlines()
    path.write_text("\n".join(lines[:-1]) + "\n", encoding="utf-8")  # the footer is gone
    outcomes.append(ts.replay(path).outcome)
    assert outcomes == ["completed", "closed", "error", "truncated"]
    assert sorted(outcomes) == sorted(get_args(Outcome))
