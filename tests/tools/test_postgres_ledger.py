"""The PostgreSQL ledger against a real PostgreSQL (a throwaway cluster; never a mock).

What a user relies on: however many worker processes execute the same call, the tool runs exactly
once and every worker gets its result; a worker killed in the middle of a side effect makes the call
"outcome unknown" (never a second run) while a read-only call runs again; a PostgreSQL restart does
not lose the ledger; a database that cannot be reached runs nothing; async execution never blocks
the event loop; a conversation resumes on another worker without running its tools again.
Executions are counted by the tools' own side effects (a file, a list), never by the ledger.
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import os
import random
import signal
import threading
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg_pool import AsyncConnectionPool, ConnectionPool

import toolstitch as ts
from tests.pg_cluster import Cluster
from tests.tools import _pg_workers
from tests.tools._support import Recorder, calls_reply, sealed, text_reply, tool_messages_of, user
from toolstitch.errors import LedgerUnavailableError
from toolstitch.testing import LocalServer, StreamScript
from toolstitch.tools._claim import StoredResult, fingerprint
from toolstitch.tools._postgres import SCHEMA_VERSION

SPAWN = multiprocessing.get_context("spawn")
BOUND = 120.0  # seconds any wait may take before the test fails (a bound, not a measurement)


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def _wait_for(predicate: Any, what: str) -> None:
    deadline = time.monotonic() + BOUND
    while not predicate():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.02)


# ----------------------------------------------------------------------------- the protocol, directly


def test_the_claim_protocol_on_postgres(pg_conninfo: str) -> None:
    with ts.PostgresLedger(pg_conninfo, scope="conv") as ledger:
        first = ledger.acquire("call_1", "fp", "charge", read_only=False)
        assert first.action == "run" and first.owner is not None
        assert ledger.acquire("call_1", "fp", "charge", read_only=False).action == "wait"
        assert ledger.finish("call_1", "fp", first.owner, StoredResult("ok", "charged 5", None, {"n": 5}))
        reuse = ledger.acquire("call_1", "fp", "charge", read_only=False)
        assert reuse.action == "reuse" and reuse.entry is not None
        assert (reuse.entry.status, reuse.entry.content, reuse.entry.value) == ("ok", "charged 5", {"n": 5})
        # Another owner cannot finish a claim it does not hold; a released claim is claimed afresh.
        second = ledger.acquire("call_2", "fp", "charge", read_only=False)
        assert second.owner is not None
        assert not ledger.finish("call_2", "fp", "someone-else", StoredResult("ok", "x"))
        ledger.release("call_2", "fp", second.owner)
        assert ledger.get("call_2", "fp") is None
        third = ledger.acquire("call_2", "fp", "charge", read_only=False)
        assert third.action == "run" and third.owner is not None
        # Abandoned (started, outcome never known): unknown for a side effect, runs for a read.
        ledger.abandon("call_2", "fp", third.owner)
        assert ledger.acquire("call_2", "fp", "charge", read_only=False).action == "unknown"
        taken = ledger.acquire("call_2", "fp", "charge", read_only=True)
        assert taken.action == "run" and taken.owner not in (None, third.owner)
        assert [e.key for e in ledger.entries()] == ["call_1", "call_2"]


async def test_the_claim_protocol_on_postgres_async(pg_conninfo: str) -> None:
    """``aacquire`` on the async connection reaches every verdict ``acquire`` does, in the same order:
    it drives the one claim plan of ``tools/_claim.py`` (the ledger keeps no copy of the decision)."""
    assert "_adecide" not in vars(ts.PostgresLedger) and "_acquire_plan" not in vars(ts.PostgresLedger)
    async with ts.PostgresLedger(pg_conninfo, scope="aconv") as ledger:
        first = await ledger.aacquire("call_1", "fp", "charge", read_only=False)
        assert first.action == "run" and first.owner is not None
        assert (await ledger.aacquire("call_1", "fp", "charge", read_only=False)).action == "wait"
        assert await ledger.afinish(
            "call_1", "fp", first.owner, StoredResult("ok", "charged 5", None, {"n": 5})
        )
        reuse = await ledger.aacquire("call_1", "fp", "charge", read_only=False)
        assert reuse.action == "reuse" and reuse.entry is not None and reuse.entry.value == {"n": 5}
        second = await ledger.aacquire("call_2", "fp", "charge", read_only=False)
        assert second.owner is not None
        await ledger.aabandon("call_2", "fp", second.owner)
        assert (await ledger.aacquire("call_2", "fp", "charge", read_only=False)).action == "unknown"
        taken = await ledger.aacquire("call_2", "fp", "charge", read_only=True)
        assert taken.action == "run" and taken.owner not in (None, second.owner)
        assert (await ledger.aget("call_2", "fp")).owner == taken.owner  # type: ignore[union-attr]


def test_the_table_is_created_once_with_a_schema_version(pg_conninfo: str) -> None:
    with ts.PostgresLedger(pg_conninfo) as ledger:
        assert ledger.get("k", "fp") is None
    with psycopg.connect(pg_conninfo) as conn:
        rows = conn.execute("SELECT table_name, version FROM toolstitch_schema_versions").fetchall()
        assert rows == [("toolstitch_claims", SCHEMA_VERSION)]
        columns = conn.execute(
            "SELECT column_name, data_type FROM information_schema.columns"
            " WHERE table_name = 'toolstitch_claims' ORDER BY ordinal_position"
        ).fetchall()
    assert dict(columns)["result"] == "jsonb"
    assert [c for c, _ in columns][:5] == ["scope", "call_key", "fingerprint", "name", "state"]


def test_a_table_from_a_newer_release_is_refused_and_nothing_runs(pg_conninfo: str) -> None:
    with ts.PostgresLedger(pg_conninfo) as ledger:
        ledger.get("k", "fp")
    with psycopg.connect(pg_conninfo, autocommit=True) as conn:
        conn.execute("UPDATE toolstitch_schema_versions SET version = version + 1")
    ran = Recorder()

    @ts.tool
    def charge(amount: int) -> str:
        ran.add("charge", amount)
        return "charged"

    with ts.PostgresLedger(pg_conninfo) as ledger, ts.Toolbox([charge]) as box:
        with pytest.raises(LedgerUnavailableError, match="newer toolstitch"):
            ledger.get("k", "fp")
        [result] = box.execute(sealed([("c1", "charge", '{"amount": 1}')]), ledger=ledger)
    assert ran.calls == [] and result.status == "refused" and result.reason == "ledger_unavailable"
    assert "newer toolstitch" in result.content


def test_results_are_jsonb_and_hostile_text_round_trips(pg_conninfo: str) -> None:
    # NUL and lone surrogates: PostgreSQL text and jsonb hold neither, the ledger must still work.
    hostile_key, hostile_scope = 'id\x00"\udc80', "scope\ud800"
    value = {"text": "nul \x00 lone \udc80 pair \U0001f600", "n": [1, 2.5, None]}
    with ts.PostgresLedger(pg_conninfo, scope=hostile_scope) as ledger:
        won = ledger.acquire(hostile_key, "fp", "name\x00", read_only=False)
        assert won.action == "run" and won.owner is not None
        assert ledger.finish(hostile_key, "fp", won.owner, StoredResult("ok", "content \udc80", None, value))
        again = ledger.acquire(hostile_key, "fp", "name\x00", read_only=False)
        assert again.action == "reuse" and again.entry is not None
        assert again.entry.content == "content \udc80" and again.entry.value == value
        assert again.entry.key == hostile_key and again.entry.name == "name\x00"
        [entry] = ledger.entries()
        assert entry.key == hostile_key
        plain = ledger.acquire("plain", "fp", "charge", read_only=False)
        assert plain.owner is not None
        ledger.finish("plain", "fp", plain.owner, StoredResult("ok", "fine", None, {"a": "é😀"}))
    with psycopg.connect(pg_conninfo) as conn:
        row = conn.execute(
            "SELECT result->>'content', result->'value'->>'a' FROM toolstitch_claims WHERE call_key = 'plain'"
        ).fetchone()
    assert row == ("fine", "é😀")  # readable in SQL


def test_scopes_are_kept_apart(pg_conninfo: str) -> None:
    ran = Recorder()

    @ts.tool
    def charge(amount: int) -> str:
        ran.add("charge", amount)
        return f"charged {amount}"

    calls = [("0", "charge", '{"amount": 5}')]  # TGI sends "0" for every call, in every conversation
    with (
        ts.Toolbox([charge]) as box,
        ts.PostgresLedger(pg_conninfo, scope="conv-a") as a,
        ts.PostgresLedger(pg_conninfo, scope="conv-b") as b,
    ):
        [first] = box.execute(sealed(calls), ledger=a)
        [second] = box.execute(sealed(calls), ledger=b)
        [again] = box.execute(sealed(calls), ledger=a)
        assert [e.scope for e in a.entries()] == ["conv-a"]
        assert [e.scope for e in b.entries()] == ["conv-b"]
    assert ran.calls == [("charge", 5), ("charge", 5)]
    assert (first.reused, second.reused, again.reused) == (False, False, True)


def test_purge_deletes_old_finished_entries_only(pg_conninfo: str) -> None:
    with ts.PostgresLedger(pg_conninfo, scope="conv") as ledger:
        done = ledger.acquire("done", "fp", "x", read_only=False)
        assert done.owner is not None
        ledger.finish("done", "fp", done.owner, StoredResult("ok", "ok"))
        running = ledger.acquire("running", "fp", "x", read_only=False)
        assert running.owner is not None
        assert ledger.purge(3600) == 0  # nothing is an hour old
        assert ledger.purge(0) == 1
        assert [e.key for e in ledger.entries()] == ["running"]  # a started claim is never purged
        with pytest.raises(ValueError):
            ledger.purge(float("nan"))


def test_bad_arguments_are_refused_at_construction(pg_conninfo: str) -> None:
    with pytest.raises(ValueError):
        ts.PostgresLedger(pg_conninfo, table="claims; DROP TABLE x")
    with pytest.raises(ValueError):
        ts.PostgresLedger(pg_conninfo, lease=float("inf"))
    with pytest.raises(TypeError):
        ts.PostgresLedger(42)  # type: ignore[arg-type]


# ----------------------------------------------------------------------------- many processes


def test_four_processes_execute_150_calls_each_exactly_once(pg_conninfo: str, tmp_path: Path) -> None:
    effects = tmp_path / "effects.txt"
    ids = [f"call_{i}" for i in range(150)]
    start = SPAWN.Event()
    outs, procs = [], []
    for p in range(4):
        order = ids[:]
        random.Random(p).shuffle(order)  # each worker meets the calls in its own order
        out = tmp_path / f"out{p}.json"
        proc = SPAWN.Process(
            target=_pg_workers.execute_ids, args=(pg_conninfo, str(effects), order, str(out), start)
        )
        proc.start()
        outs.append(out)
        procs.append(proc)
    start.set()  # all four open their ledger (and race to create the table) at once
    for proc in procs:
        proc.join(BOUND)
        assert proc.exitcode == 0
    ran = [int(line.split()[0]) for line in _lines(effects)]
    assert sorted(ran) == list(range(150))  # each call ran exactly once, fleet-wide
    results = [json.loads(out.read_text()) for out in outs]
    for per_process in results:
        assert len(per_process) == 150
        assert all(r["status"] == "ok" for r in per_process)  # every process got the result
    by_id: dict[str, list[dict[str, Any]]] = {}
    for r in (r for per_process in results for r in per_process):
        by_id.setdefault(r["id"], []).append(r)
    for i, rs in by_id.items():
        assert len({json.dumps(r["value"], sort_keys=True) for r in rs}) == 1, i  # the same value
        assert sum(not r["reused"] for r in rs) == 1, i  # one ran it; three reused it


@pytest.mark.parametrize("read_only", [False, True])
def test_a_worker_killed_mid_tool_then_a_retry_elsewhere(
    pg_conninfo: str, tmp_path: Path, read_only: bool
) -> None:
    marker = tmp_path / "marker.txt"
    proc = SPAWN.Process(target=_pg_workers.hang_in_tool, args=(pg_conninfo, str(marker), read_only))
    proc.start()
    _wait_for(lambda: _lines(marker) == ["started"], "the worker to start its tool")
    assert proc.pid is not None
    os.kill(proc.pid, signal.SIGKILL)
    proc.join(BOUND)
    ran = Recorder()

    def body() -> str:
        ran.add("op")
        return "ran again"

    op = ts.tool(body, name="op", read_only=read_only)
    with ts.PostgresLedger(pg_conninfo, scope="conv") as ledger, ts.Toolbox([op]) as box:
        [result] = box.execute(sealed([("call_1", "op", "{}")]), ledger=ledger)
    if read_only:
        assert result.ok and result.value == "ran again" and ran.names() == ["op"]
    else:
        assert result.status == "refused" and result.reason == "outcome_unknown"
        assert ran.names() == []  # never a second run of a side effect
        assert "may already have taken effect" in result.content


def test_a_claim_whose_lease_ran_out_on_another_machine_is_outcome_unknown(pg_conninfo: str) -> None:
    # The owner ran elsewhere (its pid cannot be checked from here): only the lease tells.
    ran = Recorder()

    @ts.tool
    def charge(amount: int) -> str:
        ran.add("charge", amount)
        return "charged"

    [call] = sealed([("call_1", "charge", '{"amount": 5}')])
    with ts.PostgresLedger(pg_conninfo, scope="conv", lease=1.0) as ledger, ts.Toolbox([charge]) as box:
        claim = ledger.try_claim("call_1", fingerprint(call), "charge", "elsewhere:1:a:b", time.time() + 1.0)
        assert claim.won
        entry = ledger.get("call_1", fingerprint(call))
        assert entry is not None and not ledger.is_stale(entry)  # a live lease: a duplicate waits
        _wait_for(lambda: ledger.is_stale(ledger.get("call_1", fingerprint(call))), "the lease to run out")
        [result] = box.execute([call], ledger=ledger)
    assert result.reason == "outcome_unknown" and ran.calls == []


def test_a_duplicate_waits_for_the_running_worker_and_reuses_its_result(pg_conninfo: str) -> None:
    ran = Recorder()

    @ts.tool
    def charge(amount: int) -> str:
        ran.add("charge", amount)
        return "charged by the other worker"

    [call] = sealed([("call_1", "charge", '{"amount": 5}')])
    fp = fingerprint(call)
    with (
        ts.PostgresLedger(pg_conninfo, scope="conv") as other,
        ts.PostgresLedger(pg_conninfo, scope="conv") as me,
    ):
        holder = other.acquire("call_1", fp, "charge", read_only=False)
        assert holder.owner is not None
        owner = holder.owner

        def finish_later() -> None:
            time.sleep(0.3)  # (if the duplicate comes later still, it reuses at once: the same outcome)
            other.finish("call_1", fp, owner, StoredResult("ok", "charged by the other worker", None, "v"))

        t = threading.Thread(target=finish_later)
        t.start()
        with ts.Toolbox([charge], timeout=BOUND) as box:
            [result] = box.execute([call], ledger=me)
        t.join()
    assert ran.calls == [] and result.ok and result.reused
    assert result.content == "charged by the other worker"


# ----------------------------------------------------------------------------- restarts and outages


def test_the_ledger_reconnects_after_a_postgres_restart(pg_cluster: Cluster, pg_conninfo: str) -> None:
    ran = Recorder()

    @ts.tool
    def charge(amount: int) -> str:
        ran.add("charge", amount)
        return f"charged {amount}"

    def call(i: int) -> list[ts.ToolCall]:
        return sealed([(f"call_{i}", "charge", json.dumps({"amount": i}))])

    async def twice(box: ts.Toolbox, ledger: ts.PostgresLedger, i: int) -> list[ts.ToolResult]:
        return [(await box.aexecute(call(i), ledger=ledger))[0] for _ in range(2)]

    with ts.PostgresLedger(pg_conninfo, scope="conv") as ledger, ts.Toolbox([charge]) as box:
        [first] = box.execute(call(1), ledger=ledger)
        asyncio.run(twice(box, ledger, 2))
        pg_cluster.restart()  # every connection is cut
        [after] = box.execute(call(3), ledger=ledger)
        [reused] = box.execute(call(1), ledger=ledger)  # the entry survived the restart
        async_after = asyncio.run(twice(box, ledger, 4))
    assert first.ok and after.ok and reused.reused
    assert [r.reused for r in async_after] == [False, True]
    assert ran.calls == [("charge", 1), ("charge", 2), ("charge", 3), ("charge", 4)]


def test_an_unreachable_database_runs_nothing_and_says_why(pg_cluster: Cluster, pg_conninfo: str) -> None:
    ran = Recorder()

    @ts.tool
    def charge(amount: int) -> str:
        ran.add("charge", amount)
        return "charged"

    calls = [("c1", "charge", '{"amount": 1}'), ("c2", "charge", '{"amount": 2}')]
    with (
        ts.PostgresLedger(pg_conninfo, scope="conv", connect_timeout=2) as ledger,
        ts.Toolbox([charge]) as box,
    ):
        box.execute(sealed([("c0", "charge", '{"amount": 0}')]), ledger=ledger)  # connected, then:
        pg_cluster.stop_server()
        try:
            down = box.execute(sealed(calls), ledger=ledger)
            adown = asyncio.run(box.aexecute(sealed(calls), ledger=ledger))
            with pytest.raises(LedgerUnavailableError):
                ledger.get("c1", "fp")
        finally:
            pg_cluster.start_server()
        back = box.execute(sealed(calls), ledger=ledger)
    for result in [*down, *adown]:
        assert result.status == "refused" and result.reason == "ledger_unavailable"
        assert "ledger" in result.content and "could not be reached" in result.content
    assert [r.ok for r in back] == [True, True]
    # c1 and c2 run in parallel once the database is back: in either order, each once.
    assert ran.calls[0] == ("charge", 0) and sorted(ran.calls[1:]) == [("charge", 1), ("charge", 2)]


def test_a_database_that_never_existed_runs_nothing(tmp_path: Path) -> None:
    ran = Recorder()

    @ts.tool
    def charge(amount: int) -> str:
        ran.add("charge", amount)
        return "charged"

    conninfo = f"host={tmp_path} dbname=nothing user=nobody connect_timeout=2"
    with ts.PostgresLedger(conninfo) as ledger, ts.Toolbox([charge]) as box:  # constructing never connects
        [result] = box.execute(sealed([("c1", "charge", '{"amount": 1}')]), ledger=ledger)
        [aresult] = asyncio.run(box.aexecute(sealed([("c1", "charge", '{"amount": 1}')]), ledger=ledger))
    assert ran.calls == []
    assert result.reason == aresult.reason == "ledger_unavailable"


# ----------------------------------------------------------------------------- pools


def test_a_sync_pool_and_an_async_pool(pg_conninfo: str) -> None:
    ran = Recorder()

    @ts.tool
    def charge(amount: int) -> str:
        ran.add("charge", amount)
        return f"charged {amount}"

    with ConnectionPool(pg_conninfo, min_size=1, max_size=2, open=True) as pool:
        with ts.PostgresLedger(pool, scope="conv") as ledger, ts.Toolbox([charge]) as box:
            results = [
                box.execute(sealed([("c1", "charge", '{"amount": 1}')]), ledger=ledger)[0] for _ in range(2)
            ]
        assert not pool.closed  # the ledger never closes a pool it was given

    async def main() -> list[ts.ToolResult]:
        async with AsyncConnectionPool(pg_conninfo, min_size=1, max_size=2, open=False) as apool:
            async with ts.PostgresLedger(apool, scope="conv") as ledger:
                with ts.Toolbox([charge]) as box:
                    out = [
                        (await box.aexecute(sealed([("c1", "charge", '{"amount": 1}')]), ledger=ledger))[0]
                    ]
                    out += [
                        (await box.aexecute(sealed([("c2", "charge", '{"amount": 2}')]), ledger=ledger))[0]
                    ]
                    out += box.execute(
                        sealed([("c2", "charge", '{"amount": 2}')]), ledger=ledger
                    )  # sync side
            return out

    aresults = asyncio.run(main())
    assert [r.reused for r in results] == [False, True]
    assert [r.reused for r in aresults] == [True, False, True]
    assert ran.calls == [("charge", 1), ("charge", 2)]


# ----------------------------------------------------------------------------- async


async def test_two_hundred_concurrent_aexecute_run_each_call_once(pg_conninfo: str) -> None:
    ran = Recorder()
    release = asyncio.Event()

    @ts.tool
    async def charge(n: int) -> str:
        ran.add("charge", n)
        await release.wait()  # holds every claim until the loop sets it: a blocked loop never would
        return f"charged {n}"

    async def one(i: int) -> ts.ToolResult:
        [result] = await box.aexecute(
            sealed([(f"call_{i % 100}", "charge", json.dumps({"n": i % 100}))]), ledger=ledger
        )
        return result

    async def release_soon() -> None:
        while len(ran.calls) < 100:  # every call has started (and its duplicate is waiting)
            await asyncio.sleep(0.01)
        release.set()

    async with ts.PostgresLedger(pg_conninfo, scope="conv") as ledger:
        with ts.Toolbox([charge], timeout=BOUND) as box:
            results, _ = await asyncio.gather(asyncio.gather(*(one(i) for i in range(200))), release_soon())
    assert sorted(n for _, n in ran.calls) == list(range(100))  # each ran once
    assert all(r.ok for r in results)
    assert sum(r.reused for r in results) == 100
    assert {r.content for r in results} == {f"charged {n}" for n in range(100)}


# ----------------------------------------------------------------------------- resuming elsewhere


def test_a_conversation_resumes_on_another_worker_without_running_its_tool_again(
    pg_conninfo: str, server: LocalServer, tmp_path: Path
) -> None:
    def handler(body: dict[str, Any]) -> StreamScript:
        if not tool_messages_of(body):
            return calls_reply([("call_f1", "book_flight", '{"to": "Lisbon"}')])
        return text_reply("Your flight to Lisbon is booked.")

    server.handler = handler
    effects, saved = tmp_path / "effects.txt", tmp_path / "history.json"
    worker_a = SPAWN.Process(
        target=_pg_workers.run_and_die, args=(pg_conninfo, server.base_url, str(effects), str(saved))
    )
    worker_a.start()
    worker_a.join(BOUND)
    assert worker_a.exitcode == 17  # died after the tool ran, before the follow-up request
    assert len(server.requests) == 1 and len(_lines(effects)) == 1

    @ts.tool
    def book_flight(to: str) -> str:
        _pg_workers.append(str(effects), f"booked {to} {os.getpid()}")
        return f"booked a flight to {to}"

    history = user("fly me") + json.loads(saved.read_text())
    with (
        ts.PostgresLedger(pg_conninfo, scope="conversation-42") as ledger,
        ts.Toolbox([book_flight]) as box,
        server.client() as client,
    ):
        result = ts.run(client, model="m", messages=history, toolbox=box, ledger=ledger)
    assert len(_lines(effects)) == 1  # worker B did not book a second flight
    [reused] = result.steps[0].results
    assert reused.reused and reused.content == "booked a flight to Lisbon"
    assert [m["content"] for m in tool_messages_of(server.requests[-1])] == ["booked a flight to Lisbon"]
    assert result.stop_reason == "done"


def test_the_owner_renews_its_lease_while_the_tool_runs(pg_conninfo: str) -> None:
    # A lease far shorter than the tool: without the heartbeat the duplicate would find the claim
    # stale and answer "outcome unknown"; with it, the duplicate waits and reuses the result.
    ran = Recorder()
    started = threading.Event()

    @ts.tool
    def slow_charge(amount: int) -> str:
        ran.add("slow_charge", amount)
        started.set()
        time.sleep(2.0)  # about seven leases
        return "charged"

    calls = [("call_1", "slow_charge", '{"amount": 5}')]
    results: list[ts.ToolResult] = []
    with (
        ts.PostgresLedger(pg_conninfo, scope="conv", lease=0.3) as first,
        ts.PostgresLedger(pg_conninfo, scope="conv", lease=0.3) as second,
        ts.Toolbox([slow_charge], timeout=BOUND) as box,
    ):
        holder = threading.Thread(target=lambda: results.extend(box.execute(sealed(calls), ledger=first)))
        holder.start()
        assert started.wait(BOUND)
        [duplicate] = box.execute(sealed(calls), ledger=second)
        holder.join(BOUND)
    assert ran.calls == [("slow_charge", 5)]
    assert results[0].ok and not results[0].reused
    assert duplicate.ok and duplicate.reused and duplicate.content == "charged"


def test_racing_takeovers_of_an_abandoned_read_only_call_run_it_once(pg_conninfo: str) -> None:
    ran = Recorder()
    gate = threading.Event()

    @ts.tool(read_only=True)
    def lookup(q: str) -> str:
        ran.add("lookup", q)
        assert gate.wait(BOUND)  # hold the new claim until every racer has tried
        return f"found {q}"

    [call] = sealed([("call_1", "lookup", '{"q": "x"}')])
    with ts.PostgresLedger(pg_conninfo, scope="conv") as setup:
        dead = setup.acquire("call_1", fingerprint(call), "lookup", read_only=True)
        assert dead.owner is not None
        setup.abandon("call_1", fingerprint(call), dead.owner)  # started, outcome lost
    barrier = threading.Barrier(4, timeout=BOUND)
    results: list[Any] = [None] * 4

    def racer(i: int) -> None:
        with (
            ts.PostgresLedger(pg_conninfo, scope="conv") as ledger,
            ts.Toolbox([lookup], timeout=BOUND) as box,
        ):
            barrier.wait()
            [results[i]] = box.execute(sealed([("call_1", "lookup", '{"q": "x"}')]), ledger=ledger)

    threads = [threading.Thread(target=racer, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    threading.Timer(0.3, gate.set).start()
    for t in threads:
        t.join(BOUND)
    assert ran.calls == [("lookup", "x")]
    assert all(r is not None and r.ok and r.value == "found x" for r in results)
    assert sum(not r.reused for r in results) == 1


async def test_approvals_that_wait_are_recorded_and_checked_in_postgres(
    pg_conninfo: str, server: LocalServer
) -> None:
    """A run defers a call needing approval; another worker (another ledger object, async) resumes
    it with the approval: it runs once; a history whose arguments changed is refused."""
    ran = Recorder()

    @ts.tool(confirm=True)
    def wire(amount: int) -> str:
        ran.add("wire", amount)
        return f"wired {amount}"

    def handler(body: dict[str, Any]) -> StreamScript:
        if not tool_messages_of(body):
            return calls_reply([("call_w", "wire", '{"amount": 40}')])
        return text_reply("Done.")

    server.handler = handler
    scope = f"approvals-{os.getpid()}-{random.random()}"
    with (
        ts.PostgresLedger(pg_conninfo, scope=scope) as ledger,
        ts.Toolbox([wire]) as box,
        server.client() as client,
    ):
        first = ts.run(client, model="m", messages=user(), toolbox=box, ledger=ledger)
    assert first.stop_reason == "awaiting_approval" and [c.id for c in first.pending] == ["call_w"]
    saved = json.dumps(first.messages)

    tampered = json.loads(saved)
    tampered[-1]["tool_calls"][0]["function"]["arguments"] = '{"amount": 40000}'
    async with ts.PostgresLedger(pg_conninfo, scope=scope) as ledger, server.async_client() as client:
        with ts.Toolbox([wire]) as box:
            with pytest.raises(ts.errors.ApprovalError, match="differ"):
                await ts.arun(
                    client,
                    model="m",
                    messages=tampered,
                    toolbox=box,
                    ledger=ledger,
                    approvals={"call_w": True},
                )
            for _ in range(2):  # the same approval twice: one wire
                done = await ts.arun(
                    client,
                    model="m",
                    messages=json.loads(saved),
                    toolbox=box,
                    ledger=ledger,
                    approvals={"call_w": True},
                )
                assert done.stop_reason == "done"
    assert ran.calls == [("wire", 40)] and len(server.requests) == 3
