"""A real browser for the tests of the web pages: Debian's ``chromium``, driven by Playwright.

Playwright's own browser download cannot reach the network here, so ``playwright install`` is never
called: the tests launch the system's chromium (``.ci/run`` installs it when missing) with a fresh
profile. Without chromium (or without the ``playwright`` package) the browser tests skip, unless the
``CI`` variable is set: in CI they must run, so there a missing browser fails them.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def chromium_path() -> str | None:
    """The system's chromium, or ``None``."""
    for candidate in ("/usr/bin/chromium", shutil.which("chromium"), shutil.which("chromium-browser")):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


def _unavailable(why: str) -> None:
    if os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no"):
        pytest.fail(f"browser tests must run under CI, but {why}")
    pytest.skip(why)


@dataclass
class Watched:
    """A page, with every console error and uncaught page error it produced."""

    page: Any
    errors: list[str] = field(default_factory=list)


@pytest.fixture(scope="module")
def browser_context(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One chromium per test module, on a fresh user-data-dir."""
    executable = chromium_path()
    if executable is None:
        _unavailable("chromium was not found (apt-get install chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("the playwright package is not installed (pip install -e '.[test]')")
    profile: Path = tmp_path_factory.mktemp("chromium-profile")
    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(profile), executable_path=executable, headless=True, args=CHROMIUM_ARGS
        )
        context.set_default_timeout(60_000)
        try:
            yield context
        finally:
            context.close()


@pytest.fixture
def watched(browser_context: Any) -> Iterator[Watched]:
    """A new page whose console errors and page errors are collected, closed after the test."""
    page = browser_context.new_page()
    seen = Watched(page)
    page.on("console", lambda m: seen.errors.append(f"console: {m.text}") if m.type == "error" else None)
    page.on("pageerror", lambda e: seen.errors.append(f"page error: {e}"))
    try:
        yield seen
    finally:
        page.close()
