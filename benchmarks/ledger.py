"""What a ledger costs per tool call, and how many calls per second four worker processes get through.

Run: ``.venv/bin/python benchmarks/ledger.py`` (``--calls N`` per measurement, ``--per-process M``).

For the in-memory :class:`~toolstitch.Ledger`, :class:`~toolstitch.SQLiteLedger` (a file in a
temporary directory) and :class:`~toolstitch.PostgresLedger` (a throwaway PostgreSQL cluster on a
unix socket, started here as the tests start it: ``tests/pg_cluster.py``), it measures:

* ``claim+finish``   the protocol's two steps for one call, called directly (``acquire``, then
  ``finish`` with a small result): the ledger's own cost, sync;
* ``async``          the same through the async twins (``aacquire``, ``afinish``) on one event loop;
* ``execute +``      what the ledger adds to ``Toolbox.execute`` of one call (a tool that returns at
  once): the time per call with the ledger minus the time without;
* ``4 procs``        calls per second of four processes executing distinct calls through one ledger
  (one file, one database; the in-memory ledger is per process, so it guarantees nothing across
  them and is shown for scale);
* ``4 procs, dup``   the same, every process executing the same calls (each runs once; the other
  three reuse its result or wait for it).

Numbers vary by machine and load; the table prints the command and the machine's core count.
PostgreSQL runs with ``fsync=off`` here (throwaway data); a durable server adds its commit latency.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import random
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT)]  # toolstitch from this checkout, and tests.pg_cluster

from tests.pg_cluster import Cluster, find_bindir  # noqa: E402

import toolstitch as ts  # noqa: E402
from toolstitch.testing import tool_call_chunks  # noqa: E402
from toolstitch.tools import ClaimLedger, StoredResult  # noqa: E402

SPAWN = multiprocessing.get_context("spawn")


def calls(ids: list[str]) -> list[ts.ToolCall]:
    """Sealed, ready calls of ``echo`` (made before any timing starts), 50 to a stream (a stream's
    number of calls is bounded by ``Limits``)."""
    out: list[ts.ToolCall] = []
    for k in range(0, len(ids), 50):
        acc = ts.Accumulator()
        for c in tool_call_chunks([(i, "echo", '{"n": 1}') for i in ids[k : k + 50]]):
            acc.feed(c)
        acc.end()
        out += acc.tool_calls
    assert all(c.status == "ready" for c in out)
    return out


@ts.tool
def echo(n: int) -> int:
    """Returns at once: what is left to time is the executor and the ledger."""
    return n


def make_ledger(kind: str, target: str, scope: str) -> ClaimLedger:
    if kind == "memory":
        return ts.MemoryLedger(scope=scope)
    if kind == "sqlite":
        return ts.SQLiteLedger(target, scope=scope)
    return ts.PostgresLedger(target, scope=scope)


def per_call_direct(ledger: ClaimLedger, n: int) -> float:
    result = StoredResult("ok", "1", None, 1)
    start = time.perf_counter()
    for i in range(n):
        verdict = ledger.acquire(f"direct_{i}", "fp", "echo", read_only=False)
        assert verdict.owner is not None
        ledger.finish(f"direct_{i}", "fp", verdict.owner, result)
    return (time.perf_counter() - start) / n


def per_call_async(ledger: ClaimLedger, n: int) -> float:
    result = StoredResult("ok", "1", None, 1)

    async def main() -> float:
        await ledger.aacquire("async_warm", "fp", "echo", read_only=False)  # connect first
        start = time.perf_counter()
        for i in range(n):
            verdict = await ledger.aacquire(f"async_{i}", "fp", "echo", read_only=False)
            assert verdict.owner is not None
            await ledger.afinish(f"async_{i}", "fp", verdict.owner, result)
        return (time.perf_counter() - start) / n

    return asyncio.run(main())


def per_call_execute(ledger: ClaimLedger | None, box: ts.Toolbox, batch: list[ts.ToolCall]) -> float:
    box.execute(calls(["warm"]), ledger=ledger)
    start = time.perf_counter()
    for call in batch:
        box.execute([call], ledger=ledger)
    return (time.perf_counter() - start) / len(batch)


def worker(kind: str, target: str, ids: list[str], ready: Any, go: Any, out: Any) -> None:
    """One worker process: its own ledger object on the shared store, its own toolbox."""
    try:
        batch = calls(ids)
        ledger = make_ledger(kind, target, "fleet")
        with ts.Toolbox([echo]) as box:
            box.execute(calls([f"warm_{os.getpid()}"]), ledger=ledger)  # connect, create the table
            ready.wait()
            go.wait(120)
            start = time.monotonic()
            for call in batch:
                [result] = box.execute([call], ledger=ledger)
                assert result.ok, result
            out.put((start, time.monotonic(), len(batch)))
        ledger.close()
    except BaseException as exc:
        out.put(f"{type(exc).__name__}: {exc}")  # the parent stops at once instead of waiting
        raise


def fleet(kind: str, target: str, per_process: int, same: bool, processes: int = 4) -> float:
    """Calls per second of ``processes`` workers (all calls counted, reused ones included)."""
    shared = [f"dup_{i}" for i in range(per_process)]
    ready, go = SPAWN.Barrier(processes + 1, timeout=120), SPAWN.Event()
    out: Any = SPAWN.Queue()
    procs = []
    for p in range(processes):
        ids = shared[:] if same else [f"p{p}_{i}" for i in range(per_process)]
        random.Random(p).shuffle(ids)
        proc = SPAWN.Process(target=worker, args=(kind, target, ids, ready, go, out))
        proc.start()
        procs.append(proc)
    ready.wait(timeout=120)
    go.set()
    spans = [out.get(timeout=600) for _ in procs]
    for proc in procs:
        proc.join(60)
    failed = [s for s in spans if isinstance(s, str)]
    if failed:
        raise RuntimeError(f"a worker failed: {failed[0]}")
    total = sum(n for _, _, n in spans)
    return total / (max(end for _, end, _ in spans) - min(start for start, _, _ in spans))


def us(seconds: float) -> str:
    return f"{seconds * 1e6:,.0f} µs"


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--calls", type=int, default=1000, help="calls per single-process measurement")
    parser.add_argument("--per-process", type=int, default=500, help="calls per worker process")
    args = parser.parse_args()

    rows: list[list[str]] = []
    with tempfile.TemporaryDirectory(prefix="toolstitch-bench-") as tmp:
        cluster: Cluster | None = None
        kinds: list[tuple[str, Callable[[str], str]]] = [
            ("memory", lambda name: ""),
            ("sqlite", lambda name: str(Path(tmp) / f"{name}.db")),
        ]
        if find_bindir() is not None:
            cluster = Cluster().start()
            live = cluster
            kinds.append(("postgres", lambda name: live.create_database(name)))
        else:
            print("PostgreSQL binaries not found: the postgres row is skipped", file=sys.stderr)
        try:
            for kind, target in kinds:
                ledger = make_ledger(kind, target("single"), "bench")
                direct = per_call_direct(ledger, args.calls)
                asynchronous = per_call_async(ledger, args.calls)
                batch = calls([f"exec_{i}" for i in range(args.calls)])
                bare_batch = calls([f"bare_{i}" for i in range(args.calls)])
                with ts.Toolbox([echo]) as box:
                    bare = per_call_execute(None, box, bare_batch)
                    with_ledger = per_call_execute(ledger, box, batch)
                ledger.close()
                distinct = fleet(kind, target("fleet"), args.per_process, same=False)
                same = fleet(kind, target("dup"), args.per_process, same=True)
                rows.append(
                    [
                        kind,
                        us(direct),
                        us(asynchronous),
                        us(with_ledger - bare),
                        f"{distinct:,.0f}/s",
                        f"{same:,.0f}/s",
                    ]
                )
                print(f"{kind}: done", file=sys.stderr)
        finally:
            if cluster is not None:
                cluster.stop()

    header = ["ledger", "claim+finish", "async", "execute +", "4 procs", "4 procs, dup"]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    line = "| " + " | ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)) + " |"
    print(line)
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for r in rows:
        print(
            "| "
            + " | ".join(
                c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True))
            )
            + " |"
        )
    command = f"--calls {args.calls} --per-process {args.per_process}"
    print(f"\n{os.cpu_count()} cores; per call: {args.calls} calls; 4 procs: {args.per_process} calls each.")
    print(f"Command: .venv/bin/python benchmarks/ledger.py {command}")


if __name__ == "__main__":
    main()
