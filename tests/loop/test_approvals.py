"""Confirmation answers and approvals that wait for a person, over real HTTP (LocalServer).

A ``confirm=True`` tool runs only after a yes: from the toolbox's callback (``True``, ``False`` or
``ts.Deny(reason)``), or, without a callback, from ``run(..., approvals=...)`` later, maybe in another
process. The server checks every history the way OpenAI does (``check_history=True``), so a request
sent before the deferred calls were answered would fail the test.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import toolstitch as ts
from tests.conftest import ROOT
from tests.loop._approval_worker import toolbox
from tests.tools._support import calls_reply, text_reply, tool_messages_of, user
from toolstitch.errors import ApprovalError
from toolstitch.events import CallAwaitingApproval, RunEvent
from toolstitch.history import validate_history
from toolstitch.testing import LocalServer, StreamScript

TRANSFER = ("call_t", "transfer", '{"amount": 5, "to": "bob"}')
BALANCE = ("call_b", "balance", "{}")


def bank(body: dict[str, Any]) -> StreamScript:
    """The "model": asks for the balance and a transfer, then sums up what the tools said."""
    results = tool_messages_of(body)
    if not results:
        return calls_reply([BALANCE, TRANSFER])
    return text_reply("done: " + " | ".join(m["content"] for m in results))


@pytest.fixture
def server() -> Iterator[LocalServer]:
    with LocalServer(check_history=True, handler=bank) as srv:
        yield srv


@pytest.fixture
def effects(tmp_path: Path) -> Path:
    return tmp_path / "effects.log"


def ran(effects: Path) -> list[str]:
    """What really ran (name and arguments), in every process."""
    if not effects.exists():
        return []
    return [" ".join(line.split()[:-1]) for line in effects.read_text().splitlines()]


def contents(messages: list[Any]) -> dict[str, str]:
    return {m["tool_call_id"]: m["content"] for m in messages if m.get("role") == "tool"}


# ----------------------------------------------------------------------------- the callback's answers


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        (True, "sent 5 to bob"),
        (
            ts.Deny("the limit is 3 EUR without a second signature"),
            "the limit is 3 EUR without a second signature",
        ),
        (False, "was not approved"),
        ("yes", "was not approved"),  # only True itself approves
        (1, "was not approved"),
        (None, "was not approved"),
    ],
)
def test_the_callback_answers_true_false_or_deny_with_a_reason(
    server: LocalServer, effects: Path, answer: Any, expected: str
) -> None:
    box = toolbox(str(effects))
    box.confirm = lambda call, tool: answer
    with server.client() as client, box:
        result = ts.run(client, model="m", messages=user(), toolbox=box)
    assert result.stop_reason == "done" and validate_history(result.messages) == []
    assert expected in contents(result.messages)["call_t"]
    assert ran(effects).count("transfer 5 bob") == (1 if answer is True else 0)


async def test_an_async_callback_and_one_that_raises(server: LocalServer, effects: Path) -> None:
    seen: list[tuple[str | None, Any]] = []

    async def ask(call: ts.ToolCall, tool: ts.Tool) -> ts.Deny:
        seen.append((call.name, call.parsed))
        await asyncio.sleep(0)
        return ts.Deny("not on a Sunday")

    box = toolbox(str(effects))
    box.confirm = ask
    async with server.async_client() as client:
        result = await ts.arun(client, model="m", messages=user(), toolbox=box)
    assert seen == [("transfer", {"amount": 5, "to": "bob"})]
    assert contents(result.messages)["call_t"].endswith("Reason: not on a Sunday")

    def broken(call: ts.ToolCall, tool: ts.Tool) -> bool:
        raise ConnectionError("approvals.internal:8443 token=abc")

    box.confirm = broken
    async with server.async_client() as client:
        result = await ts.arun(client, model="m", messages=user(), toolbox=box)
    told = contents(result.messages)["call_t"]
    assert "not approved" in told and "8443" not in told and "abc" not in told
    assert ran(effects).count("transfer 5 bob") == 0
    box.close()


# ----------------------------------------------------------------------------- deferred approval


def defer(server: LocalServer, effects: Path, ledger: ts.tools.ClaimLedger) -> ts.RunResult:
    events: list[RunEvent] = []
    with server.client() as client, toolbox(str(effects)) as box:
        result = ts.run(
            client, model="m", messages=user(), toolbox=box, ledger=ledger, on_event=events.append
        )
    assert result.stop_reason == "awaiting_approval"
    assert [(c.id, c.name, c.parsed) for c in result.pending] == [
        ("call_t", "transfer", {"amount": 5, "to": "bob"})
    ]
    assert [e.call.id for e in events if isinstance(e, CallAwaitingApproval)] == ["call_t"]
    assert ran(effects) == ["balance"]  # the other call of the step ran; nothing needing approval did
    assert len(server.requests) == 1
    assert list(contents(result.messages)) == ["call_b"]  # the transfer is left unanswered
    return result


def test_without_a_callback_the_run_waits_then_resumes_with_an_approval(
    server: LocalServer, effects: Path
) -> None:
    ledger = ts.MemoryLedger()
    first = defer(server, effects, ledger)
    saved = json.loads(json.dumps(first.messages))  # plain JSON: stored, then loaded
    with server.client() as client, toolbox(str(effects)) as box:
        result = ts.run(
            client, model="m", messages=saved, toolbox=box, ledger=ledger, approvals={"call_t": True}
        )
    assert result.stop_reason == "done" and result.pending == []
    assert validate_history(result.messages) == []
    assert ran(effects) == ["balance", "transfer 5 bob"]
    # No request was sent before the transfer's result: the second one carries both results.
    assert len(server.requests) == 2
    assert contents(server.requests[1]["messages"]) == {"call_b": "100", "call_t": "sent 5 to bob"}
    assert result.steps[0].completion is None and [r.status for r in result.steps[0].results] == ["ok"]


def test_a_denial_reaches_the_model_with_its_reason(server: LocalServer, effects: Path) -> None:
    ledger = ts.MemoryLedger()
    first = defer(server, effects, ledger)
    with server.client() as client, toolbox(str(effects)) as box:
        result = ts.run(
            client,
            model="m",
            messages=first.messages,
            toolbox=box,
            ledger=ledger,
            approvals={"call_t": ts.Deny("Bob's account is closed")},
        )
    assert result.stop_reason == "done" and ran(effects) == ["balance"]
    told = contents(server.requests[1]["messages"])["call_t"]
    assert "not approved" in told and told.endswith("Reason: Bob's account is closed")


async def test_the_async_twin_waits_and_resumes(server: LocalServer, effects: Path) -> None:
    ledger = ts.MemoryLedger()
    async with server.async_client() as client:
        with toolbox(str(effects)) as box:
            first = await ts.arun(client, model="m", messages=user(), toolbox=box, ledger=ledger)
            assert first.stop_reason == "awaiting_approval" and [c.id for c in first.pending] == ["call_t"]
            result = await ts.arun(
                client,
                model="m",
                messages=first.messages,
                toolbox=box,
                ledger=ledger,
                approvals={"call_t": True},
            )
    assert result.stop_reason == "done" and ran(effects) == ["balance", "transfer 5 bob"]


def test_partial_approvals_run_what_was_answered_and_keep_waiting(server: LocalServer, effects: Path) -> None:
    two = [
        ("call_1", "transfer", '{"amount": 1, "to": "ann"}'),
        ("call_2", "transfer", '{"amount": 2, "to": "cy"}'),
    ]
    server.handler = lambda body: calls_reply(two) if not tool_messages_of(body) else text_reply("ok")
    ledger = ts.MemoryLedger()
    with server.client() as client, toolbox(str(effects)) as box:
        first = ts.run(client, model="m", messages=user(), toolbox=box, ledger=ledger)
        assert [c.id for c in first.pending] == ["call_1", "call_2"]
        second = ts.run(
            client, model="m", messages=first.messages, toolbox=box, ledger=ledger, approvals={"call_1": True}
        )
        assert second.stop_reason == "awaiting_approval" and [c.id for c in second.pending] == ["call_2"]
        assert len(server.requests) == 1 and ran(effects) == ["transfer 1 ann"]
        third = ts.run(
            client,
            model="m",
            messages=second.messages,
            toolbox=box,
            ledger=ledger,
            approvals={"call_2": False},
        )
    assert third.stop_reason == "done" and ran(effects) == ["transfer 1 ann"]
    assert validate_history(third.messages) == []


def test_an_approval_given_twice_runs_the_call_once(
    server: LocalServer, effects: Path, tmp_path: Path
) -> None:
    # The same saved history resumed twice (a retried HTTP request, two workers): the ledger answers
    # the second resume with the first one's result.
    with ts.SQLiteLedger(tmp_path / "ledger.db", scope="conv") as ledger:
        first = defer(server, effects, ledger)
        for _ in range(2):
            with server.client() as client, toolbox(str(effects)) as box:
                result = ts.run(
                    client,
                    model="m",
                    messages=first.messages,
                    toolbox=box,
                    ledger=ledger,
                    approvals={"call_t": True},
                )
            assert result.stop_reason == "done"
    assert ran(effects) == ["balance", "transfer 5 bob"]
    assert result.steps[0].results[0].reused


def test_a_run_resumed_in_another_process(server: LocalServer, effects: Path, tmp_path: Path) -> None:
    db = tmp_path / "ledger.db"
    with ts.SQLiteLedger(db, scope="conv") as ledger:
        first = defer(server, effects, ledger)
    history, approvals, out = tmp_path / "history.json", tmp_path / "approvals.json", tmp_path / "out.json"
    history.write_text(json.dumps(first.messages))

    def resume(answers: dict[str, Any]) -> dict[str, Any]:
        approvals.write_text(json.dumps(answers))
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}
        argv = [server.base_url, str(db), str(effects), str(history), str(approvals), str(out)]
        subprocess.run(
            [sys.executable, "-m", "tests.loop._approval_worker", *argv],
            cwd=ROOT,
            env=env,
            check=True,
            timeout=60,
        )
        data: dict[str, Any] = json.loads(out.read_text())
        return data

    # Fail closed across processes too: an id that is not awaiting approval refuses everything.
    assert "no unanswered call" in resume({"call_t": True, "call_x": True})["refused"][0]
    assert ran(effects) == ["balance"] and len(server.requests) == 1
    done = resume({"call_t": True})
    assert done["stop_reason"] == "done" and validate_history(done["messages"]) == []
    lines = effects.read_text().splitlines()
    assert [" ".join(x.split()[:-1]) for x in lines] == ["balance", "transfer 5 bob"]
    assert lines[1].split()[-1] != str(os.getpid())  # it ran in the child
    assert contents(server.requests[1]["messages"])["call_t"] == "sent 5 to bob"


# ----------------------------------------------------------------------------- hostile approvals


def refused(
    server: LocalServer, effects: Path, messages: list[Any], ledger: Any, approvals: Any
) -> ApprovalError:
    before = len(server.requests)
    with server.client() as client, toolbox(str(effects)) as box, pytest.raises(ApprovalError) as info:
        ts.run(client, model="m", messages=messages, toolbox=box, ledger=ledger, approvals=approvals)
    assert len(server.requests) == before  # nothing was sent
    assert "transfer 5 bob" not in ran(effects)  # nothing ran
    return info.value


def test_hostile_approvals_are_refused_before_anything_runs(server: LocalServer, effects: Path) -> None:
    ledger = ts.MemoryLedger()
    first = defer(server, effects, ledger)
    msgs = first.messages
    assert "no unanswered call" in str(refused(server, effects, msgs, ledger, {"call_t": True, "nope": True}))
    # call_b was not pending (it ran); approving it is a mistake, refused.
    assert "no unanswered call" in str(refused(server, effects, msgs, ledger, {"call_b": True}))
    for bad in (1, "yes", None, {"deny": "x"}):
        assert "must be True, False or ts.Deny" in str(
            refused(server, effects, msgs, ledger, {"call_t": bad})
        )
    assert "a call id must be" in str(refused(server, effects, msgs, ledger, {7: True}))
    assert "must be a mapping" in str(refused(server, effects, msgs, ledger, ["call_t"]))
    # A ledger that did not record the deferral (another process's in-memory ledger, another scope).
    assert "no record" in str(refused(server, effects, msgs, ts.MemoryLedger(), {"call_t": True}))
    assert "no record" in str(
        refused(server, effects, msgs, ts.MemoryLedger(scope="other"), {"call_t": True})
    )
    # Approvals for a history with no call awaiting approval at all.
    assert "no unanswered call" in str(refused(server, effects, user(), ledger, {"call_t": True}))


@pytest.mark.parametrize(
    "arguments",
    ['{"amount": 5000, "to": "bob"}', '{"amount": 5, "to": "mallory"}', '{"to": "bob", "amount": 5, "x": 1}'],
)
def test_a_history_edited_since_the_deferral_is_refused(
    server: LocalServer, effects: Path, arguments: str
) -> None:
    ledger = ts.MemoryLedger()
    first = defer(server, effects, ledger)
    tampered = json.loads(json.dumps(first.messages))
    [call] = [c for m in tampered if m["role"] == "assistant" for c in m["tool_calls"] if c["id"] == "call_t"]
    call["function"]["arguments"] = arguments
    error = refused(server, effects, tampered, ledger, {"call_t": True})
    assert "differ from the call that awaited approval" in str(error)
    # The same id under another tool name is refused too.
    call["function"]["name"] = "balance"
    call["function"]["arguments"] = "{}"
    assert "does not await approval" in str(refused(server, effects, tampered, ledger, {"call_t": True}))
    # Re-ordering keys is not an edit: the canonical arguments are the same.
    call["function"]["name"] = "transfer"
    call["function"]["arguments"] = '{"to": "bob", "amount": 5}'
    with server.client() as client, toolbox(str(effects)) as box:
        result = ts.run(
            client, model="m", messages=tampered, toolbox=box, ledger=ledger, approvals={"call_t": True}
        )
    assert result.stop_reason == "done" and ran(effects) == ["balance", "transfer 5 bob"]


def test_a_resumed_history_without_approvals_keeps_waiting(server: LocalServer, effects: Path) -> None:
    ledger = ts.MemoryLedger()
    first = defer(server, effects, ledger)
    with server.client() as client, toolbox(str(effects)) as box:
        again = ts.run(client, model="m", messages=first.messages, toolbox=box, ledger=ledger)
    assert again.stop_reason == "awaiting_approval" and [c.id for c in again.pending] == ["call_t"]
    assert len(server.requests) == 1 and ran(effects) == ["balance"]


def test_an_approval_wins_over_the_callback_and_a_callback_answers_the_rest(
    server: LocalServer, effects: Path
) -> None:
    ledger = ts.MemoryLedger()
    first = defer(server, effects, ledger)
    with server.client() as client, toolbox(str(effects)) as box:
        # The resuming process has a callback: without an approval, it answers.
        box.confirm = lambda call, tool: ts.Deny("asked again: no")
        denied = ts.run(client, model="m", messages=first.messages, toolbox=box, ledger=ledger)
        assert contents(denied.messages)["call_t"].endswith("Reason: asked again: no")
        # An approval given to the run is the answer for that call: the callback is not asked.
        approved = ts.run(
            client, model="m", messages=first.messages, toolbox=box, ledger=ledger, approvals={"call_t": True}
        )
    assert contents(approved.messages)["call_t"] == "sent 5 to bob"
    assert ran(effects) == ["balance", "transfer 5 bob"]
