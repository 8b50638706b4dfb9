"""Adversarial execution: many threads and coroutines, hostile tool outputs, hostile ledger files.

What a user relies on: whatever the callers, the tools and the ledger file do, each call runs at
most once (exactly once when it can run), every duplicate gets the winner's result, and nothing
raises out of ``execute``/``aexecute``: a ledger that cannot be used makes the call refused with the
reason, and nothing runs. Executions are counted by the tools' own side effects.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
import stat
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.tools._support import Recorder, sealed
from toolstitch.core import sealed_call
from toolstitch.tools import ClaimLedger, MemoryLedger, SQLiteLedger, Toolbox, tool
from toolstitch.tools._claim import fingerprint

BOUND = 60.0
IDS = [f"call_{i}" for i in range(20)]


def _ledger(kind: str, tmp_path: Path, **kw: Any) -> ClaimLedger:
    return MemoryLedger(**kw) if kind == "memory" else SQLiteLedger(tmp_path / "calls.db", **kw)


def _calls(ids: list[str]) -> Any:
    return sealed([(i, "work", f'{{"n": {i.split("_")[1]}}}') for i in ids])


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_eight_threads_times_twenty_ids_run_each_once(kind: str, tmp_path: Path) -> None:
    ran = Recorder()

    @tool
    def work(n: int) -> str:
        ran.add("work", n)
        return f"done {n}"

    ledger = _ledger(kind, tmp_path)
    barrier = threading.Barrier(8, timeout=BOUND)
    results: list[Any] = [None] * 8
    errors: list[BaseException] = []

    def worker(i: int) -> None:
        try:
            order = IDS[i % 20 :] + IDS[: i % 20]  # each thread starts somewhere else
            with Toolbox([work]) as box:
                barrier.wait()
                results[i] = box.execute(_calls(order), ledger=ledger)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(BOUND)
    ledger.close()
    assert errors == []
    assert sorted(v for _, v in ran.calls) == list(range(20))
    for batch in results:
        assert batch is not None and len(batch) == 20
        for r in batch:
            assert r.ok, r.content
            assert r.value == f"done {int(r.content.split()[-1])}"
    by_id: dict[str, set[str]] = {}
    for batch in results:
        for r in batch:
            by_id.setdefault(r.tool_call_id, set()).add(r.content)
    assert all(len(v) == 1 for v in by_id.values())
    assert sum(not r.reused for batch in results for r in batch) == 20


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_a_hundred_coroutines_and_sync_twins_share_one_ledger(kind: str, tmp_path: Path) -> None:
    ran = Recorder()

    @tool
    async def work(n: int) -> str:
        ran.add("work", n)
        await asyncio.sleep(0)
        return f"done {n}"

    ledger = _ledger(kind, tmp_path)
    box = Toolbox([work])
    sync_results: list[Any] = []

    def sync_side() -> None:
        sync_results.append(box.execute(_calls(IDS[::-1]), ledger=ledger))

    async def main() -> list[Any]:
        thread = threading.Thread(target=sync_side)
        thread.start()
        out = await asyncio.gather(*(box.aexecute(_calls(IDS), ledger=ledger) for _ in range(100)))
        await asyncio.to_thread(thread.join, BOUND)
        return list(out)

    try:
        batches = asyncio.run(main()) + sync_results
    finally:
        box.close()
        ledger.close()
    assert len(batches) == 101
    assert sorted(v for _, v in ran.calls) == list(range(20))
    assert all(r.ok for b in batches for r in b), [r.content for b in batches for r in b if not r.ok][:3]
    assert sum(not r.reused for b in batches for r in b) == 20


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_one_id_with_other_arguments_runs_and_scopes_are_apart(kind: str, tmp_path: Path) -> None:
    ran = Recorder()

    @tool
    def work(n: int) -> str:
        ran.add("work", n)
        return f"done {n}"

    ledger = _ledger(kind, tmp_path)
    with Toolbox([work]) as box:
        [a] = box.execute(sealed([("same", "work", '{"n": 1}')]), ledger=ledger)
        [b] = box.execute(sealed([("same", "work", '{"n": 2}')]), ledger=ledger)
        [c] = box.execute(sealed([("same", "work", '{ "n" : 1 }')]), ledger=ledger)
    ledger.close()
    other = _ledger(kind, tmp_path, scope="other")
    with Toolbox([work]) as box:
        [d] = box.execute(sealed([("same", "work", '{"n": 1}')]), ledger=other)
    other.close()
    assert (a.content, b.content, c.content, d.content) == ("done 1", "done 2", "done 1", "done 1")
    assert c.reused and not (a.reused or b.reused or d.reused)
    assert ran.calls == [("work", 1), ("work", 2), ("work", 1)]


class _Odd:
    def __repr__(self) -> str:
        return "<odd>"


HOSTILE_VALUES: list[Any] = [
    _Odd(),
    {"set": {1, 2}},
    float("nan"),
    b"\xff\xfe",
    "lone \udc80 surrogate",
    {"\ud800": "key surrogate"},
    "x" * 2_000_000,
    [[[[[[[[[[[]]]]]]]]]]],
]


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_hostile_return_values_are_stored_and_reused(kind: str, mode: str, tmp_path: Path) -> None:
    ran = Recorder()

    @tool
    def give(i: int) -> Any:
        ran.add("give", i)
        return HOSTILE_VALUES[i]

    calls = sealed([(f"v{i}", "give", f'{{"i": {i}}}') for i in range(len(HOSTILE_VALUES))])
    ledger = _ledger(kind, tmp_path)

    def run() -> Any:
        with Toolbox([give]) as box:
            if mode == "sync":
                return box.execute(calls, ledger=ledger)
            return asyncio.run(box.aexecute(calls, ledger=ledger))

    first, again = run(), run()
    ledger.close()
    assert len(ran.calls) == len(HOSTILE_VALUES)
    for r1, r2 in zip(first, again, strict=True):
        assert r1.status in ("ok", "error"), r1.content
        assert isinstance(r1.content, str)
        assert r2.reused and r2.content == r1.content
        r1.content.encode("utf-8", "surrogatepass")
    assert all(r.to_message()["role"] == "tool" for r in first + again)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_raising_or_base_exception_tool_never_escapes(mode: str) -> None:
    class Weird(BaseException):
        pass

    @tool
    def boom(kind: str) -> str:
        if kind == "value":
            raise ValueError("bad \udc80")
        if kind == "keyboard":
            raise Weird("weird")
        raise SystemExit(3)

    ledger = MemoryLedger()
    calls = sealed(
        [
            ("a", "boom", '{"kind": "value"}'),
            ("b", "boom", '{"kind": "keyboard"}'),
            ("c", "boom", '{"kind": "exit"}'),
        ]
    )
    with Toolbox([boom]) as box:
        if mode == "sync":
            results = box.execute(calls, ledger=ledger)
        else:
            results = asyncio.run(box.aexecute(calls, ledger=ledger))
    assert [r.status for r in results] == ["error", "error", "error"]


# ----------------------------------------------------------------------------- hostile ledger files


def _probe_box(ran: Recorder) -> Toolbox:
    @tool
    def work(n: int) -> str:
        ran.add("work", n)
        return f"done {n}"

    return Toolbox([work])


def _hostile_file(kind: str, path: Path) -> None:
    if kind == "garbage":
        path.write_bytes(b"this is not a database" * 100)
    elif kind == "other_schema":
        db = sqlite3.connect(path)
        db.execute("CREATE TABLE toolstitch_claims (x INTEGER)")
        db.commit()
        db.close()
    elif kind == "future_version":
        db = sqlite3.connect(path)
        db.execute("PRAGMA user_version = 99")
        db.execute("CREATE TABLE toolstitch_claims (x INTEGER)")
        db.commit()
        db.close()
    elif kind == "truncated":
        SQLiteLedger(path).close()
        data = path.read_bytes()
        path.write_bytes(data[: len(data) // 2] + b"\x00" * 50)


@pytest.mark.parametrize("kind", ["garbage", "other_schema", "future_version", "truncated"])
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_ledger_file_that_cannot_be_used_fails_closed(kind: str, mode: str, tmp_path: Path) -> None:
    path = tmp_path / "calls.db"
    _hostile_file(kind, path)
    ran = Recorder()
    try:
        ledger = SQLiteLedger(path)
    except Exception as exc:  # refusing to open is fail-closed too: nothing can run without it
        assert isinstance(exc, (sqlite3.DatabaseError, ValueError)), exc
        return
    with _probe_box(ran) as box:
        calls = sealed([("c1", "work", '{"n": 1}')])
        if mode == "sync":
            [r] = box.execute(calls, ledger=ledger)
        else:
            [r] = asyncio.run(box.aexecute(calls, ledger=ledger))
    ledger.close()
    assert ran.calls == [] and r.status == "refused" and r.reason == "ledger_unavailable", r


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root ignores file modes")
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_read_only_ledger_file_runs_nothing(mode: str, tmp_path: Path) -> None:
    path = tmp_path / "calls.db"
    SQLiteLedger(path).close()
    for p in tmp_path.iterdir():
        p.chmod(stat.S_IRUSR)
    tmp_path.chmod(stat.S_IRUSR | stat.S_IXUSR)
    ran = Recorder()
    try:
        try:
            ledger = SQLiteLedger(path, busy_timeout=2)
        except sqlite3.DatabaseError:
            return
        with _probe_box(ran) as box:
            calls = sealed([("c1", "work", '{"n": 1}')])
            if mode == "sync":
                [r] = box.execute(calls, ledger=ledger)
            else:
                [r] = asyncio.run(box.aexecute(calls, ledger=ledger))
        ledger.close()
    finally:
        tmp_path.chmod(stat.S_IRWXU)
        for p in tmp_path.iterdir():
            p.chmod(stat.S_IRUSR | stat.S_IWUSR)
    assert ran.calls == [] and r.reason == "ledger_unavailable", r


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_ledger_file_corrupted_while_open_fails_closed(mode: str, tmp_path: Path) -> None:
    path = tmp_path / "calls.db"
    ledger = SQLiteLedger(path)
    ran = Recorder()
    with _probe_box(ran) as box:
        box.execute(sealed([("c0", "work", '{"n": 0}')]), ledger=ledger)
        db = sqlite3.connect(path)
        db.execute("DROP TABLE toolstitch_claims")
        db.execute("CREATE TABLE toolstitch_claims (x INTEGER)")
        db.commit()
        db.close()
        calls = sealed([("c1", "work", '{"n": 1}')])
        if mode == "sync":
            [r] = box.execute(calls, ledger=ledger)
        else:
            [r] = asyncio.run(box.aexecute(calls, ledger=ledger))
    ledger.close()
    assert ran.calls == [("work", 0)] and r.reason == "ledger_unavailable", r


def test_a_closed_ledger_runs_nothing(tmp_path: Path) -> None:
    ran = Recorder()
    ledger = SQLiteLedger(tmp_path / "c.db")
    ledger.close()
    with _probe_box(ran) as box:
        [r] = box.execute(sealed([("c1", "work", '{"n": 1}')]), ledger=ledger)
    assert ran.calls == [] and r.reason == "ledger_unavailable", r


def test_the_fingerprint_of_hostile_arguments_never_raises() -> None:
    for text in [
        '{"a": "\\udc80"}',
        '{"\\ud800": 1}',
        '{"a": 1e400}',
        '{"a": ' + "[" * 500 + "]" * 500 + "}",
    ]:
        [call] = sealed([("x", "work", text)])
        assert isinstance(fingerprint(call), str)


def test_owner_tokens_made_by_racing_threads_are_all_alive(monkeypatch: pytest.MonkeyPatch) -> None:
    # The first claims of a process, made by many threads at once, must all be seen as this live
    # process's: else a duplicate takes a running call for a dead one (outcome unknown).
    from toolstitch.tools import _claim

    for _ in range(20):
        monkeypatch.setattr(_claim, "_process", None)
        barrier = threading.Barrier(16, timeout=BOUND)
        owners: list[str] = []

        def make(barrier: threading.Barrier, owners: list[str]) -> None:
            barrier.wait()
            owners.append(_claim.new_owner())

        threads = [threading.Thread(target=make, args=(barrier, owners)) for _ in range(16)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(BOUND)
        assert len(owners) == 16 and not any(_claim._owner_gone(o) for o in owners)


@pytest.mark.parametrize("read_only", [True, False])
def test_racing_retries_after_a_killed_worker_run_a_read_only_call_once(
    read_only: bool, tmp_path: Path
) -> None:
    from tests.tools.test_claims import _kill_mid_tool

    db = _kill_mid_tool(tmp_path, read_only=read_only)
    ran = Recorder()
    op = tool(lambda: ran.add("op") or "fresh", name="op", read_only=read_only)
    barrier = threading.Barrier(6, timeout=BOUND)
    results: list[Any] = []

    def retry() -> None:
        with SQLiteLedger(db) as ledger, Toolbox([op]) as box:
            barrier.wait()
            results.extend(box.execute(sealed([("call_1", "op", "{}")]), ledger=ledger))

    threads = [threading.Thread(target=retry) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(BOUND)
    assert len(results) == 6
    if read_only:
        assert ran.calls == [("op", None)]
        assert all(r.ok and r.value == "fresh" for r in results)
    else:
        assert ran.calls == []
        assert all(r.reason == "outcome_unknown" for r in results)


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_hostile_scopes_and_ids_are_kept_apart_and_never_stuck(kind: str, tmp_path: Path) -> None:
    # A lone surrogate cannot be bound as SQLite text; its stored form must neither fail (a
    # conversation whose scope holds one would be stuck) nor equal another text's.
    ran = Recorder()

    @tool
    def work(n: int) -> str:
        ran.add("work", n)
        return f"done {n}"

    scopes = ["\udc80", '"\\udc80"', "a\x00b", "a\x00c", ""]
    ids = ["\udc80", '"\\udc80"', "\udc80\ud800", "\U00010000", '"', "x\x00"]
    for scope in scopes:
        ledger = _ledger(kind, tmp_path, scope=scope)
        with Toolbox([work]) as box:
            for _ in range(2):
                # Built one by one (a chat message would give an id holding a lone surrogate a made
                # one: no request can carry it back), so the ledger meets these ids as they are, as
                # it does from the Responses API, whose items keep their call_id.
                calls = [
                    sealed_call(index=n, id=i, name="work", arguments='{"n": 1}') for n, i in enumerate(ids)
                ]
                results = box.execute(calls, ledger=ledger)
                assert all(r.ok for r in results), [r.content for r in results]
            assert {e.key for e in ledger.entries()} == set(ids)
        ledger.close()
    assert len(ran.calls) == len(scopes) * len(ids)


# ----------------------------------------------------------------------------- confirmations


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_confirmation_that_swallows_its_cancellation_never_launches_the_tool(mode: str) -> None:
    # The person answers "yes" after the batch gave up on the call: it was reported not_started and
    # its claim released, so running it now would be a run nobody sees (and a retry a second one).
    ran = Recorder()
    answered = threading.Event()

    async def stubborn(call: Any, t: Any) -> bool:
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.sleep(BOUND)
        answered.set()
        return True

    @tool(confirm=True)
    def delete() -> str:
        ran.add("delete")
        return "deleted"

    ledger = MemoryLedger()
    [call] = sealed([("d", "delete", "{}")])
    box = Toolbox([delete], confirm=stubborn, total_timeout=0.2)
    try:
        if mode == "sync":
            [result] = box.execute([call], ledger=ledger)
        else:
            [result] = asyncio.run(box.aexecute([call], ledger=ledger))
        assert answered.wait(BOUND)
    finally:
        box.close()
    assert result.reason == "not_started"
    assert ran.calls == []
    assert ledger.get("d", fingerprint(call)) is None
    with Toolbox([delete], confirm=lambda c, t: True) as again:
        [retry] = again.execute([call], ledger=ledger)
    assert retry.ok and ran.calls == [("delete", None)]


@pytest.mark.parametrize("exc", [KeyboardInterrupt, SystemExit])
@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_confirmation_raising_a_base_exception_refuses_the_call(mode: str, kind: str, exc: type) -> None:
    ran = Recorder()

    def confirm(call: Any, t: Any) -> bool:
        raise exc("no")

    async def aconfirm(call: Any, t: Any) -> bool:
        raise exc("no")

    @tool(confirm=True)
    def delete() -> str:
        ran.add("delete")
        return "deleted"

    ledger = MemoryLedger()
    [call] = sealed([("d", "delete", "{}")])
    with Toolbox([delete], confirm=confirm if kind == "sync" else aconfirm, total_timeout=BOUND) as box:
        if mode == "sync":
            [result] = box.execute([call], ledger=ledger)
        else:
            [result] = asyncio.run(box.aexecute([call], ledger=ledger))
    assert ran.calls == [] and result.status == "refused"
    assert ledger.get("d", fingerprint(call)) is None
