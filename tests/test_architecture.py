"""The shape of the package: layers one way (import-linter), no import cycles, a small, pinned surface."""

from __future__ import annotations

import importlib
import pkgutil
import subprocess
import sys
import warnings
from pathlib import Path

import grimp
import pytest

import toolstitch as ts

ROOT = Path(__file__).resolve().parents[1]

PUBLIC = [
    "Accumulator",
    "AsyncStitchedResponseStream",
    "AsyncStitchedStream",
    "Deny",
    "HistoryError",
    "IncompleteStreamError",
    "Limits",
    "MemoryLedger",
    "PostgresLedger",
    "ResponseAccumulator",
    "RunResult",
    "SQLiteLedger",
    "StitchedResponseStream",
    "StitchedStream",
    "Tool",
    "ToolCall",
    "ToolError",
    "ToolResult",
    "Toolbox",
    "ToolstitchError",
    "aresume",
    "arun",
    "arun_events",
    "assistant_message",
    "call_error_text",
    "calls_of",
    "ensure_valid_history",
    "function_call_output",
    "function_call_outputs",
    "repair_history",
    "replay",
    "response_items",
    "resume",
    "run",
    "run_events",
    "stitch",
    "tool",
    "tool_message",
    "tool_messages",
    "validate_history",
    "validate_input",
    "validate_request",
    "wrap",
]


def test_public_surface_is_pinned() -> None:
    assert sorted(ts.__all__) == sorted(PUBLIC)
    assert len(ts.__all__) <= 43
    for name in ts.__all__:
        assert getattr(ts, name) is not None


def test_resume_names_are_pinned() -> None:
    """A background stream by id: ``ts.resume`` / ``ts.aresume`` (as ``run`` / ``arun``), its
    policy and record in ``toolstitch.client``, its one error in ``toolstitch.errors``."""
    assert ts.resume is ts.client.resume and ts.aresume is ts.client.aresume
    assert {"Resume", "ResumePolicy", "resume", "aresume"} <= set(ts.client.__all__)
    assert "ResumeUnavailableError" in ts.errors.__all__
    assert issubclass(ts.errors.ResumeUnavailableError, ts.ToolstitchError)


def test_public_submodules_hold_the_rest() -> None:
    assert ts.events.ToolCallReady.__module__.startswith("toolstitch.")
    assert issubclass(ts.errors.SchemaViolation, ts.errors.ToolCallError)
    assert ts.metrics.CallMetrics is not None


@pytest.mark.parametrize("name", sorted(ts._MOVED))
def test_moved_names_resolve_with_a_deprecation_warning(name: str) -> None:
    home = ts._MOVED[name]
    with pytest.warns(DeprecationWarning, match=home.replace(".", r"\.")):
        value = getattr(ts, name)
    module = sys.modules[home]
    assert value is getattr(module, name)


COMPLETION = {
    "id": "c",
    "object": "chat.completion",
    "created": 0,
    "model": "m",
    "choices": [
        {
            "index": 0,
            "finish_reason": "tool_calls",
            "message": {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
                ],
            },
        }
    ],
}


@pytest.mark.parametrize(
    ("module", "old", "new"),
    [
        ("toolstitch", "Ledger", "MemoryLedger"),
        ("toolstitch.tools", "Ledger", "MemoryLedger"),
        ("toolstitch", "tool_calls", "calls_of"),
        ("toolstitch.client", "tool_calls", "calls_of"),
    ],
)
def test_renamed_names_resolve_for_one_release_with_a_deprecation_warning(
    module: str, old: str, new: str
) -> None:
    home = importlib.import_module(module)
    assert old not in home.__all__ and new in home.__all__
    with pytest.warns(DeprecationWarning, match=rf"{module}\.{old} is now {module}\.{new}") as caught:
        value = getattr(home, old)
    assert value is getattr(home, new)
    assert [w.filename for w in caught] == [__file__]  # the warning points at the caller's line
    with pytest.warns(DeprecationWarning, match=rf"{module}\.{old} is now"):
        exec(f"from {module} import {old}", {})


def test_the_deprecated_names_still_work() -> None:
    with pytest.warns(DeprecationWarning):
        ledger = ts.Ledger(scope="s")
    assert type(ledger) is ts.MemoryLedger and isinstance(ledger, ts.tools.ClaimLedger)
    tools = [{"type": "function", "function": {"name": "f"}}]
    with pytest.warns(DeprecationWarning):
        (old,) = ts.tool_calls(COMPLETION, tools=tools)
    (new,) = ts.calls_of(COMPLETION, tools=tools)
    assert (old.id, old.status, old.parsed) == (new.id, new.status, new.parsed) == ("call_1", "ready", {})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert ts.MemoryLedger is ts.tools.MemoryLedger and ts.calls_of is ts.client.calls_of


def test_unknown_name_is_an_attribute_error() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(AttributeError):
            _ = ts.NoSuchName  # type: ignore[attr-defined]


def test_every_exception_lives_in_errors() -> None:
    """One module holds every exception class toolstitch defines (private helpers excepted)."""
    offenders = []
    for info in pkgutil.walk_packages(ts.__path__, "toolstitch."):
        module = importlib.import_module(info.name)
        for name, value in vars(module).items():
            if (
                isinstance(value, type)
                and issubclass(value, BaseException)
                and value.__module__ == info.name
                and not name.startswith("_")
                and info.name != "toolstitch.errors"
            ):
                offenders.append(f"{info.name}.{name}")
    assert offenders == []


def test_import_linter_contracts_are_kept() -> None:
    lint = Path(sys.executable).with_name("lint-imports")
    done = subprocess.run([str(lint)], cwd=ROOT, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


def _cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for start in sorted(graph.modules):
        if start in index:
            continue
        work = [(start, iter(sorted(graph.find_modules_directly_imported_by(start))))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.find_modules_directly_imported_by(child)))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_import_cycle_anywhere() -> None:
    """Lazy imports inside functions count; only ``if TYPE_CHECKING:`` imports are exempt."""
    graph = grimp.build_graph("toolstitch", exclude_type_checking_imports=True)
    assert _cycles(graph) == []
