"""A separate process that resumes a run awaiting approval (``python -m tests.loop._approval_worker``).

It reads the saved history and the approvals from JSON files, opens the shared SQLite ledger and
resumes against the parent's LocalServer; every real execution of ``transfer`` appends one line to a
side-effect file, so the parent counts executions across processes without trusting the ledger.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import openai

import toolstitch as ts


def _append(path: str, line: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


def toolbox(effects: str) -> ts.Toolbox:
    """The tools of the conversation (the parent builds the same ones)."""

    @ts.tool(confirm=True)
    def transfer(amount: int, to: str) -> str:
        """Move money."""
        _append(effects, f"transfer {amount} {to} {os.getpid()}")
        return f"sent {amount} to {to}"

    @ts.tool(read_only=True)
    def balance() -> int:
        """The account balance."""
        _append(effects, f"balance {os.getpid()}")
        return 100

    return ts.Toolbox([transfer, balance])


def approvals_from(data: dict[str, Any]) -> dict[str, Any]:
    """``{"id": true}`` or ``{"id": {"deny": "why"}}`` as ``run``'s approvals."""
    return {k: (ts.Deny(v["deny"]) if isinstance(v, dict) else v) for k, v in data.items()}


def main(base_url: str, db: str, effects: str, history: str, approvals: str, out: str) -> None:
    messages = json.loads(Path(history).read_text())
    client = openai.OpenAI(base_url=base_url, api_key="test", max_retries=0)
    with ts.SQLiteLedger(db, scope="conv") as ledger, toolbox(effects) as box:
        try:
            result = ts.run(
                client,
                model="m",
                messages=messages,
                toolbox=box,
                ledger=ledger,
                approvals=approvals_from(json.loads(Path(approvals).read_text())),
            )
        except ts.errors.ApprovalError as exc:
            Path(out).write_text(json.dumps({"refused": exc.problems}))
            return
    Path(out).write_text(
        json.dumps(
            {
                "stop_reason": result.stop_reason,
                "messages": result.messages,
                "pending": [c.id for c in result.pending],
            }
        )
    )


if __name__ == "__main__":
    main(*sys.argv[1:7])
