"""The run loop fails closed: it raises before sending a request that ``validate_request`` rejects,
and no exception from toolstitch's own code escapes it on hostile values (tool results, histories,
surrogates). A conversation never gets stuck: a saved history resumes.

Real ``openai`` client over real HTTP (``toolstitch.testing.LocalServer``), which also rejects a
broken history the way OpenAI does.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from tests.tools._support import Recorder, calls_reply, text_reply, tool_messages_of, user
from toolstitch.errors import RequestError, ToolstitchError
from toolstitch.history import validate_history
from toolstitch.loop import RunResult, arun, run
from toolstitch.testing import LocalServer, StreamScript
from toolstitch.tools import SQLiteLedger, Toolbox, tool


def _answer_once(calls: list[tuple[str, str, str]]) -> Any:
    def handler(body: dict[str, Any]) -> StreamScript:
        return calls_reply(calls) if not tool_messages_of(body) else text_reply("done")

    return handler


@tool
def echo(p: str) -> str:
    """Echo p."""
    return p


def test_a_tool_choice_naming_no_tool_raises_before_anything_is_sent(server: LocalServer) -> None:
    with server.client() as client, Toolbox([echo]) as box, pytest.raises(RequestError) as caught:
        run(
            client,
            model="m",
            messages=user(),
            toolbox=box,
            tool_choice={"type": "function", "function": {"name": "nope"}},
        )
    assert server.requests == []
    assert any(p.severity == "error" for p in caught.value.problems)


async def test_a_broken_history_raises_before_anything_is_sent_async(server: LocalServer) -> None:
    broken = [*user(), {"role": "tool", "tool_call_id": "never_asked", "content": "x"}]
    async with server.async_client() as client:
        with Toolbox([echo]) as box, pytest.raises(RequestError):
            await arun(client, model="m", messages=broken, toolbox=box)
    assert server.requests == []


def test_messages_that_are_not_a_list_are_a_request_error(server: LocalServer) -> None:
    with server.client() as client, Toolbox([echo]) as box, pytest.raises(RequestError):
        run(client, model="m", messages=None, toolbox=box)  # type: ignore[arg-type]
    assert server.requests == []


class Unprintable:
    def __str__(self) -> str:
        raise RuntimeError("no")

    __repr__ = __str__


def _deep(n: int) -> Any:
    value: Any = 0
    for _ in range(n):
        value = [value]
    return value


@pytest.mark.parametrize(
    "value",
    [_deep(5000), "lone \udc80 surrogate", Unprintable(), {"k": float("nan")}, b"\xff bytes"],
    ids=["deep", "surrogate", "unprintable", "nan", "bytes"],
)
def test_hostile_tool_results_never_break_the_run(server: LocalServer, value: Any) -> None:
    @tool
    def hostile() -> Any:
        return value

    server.handler = _answer_once([("c1", "hostile", "{}")])
    with server.client() as client, Toolbox([hostile]) as box:
        result = run(client, model="m", messages=user(), toolbox=box)
    assert result.stop_reason == "done"
    assert validate_history(result.messages) == []
    [message] = [m for m in result.messages if isinstance(m, dict) and m.get("role") == "tool"]
    assert isinstance(message["content"], str)
    message["content"].encode("utf-8")  # valid Unicode: the server could read it


def test_a_saved_history_with_an_escaped_lone_surrogate_is_refused_not_run(
    server: LocalServer, tmp_path: Path
) -> None:
    ran = Recorder()

    @tool
    def keep(p: str) -> str:
        ran.add("keep", p)
        return "kept"

    saved = [
        *user(),
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_s",
                    "type": "function",
                    "function": {"name": "keep", "arguments": '{"p": "\\udc80"}'},
                }
            ],
        },
    ]
    server.handler = lambda body: text_reply("done")
    results: list[RunResult] = []
    with server.client() as client, Toolbox([keep]) as box:
        for _ in range(2):  # resumed twice (say, the process died after the first resume)
            with SQLiteLedger(tmp_path / "calls.db") as ledger:
                results.append(run(client, model="m", messages=saved, toolbox=box, ledger=ledger))
    # "\udc80" parses to a value that is not valid Unicode: no tool receives it (issue 22), on
    # either resume; the model hears why, and the history stays valid.
    assert ran.calls == []
    assert all(r.stop_reason == "done" for r in results)
    assert all(r.steps[0].results[0].status != "ok" for r in results)
    assert all(validate_history(r.messages) == [] for r in results)


HOSTILE_TAILS: list[Any] = [
    {"role": "assistant", "content": None, "tool_calls": 7},
    {"role": "assistant", "content": None, "tool_calls": ["x", None, 3]},
    {"role": "assistant", "tool_calls": [{"id": ["unhashable"], "function": "f"}]},
    {"role": "assistant", "tool_calls": [{"id": "c", "function": {"name": "echo", "arguments": {"p": "x"}}}]},
    {"role": "assistant", "tool_calls": [{"id": "c", "function": {"name": "echo\udc80", "arguments": "{"}}]},
    {"role": "assistant", "tool_calls": [{"function": {"name": "echo", "arguments": '{"p": "x"}'}}]},
    {"role": "tool", "tool_call_id": {"no": "hash"}, "content": None},
    object(),
]


@pytest.mark.parametrize("tail", HOSTILE_TAILS)
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_hostile_histories_end_in_a_result_or_a_toolstitch_error(
    server: LocalServer, tail: Any, mode: str
) -> None:
    server.handler = lambda body: text_reply("done")
    messages = [*user(), tail]
    with Toolbox([echo]) as box:
        try:
            if mode == "sync":
                with server.client() as client:
                    result = run(client, model="m", messages=messages, toolbox=box)
            else:

                async def go() -> RunResult:
                    async with server.async_client() as client:
                        return await arun(client, model="m", messages=messages, toolbox=box)

                result = asyncio.run(go())
        except ToolstitchError:
            return
    assert result.stop_reason == "done"
