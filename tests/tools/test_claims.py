"""The claim protocol under real concurrency: threads, spawned processes, SIGKILL, simultaneous opens.

What a user relies on: however many threads or processes execute the same call, the tool runs
exactly once and everyone gets its result; a worker killed in the middle of a side effect makes the
call "outcome unknown" (never a second run), while a read-only call simply runs again.
Executions are counted by the tools' own side effects (a file, a counter), never by the ledger.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import random
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.tools import _workers
from tests.tools._support import Recorder, sealed
from toolstitch.tools import ClaimLedger, MemoryLedger, SQLiteLedger, Toolbox, tool
from toolstitch.tools._claim import StoredResult, fingerprint

SPAWN = multiprocessing.get_context("spawn")
BOUND = 60.0  # seconds any wait may take before the test fails (a bound, not a measurement)


def _ledger(kind: str, tmp_path: Path) -> ClaimLedger:
    return MemoryLedger() if kind == "memory" else SQLiteLedger(tmp_path / "calls.db")


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_four_threads_running_the_same_call_execute_it_once(kind: str, tmp_path: Path) -> None:
    ran = Recorder()
    barrier = threading.Barrier(4, timeout=BOUND)
    gate = threading.Event()

    @tool
    def charge(amount: int) -> str:
        ran.add("charge", amount)
        assert gate.wait(BOUND)  # hold the claim until every thread has tried
        return f"charged {amount}"

    ledger = _ledger(kind, tmp_path)
    results: list[Any] = [None] * 4

    def worker(i: int) -> None:
        with Toolbox([charge]) as box:
            barrier.wait()
            [results[i]] = box.execute(sealed([("pay_1", "charge", '{"amount": 5}')]), ledger=ledger)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    # The holder finishes a little later, so that most of the others find it running and wait; if
    # some come later, they find it finished: either way it must run once.
    threading.Timer(0.2, gate.set).start()
    for t in threads:
        t.join(BOUND)
    ledger.close()
    assert ran.calls == [("charge", 5)]
    assert all(r is not None and r.ok and r.value == "charged 5" for r in results)
    assert sum(not r.reused for r in results) == 1  # one ran; three reused its result


@pytest.mark.parametrize("processes", [2, 4])
def test_processes_sharing_a_sqlite_file_execute_each_call_once(processes: int, tmp_path: Path) -> None:
    db, effects = str(tmp_path / "calls.db"), str(tmp_path / "effects.txt")
    ids = [f"call_{i}" for i in range(100)]
    start = SPAWN.Event()
    outs, procs = [], []
    for p in range(processes):
        order = ids[:]
        random.Random(p).shuffle(order)
        out = str(tmp_path / f"out{p}.json")
        proc = SPAWN.Process(target=_workers.execute_ids, args=(db, effects, order, out, start))
        proc.start()
        outs.append(out)
        procs.append(proc)
    start.set()
    for proc in procs:
        proc.join(BOUND * 3)
        assert proc.exitcode == 0
    executed = [line.split()[0] for line in Path(effects).read_text().splitlines()]
    assert sorted(executed, key=int) == [str(i) for i in range(100)]  # each id exactly once
    for out in outs:
        results = json.loads(Path(out).read_text())
        assert len(results) == 100
        for r in results:
            n = int(r["id"].split("_")[1])
            assert r["status"] == "ok" and r["value"]["charged"] == n


def _kill_mid_tool(tmp_path: Path, read_only: bool) -> str:
    db, marker = str(tmp_path / "calls.db"), str(tmp_path / "marker.txt")
    proc = SPAWN.Process(target=_workers.hang_in_tool, args=(db, marker, read_only))
    proc.start()
    try:
        deadline = 0
        while not Path(marker).exists() and deadline < BOUND * 20:
            proc.join(0.05)
            deadline += 1
        assert Path(marker).exists(), "the worker never started its tool"
    finally:
        assert proc.pid is not None
        os.kill(proc.pid, signal.SIGKILL)
        proc.join(BOUND)
    return db


def test_a_worker_killed_in_a_side_effect_gives_outcome_unknown_not_a_second_run(tmp_path: Path) -> None:
    db = _kill_mid_tool(tmp_path, read_only=False)
    ran = Recorder()
    op = tool(lambda: ran.add("op"), name="op")
    with SQLiteLedger(db) as ledger, Toolbox([op]) as box:
        [result] = box.execute(sealed([("call_1", "op", "{}")]), ledger=ledger)
    assert ran.calls == []
    assert result.status == "refused" and result.reason == "outcome_unknown"


def test_a_read_only_call_of_a_killed_worker_runs_again(tmp_path: Path) -> None:
    db = _kill_mid_tool(tmp_path, read_only=True)
    op = tool(lambda: "fresh", name="op", read_only=True)
    with SQLiteLedger(db) as ledger, Toolbox([op]) as box:
        [result] = box.execute(sealed([("call_1", "op", "{}")]), ledger=ledger)
        [entry] = ledger.entries()
    assert result.ok and result.value == "fresh" and not result.reused
    assert entry.state == "finished"


def test_many_processes_open_one_new_file_at_once(tmp_path: Path) -> None:
    db = str(tmp_path / "fresh.db")
    start = SPAWN.Event()
    outs = [str(tmp_path / f"open{i}.txt") for i in range(5)]
    procs = [SPAWN.Process(target=_workers.open_ledger, args=(db, start, out)) for out in outs]
    for proc in procs:
        proc.start()
    start.set()  # every process opens the new file at the same moment
    for proc in procs:
        proc.join(BOUND)
        assert proc.exitcode == 0
    assert [Path(out).read_text() for out in outs] == ["run"] * 5


def test_a_lease_that_is_not_renewed_goes_stale(tmp_path: Path) -> None:
    with SQLiteLedger(tmp_path / "calls.db", lease=0.05) as ledger:
        ledger.try_claim("k", "fp", "op", "otherhost:1:a:b", 0.0)  # a dead owner elsewhere
        assert ledger.acquire("k", "fp", "op", read_only=False).action == "unknown"
        verdict = ledger.acquire("k", "fp", "op", read_only=True)
        assert verdict.action == "run" and verdict.owner is not None
        assert ledger.finish("k", "fp", verdict.owner, StoredResult("ok", "42", value=42))
        again = ledger.acquire("k", "fp", "op", read_only=False)
        assert again.action == "reuse" and again.entry is not None and again.entry.value == 42


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_a_released_claim_is_claimed_again(kind: str, tmp_path: Path) -> None:
    ledger = _ledger(kind, tmp_path)
    first = ledger.acquire("k", "fp", "op", read_only=False)
    assert first.action == "run" and first.owner is not None
    assert ledger.acquire("k", "fp", "op", read_only=False).action == "wait"
    ledger.release("k", "fp", first.owner)
    assert ledger.acquire("k", "fp", "op", read_only=False).action == "run"
    ledger.close()


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_an_abandoned_claim_is_outcome_unknown(kind: str, tmp_path: Path) -> None:
    ledger = _ledger(kind, tmp_path)
    first = ledger.acquire("k", "fp", "op", read_only=False)
    assert first.owner is not None
    ledger.abandon("k", "fp", first.owner)
    assert ledger.acquire("k", "fp", "op", read_only=False).action == "unknown"
    ledger.close()


def test_a_lone_surrogate_in_arguments_or_id_never_raises(tmp_path: Path) -> None:
    ran = Recorder()

    @tool
    def echo(p: str) -> str:
        ran.add("echo", p)
        return p + "\udc80"  # a tool may return what no JSON text can carry

    # Arguments holding an escaped lone surrogate are refused at seal (not valid Unicode) ...
    [refused] = sealed([("id\udc80", "echo", '{"p": "\\udc80"}')])
    assert refused.status == "invalid" and refused.parsed is None
    assert isinstance(fingerprint(refused), str)
    # ... and an id holding one still claims, runs once and is reused.
    [call] = sealed([("id\udc80", "echo", '{"p": "x"}')])
    assert call.parsed == {"p": "x"}
    assert isinstance(fingerprint(call), str)
    with SQLiteLedger(tmp_path / "calls.db") as ledger, Toolbox([echo]) as box:
        [skipped] = box.execute([refused], ledger=ledger)
        [first] = box.execute([call], ledger=ledger)
        [again] = box.execute([call], ledger=ledger)
    assert not skipped.ok
    assert first.ok and again.reused and again.value == "x\udc80" and again.content == first.content
    assert ran.calls == [("echo", "x")]


def test_the_lease_of_a_running_tool_is_renewed_so_duplicates_wait(tmp_path: Path) -> None:
    release = threading.Event()
    renewed = threading.Event()
    db = tmp_path / "calls.db"

    @tool
    def long() -> str:
        assert renewed.wait(BOUND)
        return "done"

    [call] = sealed([("l", "long", "{}")])
    fp = fingerprint(call)
    with SQLiteLedger(db, lease=0.2) as ledger, SQLiteLedger(db, lease=0.2) as other:
        outcome: list[Any] = []

        def holder() -> None:
            with Toolbox([long]) as box:
                outcome.extend(box.execute([call], ledger=ledger))

        thread = threading.Thread(target=holder)
        thread.start()
        first = None
        for _ in range(int(BOUND / 0.01)):  # wait until the claim exists, then until it is renewed
            entry = other.get("l", fp)
            if entry is not None and first is None:
                first = entry.lease_expires
            if (
                entry is not None
                and first is not None
                and entry.lease_expires != first
                and time.time() > first
            ):
                break  # renewed, and the first lease is over
            release.wait(0.01)
        # Well past the first lease: still live, because the heartbeat renewed it.
        assert other.acquire("l", fp, "long", read_only=False).action == "wait"
        renewed.set()
        thread.join(BOUND)
    assert outcome[0].ok


def test_a_ledger_file_of_the_previous_version_is_migrated(tmp_path: Path) -> None:
    import sqlite3

    db = tmp_path / "old.db"
    with sqlite3.connect(db) as old:
        old.execute(
            "CREATE TABLE toolstitch_calls (call_key TEXT NOT NULL, fingerprint TEXT NOT NULL,"
            " name TEXT NOT NULL, state TEXT NOT NULL, started_at REAL NOT NULL, finished_at REAL,"
            " status TEXT, content TEXT, error TEXT, value_json TEXT, PRIMARY KEY (call_key, fingerprint))"
        )
        rows = [
            ("done", "fp", "op", "finished", 1, 2, "ok", "42", None, "42"),
            ("half", "fp", "op", "started", 1, None, None, None, None, None),
        ]
        old.executemany("INSERT INTO toolstitch_calls VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
    old.close()
    with SQLiteLedger(db) as ledger:
        done = ledger.acquire("done", "fp", "op", read_only=False)
        assert done.action == "reuse" and done.entry is not None and done.entry.value == 42
        assert done.entry.content == "42"
        assert ledger.acquire("half", "fp", "op", read_only=False).action == "unknown"
