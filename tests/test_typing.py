"""Typing parity: code that type-checks against the plain SDK type-checks on a wrapped client, under
``mypy --strict`` and pyright, and toolstitch's own API is typed as the SDK is (docs/design.md).

The user code lives in tests/typecheck/:
- ``tests/typecheck/sdk_code.py`` is written against the plain SDK; it is checked as it is and
  with its client lines (``# CLIENT``) wrapped in ``ts.wrap(...)``;
- ``tests/typecheck/toolstitch_code.py`` uses toolstitch's API with the SDK's types, and is also
  run here against the local server, so it is real code;
- ``tests/typecheck/mistakes.py`` holds mistakes each checker must report, on exactly the lines
  marked ``# error``.

Both checkers run on the installed openai release (the newest in CI) and the installed toolstitch.
"""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.tools._support import calls_reply, text_reply
from toolstitch.testing import LocalServer, StreamScript, response_events

# The user code uses the Responses API's types, which openai releases before 1.66 (the floor is
# older) do not have: there is nothing to be at parity with.
pytest.importorskip("openai.types.responses", reason="this openai has no Responses API types")

HERE = Path(__file__).parent / "typecheck"
ERROR_MARK = "# error"
Checked = dict[str, dict[Path, set[int]]]
"""Each checker's error lines, per file."""


def _wrapped_copy(source: Path, target: Path) -> Path:
    """``tests/typecheck/sdk_code.py`` with each ``# CLIENT`` line's client under ``ts.wrap(...)``."""
    lines = source.read_text().splitlines()
    out: list[str] = []
    wrapped = 0
    for line in lines:
        match = re.fullmatch(r"(\s*\w+ = )(openai\.\w+\(.*\))(  # CLIENT)", line)
        if match:
            line = f"{match[1]}ts.wrap({match[2]}){match[3]}"
            wrapped += 1
        out.append(line)
        if line == "import openai":
            out.append("import toolstitch as ts")
    assert wrapped == 2, "tests/typecheck/sdk_code.py has a sync and an async client line marked # CLIENT"
    target.write_text("\n".join(out) + "\n")
    return target


def _mypy(files: list[Path], cache: Path) -> dict[Path, set[int]]:
    """The lines mypy --strict reports an error on, per file."""
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--cache-dir", str(cache), "--no-error-summary"]
        + [str(f) for f in files],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode in (0, 1), done.stdout + done.stderr  # 2: mypy itself failed
    found: dict[Path, set[int]] = {f.resolve(): set() for f in files}
    for line in done.stdout.splitlines():
        match = re.match(r"(.+?):(\d+): error:", line)
        if match:
            found.setdefault(Path(match[1]).resolve(), set()).add(int(match[2]))
    return found


def _pyright(files: list[Path]) -> dict[Path, set[int]]:
    """The lines pyright reports an error on, per file (the installed pyright, this interpreter's
    packages)."""
    binary = shutil.which("pyright", path=str(Path(sys.executable).parent))
    assert binary is not None, "pyright is a test dependency (pip install -e '.[test]')"
    done = subprocess.run(
        [binary, "--outputjson", "--pythonpath", sys.executable] + [str(f) for f in files],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode in (0, 1), done.stdout + done.stderr
    report = json.loads(done.stdout)
    found: dict[Path, set[int]] = {f.resolve(): set() for f in files}
    for d in report["generalDiagnostics"]:
        if d["severity"] == "error":
            found.setdefault(Path(d["file"]).resolve(), set()).add(d["range"]["start"]["line"] + 1)
    return found


def _marked(path: Path) -> set[int]:
    return {n for n, line in enumerate(path.read_text().splitlines(), 1) if line.endswith(ERROR_MARK)}


@pytest.fixture(scope="module")
def checked(tmp_path_factory: pytest.TempPathFactory) -> Checked:
    """Both checkers' errors over every file, each checker run once (they are slow to start)."""
    tmp = tmp_path_factory.mktemp("typecheck")
    files = [
        HERE / "sdk_code.py",
        _wrapped_copy(HERE / "sdk_code.py", tmp / "wrapped_sdk_code.py"),
        HERE / "toolstitch_code.py",
        HERE / "mistakes.py",
    ]
    return {"mypy": _mypy(files, tmp / "mypy-cache"), "pyright": _pyright(files)}


@pytest.mark.parametrize("checker", ["mypy", "pyright"])
def test_sdk_code_type_checks_plain_and_wrapped(checked: Checked, checker: str) -> None:
    errors = {p.name: lines for p, lines in checked[checker].items() if p.name.endswith("sdk_code.py")}
    assert errors == {"sdk_code.py": set(), "wrapped_sdk_code.py": set()}


@pytest.mark.parametrize("checker", ["mypy", "pyright"])
def test_toolstitch_code_type_checks(checked: Checked, checker: str) -> None:
    assert checked[checker][(HERE / "toolstitch_code.py").resolve()] == set()


@pytest.mark.parametrize("checker", ["mypy", "pyright"])
def test_mistakes_are_type_errors_on_their_lines(checked: Checked, checker: str) -> None:
    path = HERE / "mistakes.py"
    marked = _marked(path)
    assert len(marked) >= 10
    assert checked[checker][path.resolve()] == marked


def test_the_wrapped_copy_wraps_both_clients(tmp_path: Path) -> None:
    text = _wrapped_copy(HERE / "sdk_code.py", tmp_path / "w.py").read_text()
    assert "client = ts.wrap(openai.OpenAI(" in text
    assert "aclient = ts.wrap(openai.AsyncOpenAI(" in text


# ----------------------------------------------------------------------------- the user code runs


def _model(body: dict[str, Any]) -> StreamScript:
    """A call to get_weather first; once its result is in the history, the answer."""
    if "input" in body:  # the Responses API
        items = body["input"] if isinstance(body["input"], list) else []
        if any(isinstance(i, dict) and i.get("type") == "function_call_output" for i in items):
            return StreamScript.responses(response_events(text="Sunny."))
        return StreamScript.responses(response_events([("call_r1", "get_weather", '{"city": "Paris"}')]))
    if any(m.get("role") == "tool" for m in body.get("messages") or []):
        return text_reply("Sunny in Paris.")
    return calls_reply([("call_1", "get_weather", '{"city": "Paris"}')])


def test_the_typed_user_code_runs() -> None:
    from tests.typecheck import toolstitch_code as user

    assert user.direct_calls() == "sunny in Paris"
    assert asyncio.run(user.direct_async_call()) == 5
    with LocalServer(handler=_model, check_history=True) as server:
        client, aclient = server.client(), server.async_client()
        history = user.turn(client, [{"role": "user", "content": "weather?"}])
        assert [m["role"] for m in history] == ["user", "assistant", "tool"]
        assert json.loads(json.dumps(history))[2]["content"] == "sunny in Paris"
        user.turn_with_results(client, [{"role": "user", "content": "weather?"}])
        items = user.responses_turn(client, [{"role": "user", "content": "weather?"}])
        assert [i.get("type") for i in items][-2:] == ["function_call", "function_call_output"]
        assert user.run_chat(client)[-1]["role"] == "assistant"
        assert user.run_responses(client)[-1].get("type") == "message"
        assert asyncio.run(user.arun_chat(aclient)) == "Sunny in Paris."
        assert user.events(client) > 5
        assert asyncio.run(user.aevents(aclient)) > 5
