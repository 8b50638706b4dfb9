"""The ledger: a call id that finished is answered from the record, across retries and restarts.

What a user relies on: a side effect does not happen twice; a call that started and never reported
is not blindly repeated (unless it is read-only); a provider that reuses ids does not get one call's
result for another.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.tools._support import Recorder, sealed
from toolstitch.tools import Toolbox, tool
from toolstitch.tools._executor import ToolResult
from toolstitch.tools._ledger import ClaimLedger, MemoryLedger, SQLiteLedger, fingerprint

ran = Recorder()


@tool
def charge(amount: int) -> dict[str, object]:
    ran.add("charge", amount)
    return {"charged": amount, "currency": "EUR"}


@tool(read_only=True)
def balance() -> int:
    ran.add("balance")
    return 100


@pytest.fixture(autouse=True)
def _clear() -> None:
    ran.calls.clear()


LedgerFactory = Callable[[], ClaimLedger]


@pytest.fixture(params=["memory", "sqlite"])
def make_ledger(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[LedgerFactory]:
    """A factory: the same ledger again (memory) or a new connection to the same file (sqlite)."""
    memory = MemoryLedger()
    opened: list[SQLiteLedger] = []

    def make() -> ClaimLedger:
        if request.param == "memory":
            return memory
        ledger = SQLiteLedger(tmp_path / "calls.db")
        opened.append(ledger)
        return ledger

    yield make
    for ledger in opened:
        ledger.close()


def test_started_and_finished_are_recorded(make_ledger: LedgerFactory) -> None:
    ledger = make_ledger()
    [call] = sealed([("pay_1", "charge", '{"amount": 5}')])
    with Toolbox([charge]) as box:
        [result] = box.execute([call], ledger=ledger)
    [entry] = ledger.entries()
    assert entry.key == "pay_1" and entry.fingerprint == fingerprint(call) and entry.name == "charge"
    assert entry.state == "finished" and entry.status == "ok"
    assert entry.content == result.content and entry.value == {"charged": 5, "currency": "EUR"}
    assert entry.finished_at is not None and entry.finished_at >= entry.started_at


def test_a_restarted_run_reuses_the_recorded_result(make_ledger: LedgerFactory) -> None:
    with Toolbox([charge]) as box:
        box.execute(sealed([("pay_1", "charge", '{"amount": 5}')]), ledger=make_ledger())
    with Toolbox([charge]) as box:  # "after a restart": a new toolbox, a new ledger object
        [result] = box.execute(sealed([("pay_1", "charge", '{"amount": 5}')]), ledger=make_ledger())
    assert ran.calls == [("charge", 5)]
    assert result.reused and result.ok and result.value == {"charged": 5, "currency": "EUR"}
    assert result.content == '{"charged":5,"currency":"EUR"}'


def test_an_error_outcome_is_final_too(make_ledger: LedgerFactory) -> None:
    attempts = Recorder()

    @tool
    def flaky() -> None:
        attempts.add("flaky")
        raise RuntimeError("half done")

    with Toolbox([flaky]) as box:
        box.execute(sealed([("f1", "flaky", "{}")]), ledger=make_ledger())
        [result] = box.execute(sealed([("f1", "flaky", "{}")]), ledger=make_ledger())
    assert attempts.names() == ["flaky"]  # it may have had its effect: it is not run again
    assert result.reused and result.status == "error" and "(RuntimeError)" in result.content


def test_a_call_that_started_and_never_finished_is_not_repeated(make_ledger: LedgerFactory) -> None:
    ledger = make_ledger()
    [call] = sealed([("pay_1", "charge", '{"amount": 5}')])
    ledger.record_started("pay_1", fingerprint(call), "charge")  # the process died while it ran
    with Toolbox([charge]) as box:
        [result] = box.execute([call], ledger=make_ledger())
    assert ran.calls == []
    assert result.status == "refused" and result.reason == "outcome_unknown"
    assert "may already have taken effect" in result.content


def test_a_read_only_call_that_never_finished_runs_again(make_ledger: LedgerFactory) -> None:
    ledger = make_ledger()
    [call] = sealed([("b1", "balance", "{}")])
    ledger.record_started("b1", fingerprint(call), "balance")
    with Toolbox([balance]) as box:
        [result] = box.execute([call], ledger=make_ledger())
    assert result.ok and ran.names() == ["balance"]
    assert [e.state for e in make_ledger().entries()] == ["finished"]


def test_a_reused_id_with_different_arguments_is_a_different_call(make_ledger: LedgerFactory) -> None:
    # TGI and SGLang send "0" as every id (provider quirk Q39).
    with Toolbox([charge]) as box:
        box.execute(sealed([("0", "charge", '{"amount": 5}')]), ledger=make_ledger())
        [result] = box.execute(sealed([("0", "charge", '{"amount": 7}')]), ledger=make_ledger())
    assert ran.calls == [("charge", 5), ("charge", 7)]
    assert not result.reused and result.value == {"charged": 7, "currency": "EUR"}


def test_the_fingerprint_ignores_formatting_but_not_content() -> None:
    [a, b, c] = sealed(
        [
            ("x", "charge", '{"amount": 5, "note": "a"}'),
            ("y", "charge", '{ "note":"a","amount":5 }'),
            ("z", "charge", '{"amount": 6, "note": "a"}'),
        ]
    )
    assert fingerprint(a) == fingerprint(b) != fingerprint(c)


def test_sqlite_ledger_survives_reopening_and_closes(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite"
    [call] = sealed([("pay_1", "charge", '{"amount": 5}')])
    with SQLiteLedger(path) as ledger, Toolbox([charge]) as box:
        results: list[ToolResult] = box.execute([call], ledger=ledger)
    with SQLiteLedger(path) as reopened:
        entry = reopened.lookup("pay_1", fingerprint(call))
    assert entry is not None and entry.state == "finished" and entry.content == results[0].content


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_scopes_keep_conversations_that_share_a_ledger_apart(kind: str, tmp_path: Path) -> None:
    # Two conversations, one ledger file, a provider that sends "0" as every id: the same charge in
    # the second conversation is a new charge, not the first one's result.
    def open_ledger(scope: str) -> ClaimLedger:
        return (
            MemoryLedger(scope=scope)
            if kind == "memory"
            else SQLiteLedger(tmp_path / "calls.db", scope=scope)
        )

    first, second, first_again = open_ledger("conv-1"), open_ledger("conv-2"), open_ledger("conv-1")
    if kind == "memory":  # one in-memory ledger object per scope cannot share entries: reuse the first
        first_again = first
    with Toolbox([charge]) as box:
        box.execute(sealed([("0", "charge", '{"amount": 5}')]), ledger=first)
        [other] = box.execute(sealed([("0", "charge", '{"amount": 5}')]), ledger=second)
        [again] = box.execute(sealed([("0", "charge", '{"amount": 5}')]), ledger=first_again)
    assert ran.calls == [("charge", 5), ("charge", 5)]
    assert not other.reused
    assert again.reused
    for ledger in {first, second, first_again}:
        ledger.close()
