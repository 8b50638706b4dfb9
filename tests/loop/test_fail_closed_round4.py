"""Fail closed, round 4 (issue 42), the loop's share: hostile probes over real HTTP, sync and async.

* A custom tool's call on Chat Completions runs only in the API's shape and only on input that fits
  its format; a call whose shape disagrees with its type never runs, streamed or resumed from a
  saved history, and the model is told.
* A refused call never breaks the request that answers it, whatever its text holds: a lone
  surrogate in its arguments, input, name or id, on either API.
* A refused call keeps the id the server sent (a Responses ``call_id`` one character over
  ``Limits.max_id_chars``): the history answers it, and the run ends with the model told.
* Closing or finalising the run's own generators is silent (``fail_fast`` abandons a step).
"""

from __future__ import annotations

import asyncio
import gc
import importlib.util
import json
import sys
from collections.abc import Iterator
from typing import Any

import pytest

import toolstitch as ts
from tests.tools._support import calls_reply, text_reply, user
from toolstitch.testing import LocalServer, StreamScript, chunk, response_events

RESPONSES = importlib.util.find_spec("openai.types.responses") is not None
needs_responses = pytest.mark.skipif(not RESPONSES, reason="this openai release has no Responses API")

SELECT = {"type": "grammar", "syntax": "regex", "definition": r"SELECT [a-z_, ]+ FROM [a-z_]+;"}
LONE = "\udc00"
ran: list[tuple[str, Any]] = []


@ts.tool(format=SELECT)
def query(sql: str) -> str:
    """Run one SELECT statement."""
    ran.append(("query", sql))
    return "2 rows"


@ts.tool(custom=True)
def note(text: str) -> str:
    """Take a note."""
    ran.append(("note", text))
    return "noted"


@ts.tool
def lookup(key: str) -> str:
    """Look a key up."""
    ran.append(("lookup", key))
    return "found"


@pytest.fixture(autouse=True)
def _clear() -> None:
    ran.clear()


@pytest.fixture
def box() -> Iterator[ts.Toolbox]:
    with ts.Toolbox([query, note, lookup]) as b:
        yield b


def entries_reply(entries: list[dict[str, Any]]) -> StreamScript:
    chunks = [chunk(delta={"role": "assistant", "content": None})]
    chunks += [chunk(delta={"tool_calls": [e]}) for e in entries]
    chunks.append(chunk(delta={}, finish_reason="tool_calls"))
    return StreamScript(chunks)


def custom_call(call_id: str, name: str, text: str) -> list[dict[str, Any]]:
    head = {"index": 0, "id": call_id, "type": "custom", "custom": {"name": name, "input": ""}}
    half = len(text) // 2
    return [
        head,
        {"index": 0, "custom": {"input": text[:half]}},
        {"index": 0, "custom": {"input": text[half:]}},
    ]


def tool_answers(body: dict[str, Any]) -> dict[str, str]:
    return {m["tool_call_id"]: m["content"] for m in body["messages"] if m.get("role") == "tool"}


# -- Chat Completions custom calls -------------------------------------------------------------------


@pytest.mark.parametrize("use_async", [False, True], ids=["run", "arun"])
def test_a_chat_custom_call_runs_on_input_that_fits_its_format_only(box: ts.Toolbox, use_async: bool) -> None:
    with LocalServer(check_history=True) as server:
        server.enqueue(
            entries_reply(custom_call("c1", "query", "SELECT id FROM users;")),
            entries_reply(custom_call("c2", "query", "DROP TABLE users;")),
            text_reply("Done."),
        )
        kwargs: dict[str, Any] = dict(model="m", messages=user(), toolbox=box)
        if use_async:
            result = asyncio.run(ts.arun(server.async_client(), **kwargs))
        else:
            result = ts.run(server.client(), **kwargs)
        assert result.stop_reason == "done"
        assert ran == [("query", "SELECT id FROM users;")]
        sent = server.requests[1]["messages"][1]["tool_calls"]
        assert sent == [
            {"id": "c1", "type": "custom", "custom": {"name": "query", "input": "SELECT id FROM users;"}}
        ]
        told = tool_answers(server.requests[2])["c2"]
        assert told.startswith("Error:") and "query" in told


WRONG_SHAPES = {
    "custom-type-function-shape": [
        {"index": 0, "id": "c1", "type": "custom", "function": {"name": "note", "arguments": "rm -rf /"}}
    ],
    "function-type-custom-shape": [
        {"index": 0, "id": "c1", "type": "function", "custom": {"name": "note", "input": "x"}}
    ],
    "function-continuation": [
        {"index": 0, "id": "c1", "type": "custom", "custom": {"name": "note", "input": "rm "}},
        {"index": 0, "function": {"arguments": "-rf /"}},
    ],
    "function-call-to-custom-tool": [
        {"index": 0, "id": "c1", "type": "function", "function": {"name": "note", "arguments": "rm -rf /"}}
    ],
}


@pytest.mark.parametrize("entries", WRONG_SHAPES.values(), ids=WRONG_SHAPES.keys())
def test_a_chat_call_whose_shape_disagrees_with_its_type_never_runs(
    box: ts.Toolbox, entries: list[dict[str, Any]]
) -> None:
    with LocalServer(check_history=True) as server:
        server.enqueue(entries_reply(entries), text_reply("Sorry."))
        result = ts.run(server.client(), model="m", messages=user(), toolbox=box)
        assert result.stop_reason == "done" and ran == []
        told = tool_answers(server.requests[1])["c1"]
        assert told.startswith("Error:")
        # The model is told how to call again in the kind of call it made, not to send JSON input.
        assert ("as a custom tool call" in told) is (entries[0]["type"] == "custom")


@pytest.mark.parametrize(
    ("tool_call", "runs"),
    [
        ({"id": "c1", "type": "custom", "custom": {"name": "query", "input": "SELECT a FROM b;"}}, True),
        ({"id": "c1", "type": "custom", "custom": {"name": "query", "input": "DROP TABLE b;"}}, False),
        (
            {"id": "c1", "type": "custom", "function": {"name": "query", "arguments": "SELECT a FROM b;"}},
            False,
        ),
        (
            {"id": "c1", "type": "function", "function": {"name": "query", "arguments": "SELECT a FROM b;"}},
            False,
        ),
    ],
    ids=["fits", "does-not-fit", "custom-type-function-shape", "function-call-to-custom-tool"],
)
def test_a_saved_history_ending_in_a_custom_call_is_held_to_the_same_rules(
    box: ts.Toolbox, tool_call: dict[str, Any], runs: bool
) -> None:
    saved = [*user(), {"role": "assistant", "content": None, "tool_calls": [tool_call]}]
    with LocalServer() as server:
        server.enqueue(text_reply("Done."))
        if "custom" not in tool_call and tool_call["type"] == "custom":
            # The saved history itself cannot be sent (H11: a custom call without its custom part):
            # refused before anything of it runs.
            with pytest.raises(ts.errors.RequestError, match="H11"):
                ts.run(server.client(), model="m", messages=saved, toolbox=box)
            assert ran == [] and server.requests == []
            return
        result = ts.run(server.client(), model="m", messages=saved, toolbox=box)
        assert result.stop_reason == "done"
        assert ran == ([("query", "SELECT a FROM b;")] if runs else [])
        answer = tool_answers(server.requests[0])["c1"]
        assert answer == "2 rows" if runs else answer.startswith("Error:")


# -- a refused call never breaks the request that answers it ------------------------------------


SURROGATES = {
    "arguments": ("c1", "lookup", '{"key": "a' + LONE + '"}'),
    "escaped-arguments": ("c1", "lookup", '{"key": "a\\udc00"}'),
    "name": ("c1", "lookup" + LONE, '{"key": "a"}'),
    "id": ("c1" + LONE, "lookup", '{"key": "a"}'),
}
REFUSED = {"arguments", "escaped-arguments", "name"}
"""The cases whose call is refused (an id is no input: a call under it may run, answered under the
id as the request can carry it)."""


def _kind(item: dict[str, Any]) -> str:
    return str(item.get("type") or "")


@needs_responses
@pytest.mark.parametrize("custom", [False, True], ids=["function_call", "custom_tool_call"])
@pytest.mark.parametrize("case", SURROGATES)
def test_a_lone_surrogate_in_a_responses_call_never_breaks_the_next_request(
    box: ts.Toolbox, case: str, custom: bool
) -> None:
    call_id, name, text = SURROGATES[case]
    if custom:
        name = name.replace("lookup", "note")
        text = "a" + LONE if case == "arguments" else "a"
    with LocalServer(check_history=True) as server:
        server.enqueue(
            StreamScript.responses(response_events([(call_id, name, text)], custom=custom)),
            StreamScript.responses(response_events(text="Sorry.", id="resp_2")),
        )
        result = ts.run(server.client(max_retries=0), model="m", input="x", toolbox=box, api="responses")
        assert result.stop_reason == "done"
        [item] = [i for i in server.requests[1]["input"] if _kind(i).endswith("call")]
        [output] = [i for i in server.requests[1]["input"] if _kind(i).endswith("_output")]
        assert output["call_id"] == item["call_id"]
        refused = case in REFUSED and not (custom and case == "escaped-arguments")
        assert (ran == []) is refused and output["output"].startswith("Error:") is refused
        assert LONE not in json.dumps(server.requests[1]["input"], ensure_ascii=False)


@pytest.mark.parametrize("case", SURROGATES)
def test_a_lone_surrogate_in_a_chat_call_never_breaks_the_next_request(box: ts.Toolbox, case: str) -> None:
    if case == "name":
        pytest.skip("a name outside a-z A-Z 0-9 _ - cannot be sent back on Chat Completions (H13)")
    with LocalServer(check_history=True) as server:
        server.enqueue(calls_reply([SURROGATES[case]]), text_reply("Sorry."))
        result = ts.run(server.client(max_retries=0), model="m", messages=user(), toolbox=box)
        assert result.stop_reason == "done" and (ran == []) is (case in REFUSED)
        [sent] = server.requests[1]["messages"][1]["tool_calls"]
        [(answered, text)] = tool_answers(server.requests[1]).items()
        assert answered == sent["id"] and text.startswith("Error:") is (case in REFUSED)
        assert LONE not in json.dumps(server.requests[1]["messages"], ensure_ascii=False)


# -- a refused call keeps the id the server sent -----------------------------------------------------


@needs_responses
@pytest.mark.parametrize("use_async", [False, True], ids=["run", "arun"])
def test_a_responses_call_id_over_the_bound_is_answered_under_that_id(
    box: ts.Toolbox, use_async: bool
) -> None:
    long = "call_" + "x" * (ts.Limits().max_id_chars - 4)  # one character over
    with LocalServer(check_history=True) as server:
        server.enqueue(
            StreamScript.responses(response_events([(long, "lookup", '{"key": "a"}')])),
            StreamScript.responses(response_events(text="Sorry.", id="resp_2")),
        )
        kwargs: dict[str, Any] = dict(model="m", input="x", toolbox=box, api="responses")
        if use_async:
            result = asyncio.run(ts.arun(server.async_client(max_retries=0), **kwargs))
        else:
            result = ts.run(server.client(max_retries=0), **kwargs)
        assert result.stop_reason == "done" and ran == []
        [output] = [i for i in server.requests[1]["input"] if _kind(i) == "function_call_output"]
        assert output["call_id"] == long and "max_id_chars" in output["output"]


# -- the run's generators close silently ---------------------------------------------------------------


def _goes_wrong_early() -> StreamScript:
    head = {"index": 0, "id": "c1", "type": "function", "function": {"name": "lookup", "arguments": ""}}
    pieces = ['{"key": ', "]", *([' "' + "x" * 20 + '"'] * 100), "}"]
    chunks = [chunk(delta={"role": "assistant", "content": None}), chunk(delta={"tool_calls": [head]})]
    chunks += [chunk(delta={"tool_calls": [{"index": 0, "function": {"arguments": p}}]}) for p in pieces]
    chunks.append(chunk(delta={}, finish_reason="tool_calls"))
    return StreamScript(chunks, delay=0.005)


@pytest.mark.parametrize("use_async", [False, True], ids=["run", "arun"])
def test_an_abandoned_step_is_finalised_silently(
    box: ts.Toolbox, use_async: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    unraisable: list[str] = []
    monkeypatch.setattr(
        sys, "unraisablehook", lambda u: unraisable.append(f"{u.exc_value!r} in {u.object!r}")
    )
    with LocalServer() as server:
        server.enqueue(
            _goes_wrong_early(), calls_reply([("c2", "lookup", '{"key": "a"}')]), text_reply("Found.")
        )
        kwargs: dict[str, Any] = dict(model="m", messages=user(), toolbox=box, fail_fast=True)
        if use_async:
            result = asyncio.run(ts.arun(server.async_client(), **kwargs))
        else:
            result = ts.run(server.client(), **kwargs)
        gc.collect()
    assert result.stop_reason == "done" and ran == [("lookup", "a")]
    assert unraisable == []
