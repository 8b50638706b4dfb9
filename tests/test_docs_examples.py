"""Every Python example in the README, CONTRIBUTING.md and ``docs/*.md`` runs as written.

Each page's ``python`` blocks run in one fresh process per page (so a block that sets a process-wide
thing, such as OpenTelemetry's tracer provider, cannot leak into another page), each block in its
own namespace and its own empty working directory, without ``OPENAI_API_KEY``: a block must stand
alone, as a user pastes it. The page on many workers gets ``DATABASE_URL`` from a throwaway
PostgreSQL cluster. Every fenced block must name its language; only ``python`` blocks run (shell,
output, JSON and the like are not Python and are not run). A block that needs a framework this suite
does not install is fenced ```` ```python interop ```` (``interop instructor``: instructor's own
environment): interop/ runs it, with the framework (``./dev interop``), and here it is only checked to
be on the page interop/ reads. Where a page promises an output, the tests at the end check it.
"""

from __future__ import annotations

import functools
import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import openai
import pytest

from tests.conftest import ROOT

PAGES = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md"))]
#: Languages of blocks that are not run: they are not Python.
NOT_PYTHON = frozenset({"bash", "sh", "shell", "console", "text", "json", "jsonc", "yaml", "toml", "sql"})
#: What may follow ``python`` in a fence: the environment of interop/ that runs the block instead.
INTEROP = {("interop",): "frameworks", ("interop", "instructor"): "instructor"}
#: The page whose interop blocks interop/ runs (interop/test_docs.py, interop/test_instructor.py).
INTEROP_PAGE = ROOT / "docs" / "frameworks.md"
_FENCE = re.compile(r"^(`{3,})(.*)$")


@dataclass(frozen=True)
class Block:
    page: Path
    line: int
    language: str
    code: str
    heading: str
    runner: tuple[str, ...] = ()
    """The words after the language: ``("interop",)`` for a block interop/ runs instead."""

    @property
    def id(self) -> str:
        return f"{self.page.relative_to(ROOT).as_posix()}:{self.line}"


def runs_here(block: Block) -> bool:
    """A ``python`` block this suite runs (not one left to interop/)."""
    return block.language == "python" and not block.runner


def blocks(page: Path) -> list[Block]:
    """The fenced blocks of a page, with the heading each sits under."""
    found: list[Block] = []
    heading = ""
    lines = page.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        fence = _FENCE.match(line)
        if fence is None:
            if line.startswith("#"):
                heading = line.lstrip("#").strip()
            i += 1
            continue
        ticks, info = fence.group(1), fence.group(2).split()
        language, runner = (info[0], tuple(info[1:])) if info else ("", ())
        end = i + 1
        while end < len(lines) and lines[end].rstrip() != ticks:
            end += 1
        code = "\n".join(lines[i + 1 : end]) + "\n"
        found.append(Block(page, i + 1, language, code, heading, runner))
        i = end + 1
    return found


ALL_BLOCKS = [block for page in PAGES for block in blocks(page)]
PYTHON = [block for block in ALL_BLOCKS if runs_here(block)]

# Runs each block given as JSON on argv[1] in a fresh namespace and directory; writes the results.
_RUNNER = r"""
import contextlib, io, json, os, sys, tempfile, traceback
blocks = json.load(open(sys.argv[1], encoding="utf-8"))
results = []
for block in blocks:
    os.chdir(tempfile.mkdtemp(prefix="example-"))
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            exec(compile(block["code"], block["id"], "exec"), {"__name__": "__main__"})
        results.append({"ok": True, "stdout": out.getvalue()})
    except BaseException:
        results.append({"ok": False, "stdout": out.getvalue(), "error": traceback.format_exc()})
with open(sys.argv[2], "w", encoding="utf-8") as f:
    json.dump(results, f)
"""


@functools.cache
def _database_url() -> str:
    from tests.pg_cluster import Cluster, find_bindir

    bindir = find_bindir()
    if bindir is None:
        pytest.skip("PostgreSQL is not installed (no initdb/pg_ctl on PATH or in /usr/lib/postgresql)")
    cluster = Cluster(bindir).start()
    _clusters.append(cluster)
    return cluster.create_database("docs_examples")


_clusters: list[Any] = []


@pytest.fixture(scope="module", autouse=True)
def _stop_clusters() -> Iterator[None]:
    yield
    while _clusters:
        _clusters.pop().stop()


@functools.cache
def run_page(page: Path) -> tuple[dict[str, Any], ...]:
    """Run every python block of ``page`` in one fresh process; one result per block."""
    code = [{"id": b.id, "code": b.code} for b in blocks(page) if runs_here(b)]
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL")}
    env["PYTHONPATH"] = str(ROOT / "src") + os.pathsep + env.get("PYTHONPATH", "")
    if "DATABASE_URL" in page.read_text(encoding="utf-8"):
        env["DATABASE_URL"] = _database_url()
    with tempfile.TemporaryDirectory() as folder:
        given, taken = Path(folder) / "blocks.json", Path(folder) / "results.json"
        given.write_text(json.dumps(code), encoding="utf-8")
        done = subprocess.run(
            [sys.executable, "-c", _RUNNER, str(given), str(taken)],
            cwd=folder,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr
        return tuple(json.loads(taken.read_text(encoding="utf-8")))


def output(page: str, heading: str) -> str:
    """What the python block under ``heading`` of ``page`` printed (it must be the only one there)."""
    path = ROOT / page
    python = [b for b in blocks(path) if runs_here(b)]
    [position] = [n for n, b in enumerate(python) if b.heading == heading]
    result = run_page(path)[position]
    assert result["ok"], result["error"]
    return str(result["stdout"])


@pytest.mark.parametrize("block", ALL_BLOCKS, ids=lambda b: b.id)
def test_every_block_names_its_language(block: Block) -> None:
    assert block.language, "say what the block is (```python, ```bash, ```text, …)"
    assert block.language == "python" or block.language in NOT_PYTHON, block.language
    if block.runner:  # only a python block can be left to interop/, and only on the page it reads
        assert block.language == "python" and block.runner in INTEROP, block.runner
        assert block.page == INTEROP_PAGE, f"interop/ runs the interop blocks of {INTEROP_PAGE.name} only"


@pytest.mark.parametrize("block", PYTHON, ids=lambda b: b.id)
def test_every_python_block_runs(block: Block) -> None:
    if block.page.name == "responses.md":
        # The Responses API came in openai 1.66; the release matrix also runs the declared floor.
        pytest.importorskip("openai.types.responses", reason="this openai release has no Responses API")
    if block.page.name == "websocket.md":
        # WebSocket mode: openai's realtime extra, and a release with client.responses.connect().
        pytest.importorskip("websockets", reason="WebSocket mode needs the openai[realtime] extra")
        if not hasattr(getattr(openai.OpenAI(api_key="x"), "responses", None), "connect"):
            pytest.skip("this openai release has no client.responses.connect()")
    python = [b for b in blocks(block.page) if runs_here(b)]
    result = run_page(block.page)[python.index(block)]
    assert result["ok"], f"{block.id} (under {block.heading!r}) failed:\n{result['error']}"


def test_the_readme_is_for_users() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 300
    head = readme.split("\n## ", 1)[0]
    assert "pip install toolstitch" in head
    assert 'pip install "toolstitch[postgres]"' in head and 'pip install "toolstitch[otel]"' in head
    first = next(b for b in blocks(ROOT / "README.md") if runs_here(b))
    assert first.heading == "toolstitch", "the first example is on the first screen, before any section"
    lines = first.code.splitlines()
    before = next(n for n, line in enumerate(lines) if "# Before:" in line)
    after = next(n for n, line in enumerate(lines) if "# After:" in line)
    assert before <= 8, "at most a few lines of set-up before the example itself"
    assert len([line for line in lines[before:] if line.strip()]) <= 10  # the before/after: 10 lines
    assert "ts.wrap(" in lines[after] and "stream.tool_calls" in first.code
    assert "ts.assistant_message(" in first.code
    for page in ("docs/refusals.md", "docs/streaming.md", "docs/production.md", "docs/workers.md"):
        assert f"]({REPOSITORY}/blob/main/{page})" in readme, page
    for gone in ("_speedups", "TOOLSTITCH_PURE_PYTHON", "./dev matrix", *OUTSIDE):
        assert gone not in readme, gone


def _repository() -> str:
    """The repository's URL, as ``pyproject.toml``'s project URLs name it (``Source``)."""
    found = re.search(r'^Source = "([^"]+)"', (ROOT / "pyproject.toml").read_text(encoding="utf-8"), re.M)
    assert found, "pyproject.toml's [project.urls] names no Source"
    return found.group(1).rstrip("/")


REPOSITORY = _repository()
#: A Markdown link or image: ``[text](target)`` / ``![alt](target)``, the target up to a space or ``)``.
LINK = re.compile(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def _anchors(page: Path) -> set[str]:
    """The anchors GitHub gives a Markdown page's headings (lowercased, punctuation dropped, spaces
    as dashes), outside fenced blocks."""
    anchors: set[str] = set()
    fenced = False
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            anchors.add(re.sub(r"[^\w\- ]", "", title).replace(" ", "-"))
    return anchors


def test_the_readmes_links_work_where_it_is_read() -> None:
    """The README is read on the package index too, where a relative link is dead: every link is a
    full URL, and each one into this repository (``blob/main/PATH`` or ``tree/main/PATH``) names a
    file or folder of this checkout (and a heading of it, for an anchor)."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    targets = LINK.findall(readme)
    assert targets
    inside = 0
    for target in targets:
        assert target.startswith(("https://", "http://")), (
            f"a relative link, dead on the package index: {target}"
        )
        if not target.startswith(REPOSITORY + "/"):
            continue
        inside += 1
        where, _, anchor = target[len(REPOSITORY) + 1 :].partition("#")
        kind, _, path = where.partition("/main/")
        assert kind in ("blob", "tree") and path, target
        local = ROOT / path
        assert local.is_file() if kind == "blob" else local.is_dir(), f"{target}: no {path} here"
        if anchor:
            assert local.suffix == ".md" and anchor in _anchors(local), f"{target}: no such heading"
    assert inside >= 10


# What a clone of the repository does not have: the folder beside it, the design card and research
# notes kept there. Spelled in pieces, so that this file does not name them itself.
OUTSIDE = (".." + "/shared", "DESIGN" + ".md", "research" + "/")
# The files a citation could be in.
CITING = ("src", "tests", "scripts", "benchmarks", "docs", "cassettes", ".ci")


def test_no_page_names_what_the_repository_does_not_hold() -> None:
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for gone in ("_speedups", "TOOLSTITCH_PURE_PYTHON", *OUTSIDE):
            assert gone not in text, (page.name, gone)


def test_nothing_points_outside_the_repository() -> None:
    files = [
        ROOT / name for name in ("README.md", "CONTRIBUTING.md", "CHANGELOG.md", "pyproject.toml", "dev")
    ]
    for folder in CITING:
        files += [p for p in (ROOT / folder).rglob("*") if p.is_file() and "__pycache__" not in p.parts]
    found = []
    for path in files:
        relative = path.relative_to(ROOT).as_posix()
        if path.suffix in (".pyc", ".db", ".jsonl"):
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        found += [f"{relative}: {gone}" for gone in OUTSIDE if gone in text]
    assert found == []


# ------------------------------------------------------------------- what the examples promise


def test_the_first_example_runs_on_the_local_server() -> None:
    assert output("README.md", "toolstitch").splitlines() == [
        "{'city': 'Paris'}",
        "ready get_weather {'city': 'Paris'}",
    ]


def test_the_history_example_is_accepted() -> None:
    assert output("README.md", "Sending the results back").splitlines() == ["[]", "Sunny in Paris."]


def test_the_streaming_example_shows_a_partial_city_first() -> None:
    lines = output("docs/streaming.md", "Streaming to a person").splitlines()
    previews = [line for line in lines if line.startswith("get_weather {") and not line.endswith("ready")]
    assert any("'San F" in p and "San Francisco" not in p for p in previews), previews
    assert previews[-1] == "get_weather {'city': 'San Francisco'}"
    assert "get_weather {'city': 'San Francisco'} ready" in lines
    assert "-> sunny in San Francisco" in lines
    text = "\n".join(lines)
    assert "It is sunny." in text and text.rstrip().endswith("4 messages, done")


def test_the_production_page_has_its_examples() -> None:
    headings = [b.heading for b in blocks(ROOT / "docs" / "production.md") if b.language == "python"]
    assert headings == [
        "The agent loop in production",
        "Asking before a tool runs: the confirm callback",
        "Watching the loop: `on_event` and timings",
        "What the model is told when a tool fails",
        "Approvals that wait for a person",
        "Tracing with OpenTelemetry",
    ]


def test_tools_take_a_models_fields_and_may_leave_out_a_nullable_argument() -> None:
    assert output("docs/production.md", "The agent loop in production").splitlines() == [
        "['city', 'zip']",
        "ship ready ok shipping to 0150 Oslo",
        "forecast ready ok sunny in Oslo, 21 degrees celsius",
        "done Shipped; sunny.",
    ]


def test_confirm_callback() -> None:
    assert output("docs/production.md", "Asking before a tool runs: the confirm callback").splitlines() == [
        "Error: the call to 'refund' was not approved; it was not run. Reason: refunds over 100 need a "
        "manager; offer a voucher instead"
    ]


def test_on_event_and_timings() -> None:
    lines = output("docs/production.md", "Watching the loop: `on_event` and timings").splitlines()
    assert lines[0] == 'running get_weather {"city": "Oslo"} eager'
    assert lines[1].startswith("result ok sunny in Oslo in ")
    assert lines[2].startswith('step 0 {"first_chunk": ') and '"attempts": 1}' in lines[2]
    assert lines[3].startswith("step 1 ")
    assert lines[4].startswith("{'fragments': ") and "'sealed_at': " in lines[4]


def test_error_policy() -> None:
    out = output("docs/production.md", "What the model is told when a tool fails")
    assert out.splitlines() == [
        "no order '7': order numbers start with A, ask the user again",
        "Error: get_order failed (ConnectionError); the details were logged, not shown. "
        "It did not return a result.",
    ]
    assert "hunter2" not in out


def test_approvals_that_wait() -> None:
    assert output("docs/production.md", "Approvals that wait for a person").splitlines() == [
        "awaiting_approval [('call_1', 'refund', {'order_id': 'A7', 'amount': 20})]",
        "done refunded 20.0 on A7 / Refunded.",
    ]


def test_tracing() -> None:
    pytest.importorskip("opentelemetry.sdk")
    lines = output("docs/production.md", "Tracing with OpenTelemetry").splitlines()
    assert lines[0].startswith("execute_tool get_weather {'gen_ai.tool.name': 'get_weather'")
    assert "'gen_ai.tool.call.id': 'call_1'" in lines[0]
    assert lines[2] == "answer the user {}"
    for name in ("started", "arguments_complete", "ready", "dispatched", "finished"):
        assert f"'toolstitch.tool_call.{name}'" in lines[3]


def test_many_workers_run_the_call_once() -> None:
    assert output("docs/workers.md", "Running on many workers").splitlines() == [
        "worker A ok booked Chez Léon for 2 ran",
        "worker B ok booked Chez Léon for 2 reused",
    ]


def test_the_guard_hands_on_every_chunk_but_the_finish() -> None:
    lines = output("docs/frameworks.md", "What a framework raises with `guard=True`").splitlines()
    assert lines[:-1] and set(lines[:-1]) == {"chunk, finish_reason: None"}
    assert lines[-1] == """refused: get_weather invalid MalformedArguments '{"city": "Par'"""


def test_the_sse_example_sends_every_event_in_order() -> None:
    lines = output("docs/streaming.md", "Sending events to a browser").splitlines()
    assert lines == [
        "step_started 0",
        "tool_call_started 0",
        "arguments_delta 0",
        "call_dispatched 0",
        "arguments_complete 0",
        "tool_call_ready 0",
        "choice_finished 0",
        "stream_ended 0",
        "response_received 0",
        "call_finished 0",
        "step_finished 0",
        "step_started 1",
        "content_delta 1",
        "choice_finished 1",
        "stream_ended 1",
        "response_received 1",
        "step_finished 1",
        "run_finished ",
    ]


@pytest.mark.parametrize("page", sorted((ROOT / "docs").glob("*.md")), ids=lambda p: p.name)
def test_every_page_opens_with_an_example(page: Path) -> None:
    """Each page under docs/ shows a runnable example (a python block this suite runs) before its
    prose: at most three lines of text come before it, under the title."""
    found = blocks(page)
    assert found and runs_here(found[0]), f"{page.name}: the first block is not a python example that runs"
    lines = page.read_text(encoding="utf-8").splitlines()[: found[0].line - 1]
    prose = [line for line in lines[1:] if line.strip() and not line.startswith(("#", "<!--"))]
    assert len(prose) <= 3, f"{page.name}: {len(prose)} lines of prose before the first example"
