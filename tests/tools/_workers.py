"""Worker processes for the claim tests (spawned: they import this module by name).

Each worker opens the shared SQLite ledger itself, executes calls through a real Toolbox, and counts
every real execution by appending one line to a side-effect file (``O_APPEND`` writes of one line are
atomic), so the parent can count executions across processes without trusting the ledger.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from tests.tools._support import sealed
from toolstitch.tools import SQLiteLedger, Toolbox, tool


def _append(path: str, line: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


def execute_ids(db: str, effects: str, ids: list[str], out: str, start: Any = None) -> None:
    """Execute ``charge`` once per id (through the ledger); write every result to ``out`` as JSON."""

    @tool
    def charge(n: int) -> dict[str, Any]:
        _append(effects, f"{n} {os.getpid()}")
        time.sleep(0.002)  # widen the window in which a duplicate could slip in
        return {"charged": n, "by": os.getpid()}

    if start is not None:
        start.wait(30)
    results = []
    with SQLiteLedger(db, scope="conv") as ledger, Toolbox([charge], timeout=60) as box:
        for i in ids:
            [result] = box.execute(
                sealed([(i, "charge", json.dumps({"n": int(i.split("_")[1])}))]), ledger=ledger
            )
            results.append({"id": i, "status": result.status, "value": result.value, "reused": result.reused})
    Path(out).write_text(json.dumps(results))


def hang_in_tool(db: str, marker: str, read_only: bool) -> None:
    """Claim and start a call, signal ``marker``, and hang inside the tool until killed."""

    def body() -> str:
        _append(marker, "started")
        time.sleep(3600)
        return "never"

    t = tool(body, name="op", read_only=read_only)
    with SQLiteLedger(db) as ledger, Toolbox([t]) as box:
        box.execute(sealed([("call_1", "op", "{}")]), ledger=ledger)


def open_ledger(db: str, start: Any, out: str) -> None:
    """Open the ledger at the same moment as the others; claim one call of one's own; write what
    happened to ``out``."""
    start.wait(30)
    try:
        with SQLiteLedger(db) as ledger:
            outcome = ledger.acquire(f"k{os.getpid()}", "fp", "x", read_only=False).action
    except Exception as exc:
        outcome = f"{type(exc).__name__}: {exc}"
    Path(out).write_text(outcome)
