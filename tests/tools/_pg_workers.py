"""Worker processes for the PostgreSQL ledger tests (spawned: they import this module by name).

Each worker makes its own :class:`~toolstitch.PostgresLedger` from a connection string, executes
calls through a real Toolbox, and counts every real execution by appending one line to a
side-effect file (``O_APPEND`` writes of one line are atomic), so the parent counts executions
across processes without trusting the ledger.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import openai

import toolstitch as ts
from tests.tools._support import sealed
from toolstitch.loop._run import CallFinished, ResponseReceived, RunEvent


def append(path: str, line: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


def execute_ids(conninfo: str, effects: str, ids: list[str], out: str, start: Any = None) -> None:
    """Execute ``charge`` once per id through the ledger; write every result to ``out`` as JSON."""

    @ts.tool
    def charge(n: int) -> dict[str, Any]:
        append(effects, f"{n} {os.getpid()}")
        time.sleep(0.002)  # widen the window in which a duplicate could slip in
        return {"charged": n, "by": os.getpid()}

    if start is not None:
        start.wait(60)
    results = []
    with ts.PostgresLedger(conninfo, scope="conv") as ledger, ts.Toolbox([charge], timeout=120) as box:
        for i in ids:
            n = int(i.split("_")[1])
            [result] = box.execute(sealed([(i, "charge", json.dumps({"n": n}))]), ledger=ledger)
            results.append({"id": i, "status": result.status, "value": result.value, "reused": result.reused})
    Path(out).write_text(json.dumps(results))


def hang_in_tool(conninfo: str, marker: str, read_only: bool) -> None:
    """Claim and start a call, write ``marker``, and hang inside the tool until killed."""

    def body() -> str:
        append(marker, "started")
        time.sleep(3600)
        return "never"

    op = ts.tool(body, name="op", read_only=read_only)
    with ts.PostgresLedger(conninfo, scope="conv") as ledger, ts.Toolbox([op]) as box:
        box.execute(sealed([("call_1", "op", "{}")]), ledger=ledger)


def run_and_die(conninfo: str, base_url: str, effects: str, saved: str) -> None:
    """Worker A: a conversation through ``ts.run`` whose tool runs, then the process dies before the
    follow-up request (right after the call's result was recorded). Each assistant message is saved
    to ``saved`` as it arrives, as an application persisting its history would."""

    @ts.tool
    def book_flight(to: str) -> str:
        append(effects, f"booked {to} {os.getpid()}")
        return f"booked a flight to {to}"

    messages: list[Any] = []

    def on_event(event: RunEvent) -> None:
        if isinstance(event, ResponseReceived):
            messages.append(event.message)
            Path(saved).write_text(json.dumps(messages))
        if isinstance(event, CallFinished):
            os._exit(17)  # the worker dies: no follow-up request is ever sent

    client = openai.OpenAI(base_url=base_url, api_key="test", max_retries=0)
    ledger = ts.PostgresLedger(conninfo, scope="conversation-42")
    with ts.Toolbox([book_flight]) as box:
        ts.run(client, model="m", messages=[{"role": "user", "content": "fly me"}], toolbox=box,
               ledger=ledger, on_event=on_event)  # fmt: skip
