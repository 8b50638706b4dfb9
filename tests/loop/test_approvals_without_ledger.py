"""Approvals without a ``ledger=``, within one process (``tools/_approval.py``).

A run given no ledger that stops awaiting approval keeps its in-memory ledger for the run that
answers, keyed by the history it returned: ``ts.run(..., approvals={...})`` given that history (as
returned, or stored as JSON) and no ledger finds it (before, each run made its own ledger, and the
answer failed with "this ledger has no record"). Never one ledger for all runs: two unrelated runs
whose provider reuses ``call_0`` each run their own call. What cannot be matched is refused with the
fix: the same ``ledger=`` for the run that asked and the run that answers.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

import toolstitch as ts
from tests.tools._support import Recorder, calls_reply, text_reply
from toolstitch.errors import ApprovalError
from toolstitch.testing import LocalServer, StreamScript, response_events

ran = Recorder()


@ts.tool(confirm=True)
def refund(order: str) -> str:
    """Refund an order."""
    ran.add("refund", order)
    return f"refunded {order}"


CALL = [("call_0", "refund", '{"order": "A7"}')]  # TGI and SGLang number their calls like this


@pytest.fixture(autouse=True)
def _reset() -> None:
    ran.calls.clear()


def ask(server: LocalServer, text: str = "Refund order A7") -> ts.RunResult:
    """A run given no ledger whose call waits for a person."""
    server.enqueue(calls_reply(CALL))
    result = ts.run(
        server.client(), model="m", messages=[{"role": "user", "content": text}], toolbox=[refund]
    )
    assert result.stop_reason == "awaiting_approval" and [c.id for c in result.pending] == ["call_0"]
    return result


def answer(server: LocalServer, messages: list[Any], approvals: dict[str, Any]) -> ts.RunResult:
    server.enqueue(text_reply("Done."))
    return ts.run(server.client(), model="m", messages=messages, toolbox=[refund], approvals=approvals)


def refused(server: LocalServer, messages: list[Any], approvals: dict[str, Any]) -> ApprovalError:
    """The answering run is refused before anything runs or is sent."""
    sent = len(server.requests)
    with pytest.raises(ApprovalError) as info:
        ts.run(server.client(), model="m", messages=messages, toolbox=[refund], approvals=approvals)
    assert len(server.requests) == sent
    return info.value


def test_a_run_given_no_ledger_is_answered_by_a_run_given_none(server: LocalServer) -> None:
    first = ask(server, "Refund order A7 (sync)")
    saved = json.loads(json.dumps(first.messages))  # stored as JSON and read back
    done = answer(server, saved, {"call_0": True})
    assert done.stop_reason == "done" and ran.names() == ["refund"]
    # The same history answered again (a retried request): the ledger answers, the refund is not
    # made twice.
    again = answer(server, saved, {"call_0": True})
    assert again.stop_reason == "done" and ran.names() == ["refund"]
    assert [m["content"] for m in again.messages if m["role"] == "tool"] == ["refunded A7"]


async def test_a_run_given_no_ledger_is_answered_by_a_run_given_none_async(server: LocalServer) -> None:
    server.enqueue(calls_reply(CALL))
    messages = [{"role": "user", "content": "Refund order A7 (async)"}]
    first = await ts.arun(server.async_client(), model="m", messages=messages, toolbox=[refund])
    assert first.stop_reason == "awaiting_approval"
    server.enqueue(text_reply("Done."))
    done = await ts.arun(
        server.async_client(),
        model="m",
        messages=first.messages,
        toolbox=[refund],
        approvals={"call_0": True},
    )
    assert done.stop_reason == "done" and ran.names() == ["refund"]
    # A denial through the same path: answered with the reason, nothing runs.
    server.enqueue(calls_reply([("call_0", "refund", '{"order": "B2"}')]))
    second = await ts.arun(server.async_client(), model="m", messages=messages, toolbox=[refund])
    server.enqueue(text_reply("OK."))
    denied = await ts.arun(
        server.async_client(),
        model="m",
        messages=second.messages,
        toolbox=[refund],
        approvals={"call_0": ts.Deny("over budget")},
    )
    assert denied.stop_reason == "done" and ran.names() == ["refund"]
    assert "over budget" in next(m["content"] for m in denied.messages if m["role"] == "tool")


def test_unrelated_runs_reusing_an_id_each_run_their_own_call(server: LocalServer) -> None:
    """Two conversations whose provider calls ``call_0`` with the same arguments: approving one
    never answers the other from its records (each refund is made, once)."""
    alice, bob = ask(server, "Alice: refund A7"), ask(server, "Bob: refund A7")
    assert alice.messages[1:] == bob.messages[1:]  # the same call, under the same id
    assert answer(server, bob.messages, {"call_0": True}).stop_reason == "done"
    assert answer(server, alice.messages, {"call_0": True}).stop_reason == "done"
    assert ran.names() == ["refund", "refund"]


def test_what_cannot_be_matched_is_refused_with_the_fix(server: LocalServer) -> None:
    # Two runs that returned the very same history: which one a person answers cannot be told.
    first, second = ask(server, "Refund order A7 (twice)"), ask(server, "Refund order A7 (twice)")
    assert first.messages == second.messages
    error = refused(server, first.messages, {"call_0": True})
    assert "Pass the same ledger=" in str(error) and "ts.SQLiteLedger" in str(error)
    # A run whose ledger was forgotten (or that ran in another process).
    third = ask(server, "Refund order A7 (forgotten)")
    for n in range(ts.tools._approval.REMEMBERED):
        ts.tools.remember_ledger([{"role": "user", "content": str(n)}], ts.MemoryLedger())
    error = refused(server, third.messages, {"call_0": True})
    assert "Pass the same ledger=" in str(error)
    assert "ts.PostgresLedger across processes, ts.MemoryLedger within one" in str(error)
    # A history changed since: not the history that awaited, so no ledger is found for it.
    fourth = ask(server, "Refund order A7 (changed)")
    changed = json.loads(json.dumps(fourth.messages))
    changed[-1]["tool_calls"][0]["function"]["arguments"] = '{"order": "Z9"}'
    assert "no record" in str(refused(server, changed, {"call_0": True}))
    assert ran.names() == []
    # Given a ledger explicitly, as before: the remembered ledger plays no part.
    with pytest.raises(ApprovalError, match="no record"):
        ts.run(
            server.client(),
            model="m",
            messages=fourth.messages,
            toolbox=[refund],
            ledger=ts.MemoryLedger(),
            approvals={"call_0": True},
        )


def test_the_responses_api_too(server: LocalServer) -> None:
    pytest.importorskip("openai.types.responses", reason="this openai release has no Responses API")
    server.enqueue(StreamScript.responses(response_events(CALL)))
    first = ts.run(server.client(), model="m", input="Refund A7", toolbox=[refund], api="responses")
    assert first.stop_reason == "awaiting_approval"
    server.enqueue(StreamScript.responses(response_events(text="Done.", id="resp_2")))
    saved = json.loads(json.dumps(first.input))
    done = ts.run(
        server.client(), model="m", input=saved, toolbox=[refund], api="responses", approvals={"call_0": True}
    )
    assert done.output_text == "Done." and ran.names() == ["refund"]
