"""The browser tests skip without chromium only outside CI: under CI a missing browser fails them."""

from __future__ import annotations

import pytest

from tests import browser


@pytest.mark.parametrize("value", ["", "0", "false", "no"])
def test_outside_ci_a_missing_browser_skips(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("CI", value)
    with pytest.raises(pytest.skip.Exception):
        browser._unavailable("chromium was not found")
    monkeypatch.delenv("CI")
    with pytest.raises(pytest.skip.Exception):
        browser._unavailable("chromium was not found")


@pytest.mark.parametrize("value", ["true", "1", "yes"])
def test_under_ci_a_missing_browser_fails(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("CI", value)
    with pytest.raises(pytest.fail.Exception, match="must run under CI"):
        browser._unavailable("chromium was not found")


def test_the_launch_flags_keep_chromium_offline_and_headless() -> None:
    for flag in (
        "--headless",
        "--no-sandbox",
        "--disable-background-networking",
        "--disable-component-update",
    ):
        assert flag in browser.CHROMIUM_ARGS
