"""Shared test settings and fixtures for every layer's tests.

Hypothesis: the default ``dev`` profile is fast (few examples; ``./dev test`` takes about three
minutes on a warm 2-core machine, most of it real HTTP, processes and a browser); ``.ci/run`` sets
``HYPOTHESIS_PROFILE=ci``, which is derandomized (repeatable) and thorough.

``server`` is the project's local OpenAI-compatible server (:mod:`toolstitch.testing`) on a free
loopback port, for tests that drive the real ``openai`` client over real HTTP.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

from toolstitch.core import _schema_grammar
from toolstitch.testing import LocalServer
from toolstitch.text import _grammar_lark

settings.register_profile(
    "ci", derandomize=True, database=None, deadline=None, print_blob=True, max_examples=200
)
settings.register_profile("dev", deadline=None, max_examples=40)
PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "dev")
settings.load_profile(PROFILE)


def examples(n: int) -> int:
    """A test's own example count under the thorough ``ci`` profile, a quarter of it (at least 10)
    under the fast default, so that ``./dev test`` stays quick and CI stays thorough."""
    return n if PROFILE == "ci" else max(10, n // 4)


#: The repository root.
ROOT = Path(__file__).resolve().parent.parent


def _shard() -> tuple[int, int] | None:
    """``TOOLSTITCH_SHARD=K/N`` (set by ``./dev test`` and ``scripts/matrix``): this process runs
    the K-th of N interleaved slices of the collected tests, so that N processes side by side run
    each test exactly once."""
    value = os.environ.get("TOOLSTITCH_SHARD", "")
    if not value:
        return None
    k, _, n = value.partition("/")
    shard, count = int(k), int(n)
    if not 0 <= shard < count:
        raise pytest.UsageError(f"TOOLSTITCH_SHARD={value!r}: expected K/N with 0 <= K < N")
    return shard, count


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    shard = _shard()
    if shard is None:
        return
    k, n = shard
    # Dealt out one by one, so that slow tests (processes, PostgreSQL, a browser) spread evenly;
    # a module's fixtures start once in each process that runs one of its tests.
    selected = items[k::n]
    deselected = [item for i, item in enumerate(items) if i % n != k]
    if deselected:
        config.hook.pytest_deselected(items=deselected)
    items[:] = selected


def field_paths(
    value: Any, max_depth: int | None = None, prefix: tuple[Any, ...] = ()
) -> list[tuple[Any, ...]]:
    """Every key/index path inside a JSON-like value (for tests that put hostile values in place of
    fields), down to ``max_depth`` levels (all levels by default)."""
    found: list[tuple[Any, ...]] = []
    if max_depth is not None and len(prefix) > max_depth:
        return found
    if isinstance(value, dict):
        for key, item in value.items():
            found.append((*prefix, key))
            found.extend(field_paths(item, max_depth, (*prefix, key)))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            found.append((*prefix, i))
            found.extend(field_paths(item, max_depth, (*prefix, i)))
    return found


def offered(names: Iterable[str]) -> list[dict[str, Any]]:
    """Function tools with these names and no schema, for a request that must offer the tools its
    stream calls (a request offering none refuses every call) while a test is about something else."""
    return [{"type": "function", "function": {"name": n}} for n in sorted(set(names))]


#: One ``get_weather`` tool, the request's ``tools`` of the tests that stream weather calls.
WEATHER_TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}, "unit": {"type": "string"}},
                "required": ["city"],
            },
        },
    }
]


@pytest.fixture
def server() -> Iterator[LocalServer]:
    """A fresh local server per test (its scripts and recorded requests start empty)."""
    with LocalServer() as srv:
        yield srv


@pytest.fixture
def without_llguidance(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """llguidance as on a machine without the extra: its import fails, and nothing compiled with it
    before is reused."""
    monkeypatch.setitem(sys.modules, "llguidance", None)
    _grammar_lark._engine.cache_clear()
    _schema_grammar.compiled_grammar.cache_clear()
    yield
    monkeypatch.undo()
    _grammar_lark._engine.cache_clear()
    _schema_grammar.compiled_grammar.cache_clear()
