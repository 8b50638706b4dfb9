"""Fail closed, round 3 (issue 29), the loop's share: hostile probes over real HTTP.

Each probe tries one class of defect every way it can be spelled, sync and async:

* a resumed ``input`` whose ``function_call`` item never completed (what a crash after an
  incomplete response leaves) is never run, approved or not, whatever its status says;
* ``ts.tools.execute(..., approvals=...)`` called directly holds every approved call to its deferral
  fingerprint, as the loop does;
* ``ts.run`` over a client wrapped with ``guard=True``: the loop's own retries and refusals.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

pytest.importorskip("openai.types.responses", reason="this openai release has no Responses API")

import toolstitch as ts
from toolstitch.errors import ApprovalError, UnsafeToolCallError
from toolstitch.loop import RetryPolicy
from toolstitch.testing import LocalServer, StreamScript, chunk, response_events, tool_call_chunks
from toolstitch.tools import Toolbox, tool

FAST = RetryPolicy(attempts=3, initial=0.0, maximum=0.0, jitter=0.0)
ran: list[tuple[str, Any]] = []


@tool
def get_weather(city: str) -> dict[str, Any]:
    """Current weather for a city."""
    ran.append(("get_weather", city))
    return {"city": city, "temp": 21}


@tool(confirm=True)
def delete_file(path: str) -> str:
    """Delete a file."""
    ran.append(("delete_file", path))
    return "deleted"


BOX = Toolbox([get_weather, delete_file])


@pytest.fixture(autouse=True)
def _clear() -> None:
    ran.clear()


def _user() -> dict[str, Any]:
    return {"role": "user", "content": "Weather in Rome?"}


def _item(
    status: Any, *, name: str = "get_weather", arguments: str = '{"city": "Rome"}', **more: Any
) -> dict:
    item: dict[str, Any] = {
        "type": "function_call",
        "call_id": "call_1",
        "name": name,
        "arguments": arguments,
    }
    if status is not _ABSENT:
        item["status"] = status
    item.update(more)
    return item


_ABSENT = object()
# Every status an item can carry that is not "completed": the SDK's other two, what no server
# sends, and values that are no status at all.
NOT_COMPLETED = ["incomplete", "in_progress", "failed", "cancelled", "Completed", "", 5, True, {"s": 1}]


def _answered(server: LocalServer) -> dict[str, str]:
    """The function_call_output items the next request carried, by call id."""
    items = server.requests[-1]["input"]
    return {i["call_id"]: i["output"] for i in items if i.get("type") == "function_call_output"}


# ------------------------------------------------- 5: a resumed input runs only what completed


@pytest.mark.parametrize("status", NOT_COMPLETED)
def test_a_resumed_item_that_never_completed_never_runs(server: LocalServer, status: Any) -> None:
    server.check_history = True
    server.enqueue(StreamScript.responses(response_events(text="Sorry, try again.")))
    result = ts.run(
        server.client(), model="m", input=[_user(), _item(status)], toolbox=BOX, api="responses", retry=FAST
    )
    assert ran == []
    (step0, _) = result.steps
    (call,) = step0.calls
    assert call.status == "incomplete" and call.id == "call_1"
    (answer,) = step0.results
    assert answer.status == "refused" and answer.reason == "incomplete"
    # The model is told the call did not run (the server's own check: every call answered).
    assert "not" in _answered(server)["call_1"].lower()
    assert result.output_text == "Sorry, try again."


@pytest.mark.parametrize("status", ["completed", _ABSENT])
def test_a_resumed_item_that_completed_or_says_nothing_runs(server: LocalServer, status: Any) -> None:
    """Items a user builds carry no status; an item the server finished says ``completed``."""
    server.check_history = True
    server.enqueue(StreamScript.responses(response_events(text="21 degrees.")))
    result = ts.run(server.client(), model="m", input=[_user(), _item(status)], toolbox=BOX, api="responses")
    assert ran == [("get_weather", "Rome")]
    assert result.steps[0].calls[0].status == "ready"


@pytest.mark.parametrize("status", ["incomplete", "in_progress", "failed"])
async def test_arun_never_runs_an_item_that_never_completed(server: LocalServer, status: Any) -> None:
    server.check_history = True
    server.enqueue(StreamScript.responses(response_events(text="Sorry.")))
    result = await ts.arun(
        server.async_client(), model="m", input=[_user(), _item(status)], toolbox=BOX, api="responses"
    )
    assert ran == []
    assert result.steps[0].results[0].reason == "incomplete"


@pytest.mark.parametrize("asynchronous", [False, True])
async def test_an_approved_item_that_never_completed_never_runs(
    server: LocalServer, asynchronous: bool
) -> None:
    """The approval path: the call was deferred complete, then the saved input was damaged (or the
    crash left the item incomplete); approving it runs nothing, and says so."""
    server.check_history = True
    ledger = ts.MemoryLedger()
    server.enqueue(StreamScript.responses(response_events([("call_1", "delete_file", '{"path": "/tmp/x"}')])))
    first = ts.run(server.client(), model="m", input="Clean up", toolbox=BOX, api="responses", ledger=ledger)
    assert first.stop_reason == "awaiting_approval"
    stored = json.loads(json.dumps(first.input))
    (item,) = [i for i in stored if i.get("type") == "function_call"]
    item["status"] = "incomplete"
    server.enqueue(StreamScript.responses(response_events(text="Not deleted.", id="resp_9")))
    options: dict[str, Any] = {
        "model": "m",
        "input": stored,
        "toolbox": BOX,
        "api": "responses",
        "ledger": ledger,
        "approvals": {"call_1": True},
    }
    with pytest.raises(ApprovalError, match="never completed"):
        if asynchronous:
            await ts.arun(server.async_client(), **options)
        else:
            ts.run(server.client(), **options)
    assert ran == []


# ------------------------------------- 10: approvals given to execute directly hold to the record


def _deferred(server: LocalServer, ledger: ts.tools.ClaimLedger, path: str = "/tmp/x") -> list[ts.ToolCall]:
    """A call to a confirm=True tool deferred by ``ts.run`` (the ledger records it awaiting approval)."""
    server.enqueue(
        StreamScript.responses(response_events([("call_1", "delete_file", json.dumps({"path": path}))]))
    )
    first = ts.run(server.client(), model="m", input="Clean up", toolbox=BOX, api="responses", ledger=ledger)
    assert first.stop_reason == "awaiting_approval"
    return list(first.pending)


def _changed(path: str) -> ts.ToolCall:
    """The deferred call's id on other arguments (a history edited after the deferral)."""
    return ts.core.sealed_call(
        index=0,
        id="call_1",
        name="delete_file",
        arguments=json.dumps({"path": path}),
        tools=BOX.definitions(),
    )


class _Unreadable(ts.MemoryLedger):
    """A ledger whose reads fail after the deferral was recorded (a database gone away)."""

    broken = False

    def get(self, key: str, fp: str) -> ts.tools.LedgerEntry | None:
        if self.broken:
            raise OSError("the database went away")
        return super().get(key, fp)


async def _execute(asynchronous: bool, calls: list[ts.ToolCall], **options: Any) -> list[ts.ToolResult]:
    if asynchronous:
        return await ts.tools.aexecute(BOX, calls, **options)
    return ts.tools.execute(BOX, calls, **options)


@pytest.mark.parametrize("asynchronous", [False, True])
async def test_execute_runs_an_approved_call_only_as_it_was_deferred(
    server: LocalServer, asynchronous: bool
) -> None:
    ledger = ts.MemoryLedger()
    (call,) = _deferred(server, ledger)
    # Changed after the deferral, under the approved key: refused, and the model is told why.
    (changed,) = await _execute(asynchronous, [_changed("/etc")], ledger=ledger, approvals={"call_1": True})
    assert (changed.status, changed.reason) == ("refused", "not_approved")
    assert "differ" in changed.content and ran == []
    # No ledger, or another ledger: no record of a deferral, so no approval.
    for options in ({}, {"ledger": ts.MemoryLedger()}):
        (none,) = await _execute(asynchronous, [call], approvals={"call_1": True}, **options)
        assert (none.status, none.reason) == ("refused", "not_approved") and ran == []
    # A denial needs no record; the deferred call itself, approved, runs once.
    (denied,) = await _execute(asynchronous, [call], approvals={"call_1": ts.Deny("not today")})
    assert denied.reason == "not_approved" and "not today" in denied.content and ran == []
    (done,) = await _execute(asynchronous, [call], ledger=ledger, approvals={"call_1": True})
    assert done.ok and ran == [("delete_file", "/tmp/x")]


@pytest.mark.parametrize("asynchronous", [False, True])
async def test_execute_approves_nothing_when_the_ledger_cannot_be_read(
    server: LocalServer, asynchronous: bool
) -> None:
    ledger = _Unreadable()
    (call,) = _deferred(server, ledger)
    ledger.broken = True
    (result,) = await _execute(asynchronous, [call], ledger=ledger, approvals={"call_1": True})
    assert result.status == "refused" and ran == []


# --------------------------------------- 4 (part): ts.run over a client wrapped with guard=True


@tool(read_only=True, eager=True)
def lookup(q: str) -> str:
    """Look something up (read-only: dispatched as soon as its call is ready)."""
    ran.append(("lookup", q))
    return f"found {q}"


GUARDED_BOX = Toolbox([get_weather, lookup])


def _chat_turn(*calls: tuple[str, str, str]) -> StreamScript:
    return StreamScript(tool_call_chunks(list(calls)))


def _text_turn(text: str) -> StreamScript:
    return StreamScript([chunk(delta={"role": "assistant", "content": text}), chunk(finish_reason="stop")])


TRUNCATED = ("call_1", "get_weather", '{"city": "Par')
WHOLE = ("call_2", "get_weather", '{"city": "Paris"}')


def _run(asynchronous: bool, server: LocalServer, **options: Any) -> Any:
    events: list[Any] = []
    options.setdefault("retry", FAST)
    options.setdefault("on_event", events.append)
    if asynchronous:
        client: Any = ts.wrap(server.async_client(), guard=True)
        return ts.arun(client, model="m", **options), events
    return ts.run(ts.wrap(server.client(), guard=True), model="m", **options), events


async def _result(asynchronous: bool, server: LocalServer, **options: Any) -> tuple[Any, list[Any]]:
    outcome, events = _run(asynchronous, server, **options)
    return (await outcome if asynchronous else outcome), events


@pytest.mark.parametrize("asynchronous", [False, True])
async def test_a_guarded_run_stops_at_an_unsafe_choice_with_nothing_run_and_no_second_request(
    server: LocalServer, asynchronous: bool
) -> None:
    """The answer was complete (and unsafe): asking again would hide it, so the loop does not retry."""
    server.enqueue(_chat_turn(TRUNCATED), _chat_turn(WHOLE))
    with pytest.raises(UnsafeToolCallError):
        await _result(asynchronous, server, messages=[_user()], toolbox=GUARDED_BOX)
    assert ran == [] and len(server.requests) == 1


@pytest.mark.parametrize("asynchronous", [False, True])
async def test_a_guarded_run_dispatches_nothing_of_a_choice_before_it_finished(
    server: LocalServer, asynchronous: bool
) -> None:
    """A ready read-only ``eager`` call beside one cut short: the guard refuses the choice, so the
    eager call must not have started while the stream flowed (it did: the guard's promise broken)."""
    eager = ("call_1", "lookup", '{"q": "a"}')
    server.enqueue(StreamScript(tool_call_chunks([eager, TRUNCATED], interleave=False)))
    with pytest.raises(UnsafeToolCallError):
        await _result(asynchronous, server, messages=[_user()], toolbox=GUARDED_BOX)
    assert ran == []


@pytest.mark.parametrize("asynchronous", [False, True])
async def test_a_guarded_run_runs_a_safe_choice_after_its_finish_and_retries_a_dropped_stream(
    server: LocalServer, asynchronous: bool
) -> None:
    """The loop's own retries over a guarded client: a connection dropped mid-stream is asked again;
    the safe answer passes the guard and each call runs once (the eager one too, after the finish)."""
    eager = ("call_1", "lookup", '{"q": "a"}')
    safe = tool_call_chunks([eager, WHOLE])
    server.enqueue(StreamScript(safe, cut_after=3), StreamScript(safe), _text_turn("Done."))
    result, events = await _result(asynchronous, server, messages=[_user()], toolbox=GUARDED_BOX)
    assert sorted(ran) == [("get_weather", "Paris"), ("lookup", "a")]
    assert [type(e).__name__ for e in events if type(e).__name__ == "RequestRetried"] == ["RequestRetried"]
    assert [e.eager for e in events if type(e).__name__ == "CallDispatched"] == [False, False]
    assert result.stop_reason == "done" and ts.validate_history(result.messages) == []


@pytest.mark.parametrize("asynchronous", [False, True])
async def test_a_guarded_responses_run_stops_at_an_unsafe_response_and_runs_a_safe_one(
    server: LocalServer, asynchronous: bool
) -> None:
    server.check_history = True
    server.enqueue(StreamScript.responses(response_events([TRUNCATED])))
    with pytest.raises(UnsafeToolCallError):
        await _result(asynchronous, server, input="Weather?", toolbox=GUARDED_BOX, api="responses")
    assert ran == [] and len(server.requests) == 1
    server.enqueue(
        StreamScript.responses(response_events([("call_1", "lookup", '{"q": "a"}'), WHOLE], id="resp_2")),
        StreamScript.responses(response_events(text="21 degrees.", id="resp_3")),
    )
    result, events = await _result(
        asynchronous, server, input="Weather?", toolbox=GUARDED_BOX, api="responses"
    )
    assert sorted(ran) == [("get_weather", "Paris"), ("lookup", "a")]
    assert [e.eager for e in events if type(e).__name__ == "CallDispatched"] == [False, False]
    assert result.output_text == "21 degrees." and ts.validate_input(result.input) == []
