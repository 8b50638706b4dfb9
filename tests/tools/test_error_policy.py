"""What the model is told when a tool fails, and what is logged.

``ts.ToolError`` is said on purpose: its text reaches the model verbatim. Any other exception's text
may hold hostnames, connection strings, tokens: by default the model reads only that the tool failed
and the exception's type; an ``error_message`` hook (on the toolbox, or on ``run``) decides otherwise.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

import toolstitch as ts
from tests.conftest import examples
from tests.tools._support import calls_reply, sealed, text_reply, tool_messages_of, user
from toolstitch.testing import LocalServer, StreamScript
from toolstitch.tools import Toolbox, tool

SECRET = "db at 10.0.0.5:5432 refused (secret token=abc123)"


@tool
def flaky() -> str:
    raise ConnectionError(SECRET)


@tool
def find_city(city: str) -> str:
    raise ts.ToolError(f"no city named {city!r}; ask the user to spell it")


class HostileText(ts.ToolError):
    def __str__(self) -> str:
        raise RuntimeError("no text for you")


@tool
def hostile() -> str:
    raise HostileText()


def run_one(box: Toolbox, name: str, arguments: str = "{}") -> ts.ToolResult:
    [result] = box.execute(sealed([("call_1", name, arguments)]))
    return result


def test_a_plain_exception_tells_the_model_its_type_only(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG, logger="toolstitch"), Toolbox([flaky]) as box:
        result = run_one(box, "flaky")
    assert result.status == "error" and result.reason == "raised"
    assert "ConnectionError" in result.content and "flaky" in result.content
    for secret in ("10.0.0.5", "5432", "abc123", "token"):
        assert secret not in result.content and secret not in (result.error or "")
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and warnings[0].exc_info is None
    assert SECRET in warnings[0].getMessage()  # logs stay in the process
    assert [r.exc_info[0] for r in caplog.records if r.levelno == logging.DEBUG and r.exc_info] == [
        ConnectionError
    ]


def test_a_tool_error_reaches_the_model_verbatim() -> None:
    with Toolbox([find_city, hostile]) as box:
        result = run_one(box, "find_city", '{"city": "Pariss"}')
        assert result.content == "no city named 'Pariss'; ask the user to spell it"
        assert result.status == "error" and isinstance(result.exception, ts.ToolError)
        # A ToolError whose text cannot be read falls back to the default text (never raises).
        assert "HostileText" in run_one(box, "hostile").content


def test_the_error_message_hook_decides_for_other_exceptions() -> None:
    seen: list[tuple[str | None, type[BaseException]]] = []

    def explain(call: ts.ToolCall, exc: BaseException) -> str:
        seen.append((call.name, type(exc)))
        return f"{call.name} is down, try again later"

    with Toolbox([flaky, find_city], error_message=explain) as box:
        assert run_one(box, "flaky").content == "flaky is down, try again later"
        # ToolError does not go through the hook: it was said on purpose.
        assert run_one(box, "find_city", '{"city": "x"}').content.startswith("no city named")
    assert seen == [("flaky", ConnectionError)]


@pytest.mark.parametrize(
    "hook", [lambda c, e: 1 / 0, lambda c, e: None, lambda c, e: b"bytes", lambda c, e: 42]
)
def test_a_broken_hook_gives_the_default_text(hook: Any, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="toolstitch"), Toolbox([flaky], error_message=hook) as box:
        result = run_one(box, "flaky")
    assert result.content.startswith("Error: flaky failed (ConnectionError)")
    assert SECRET not in result.content


@hsettings(max_examples=examples(60))
@given(st.text())
def test_whatever_an_exception_says_never_reaches_the_model(text: str) -> None:
    @tool
    def leaky() -> str:
        raise ValueError(text)

    with Toolbox([leaky]) as box:
        result = run_one(box, "leaky")
    assert result.content == ts.tools.default_error_message(result.call, ValueError())
    result.content.encode("utf-8")  # valid text whatever the exception held


def failing_then_answer(body: dict[str, Any]) -> StreamScript:
    if not tool_messages_of(body):
        return calls_reply([("call_f", "flaky", "{}"), ("call_c", "find_city", '{"city": "Oslo"}')])
    return text_reply("sorry")


def test_run_error_message_overrides_the_toolbox_hook(server: LocalServer) -> None:
    server.handler = failing_then_answer
    with server.client() as client, Toolbox([flaky, find_city], error_message=lambda c, e: "box says") as box:
        result = ts.run(
            client,
            model="m",
            messages=user(),
            toolbox=box,
            error_message=lambda c, e: f"run says: {type(e).__name__}",
        )
    told = [m["content"] for m in server.requests[1]["messages"] if m["role"] == "tool"]
    assert told == ["run says: ConnectionError", "no city named 'Oslo'; ask the user to spell it"]
    assert result.stop_reason == "done"


async def test_the_default_policy_over_real_http_async(server: LocalServer) -> None:
    server.handler = failing_then_answer
    async with server.async_client() as client:
        with Toolbox([flaky, find_city]) as box:
            await ts.arun(client, model="m", messages=user(), toolbox=box)
    sent = str(server.requests[1]["messages"])
    assert "abc123" not in sent and "10.0.0.5" not in sent and "ConnectionError" in sent
