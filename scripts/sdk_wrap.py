"""A pytest plugin for running the openai SDK's own tests (from its source distribution) here.

Loaded with ``-p sdk_wrap`` by ``scripts/sdk_tests``, in both runs it compares:

* it serves the endpoints the SDK's tests call from :class:`toolstitch.testing.LocalServer` (the SDK
  points them at a Prism mock server, which cannot run here), through ``TEST_API_BASE_URL``;
* with ``TOOLSTITCH_SDK_WRAP=1`` it replaces every ``OpenAI`` / ``AsyncOpenAI`` / ``AzureOpenAI`` /
  ``AsyncAzureOpenAI`` name in the SDK's test modules by a factory that returns ``ts.wrap(...)`` of
  the client they asked for: the SDK's fixtures (``with OpenAI(...) as client: yield client``) then
  use the wrapped client as a context manager, as they use the plain one;
* with ``TOOLSTITCH_SDK_OUTCOMES=path`` it writes each test's outcome (``passed``, ``failed``,
  ``skipped``, ``xfailed``, ...) as JSON, so the two runs can be compared test by test.
"""

from __future__ import annotations

import functools
import json
import os
import sys
from typing import Any

import openai
import pytest

import toolstitch as ts
from toolstitch.testing import LocalServer

_WRAP = os.environ.get("TOOLSTITCH_SDK_WRAP") == "1"
_OUTCOMES = os.environ.get("TOOLSTITCH_SDK_OUTCOMES")
_CLASSES = ("OpenAI", "AsyncOpenAI", "AzureOpenAI", "AsyncAzureOpenAI")

# Started on import, before the SDK's conftest reads TEST_API_BASE_URL at its own import.
_server = LocalServer(examples=True).start()
os.environ["TEST_API_BASE_URL"] = f"http://127.0.0.1:{_server.port}"

_outcomes: dict[str, str] = {}
_wrapped_clients = 0


def _wrapping(cls: type[Any]) -> Any:
    """A stand-in for ``cls`` that builds the client, then wraps it."""

    @functools.wraps(cls, updated=())
    def build(*args: Any, **kwargs: Any) -> Any:
        global _wrapped_clients
        _wrapped_clients += 1
        return ts.wrap(cls(*args, **kwargs))

    return build


def pytest_collection_finish(session: pytest.Session) -> None:
    """Every SDK test module is imported now; its fixtures and tests run later, reading globals."""
    if not _WRAP:
        return
    for name, module in list(sys.modules.items()):
        if name != "tests" and not name.startswith("tests."):
            continue
        for attr in _CLASSES:
            if getattr(module, attr, None) is getattr(openai, attr):
                setattr(module, attr, _wrapping(getattr(openai, attr)))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.when == "call" or report.outcome != "passed":
        outcome = report.outcome
        if hasattr(report, "wasxfail"):
            outcome = "xfailed" if report.skipped else "xpassed"
        previous = _outcomes.get(report.nodeid)
        if previous is None or previous == "passed":  # a setup/teardown failure outranks a pass
            _outcomes[report.nodeid] = outcome


def pytest_sessionfinish(session: pytest.Session) -> None:
    _server.stop()
    if _WRAP:
        # A wrapped run that wrapped nothing would compare the plain SDK with itself.
        print(f"\nsdk_wrap: {_wrapped_clients} clients built wrapped")
        if not _wrapped_clients:
            _outcomes["sdk_wrap: no client was wrapped"] = "failed"
    if _OUTCOMES:
        with open(_OUTCOMES, "w", encoding="utf-8") as out:
            json.dump(_outcomes, out, indent=1, sort_keys=True)
