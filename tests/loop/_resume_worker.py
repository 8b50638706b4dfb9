"""A process that runs a background Responses step and dies mid-stream (``python -m
tests.loop._resume_worker BASE_URL LEDGER EFFECTS``): the parent kills it while the stream waits.

Every real execution of a tool appends one line to the side-effect file, so the parent counts
executions across processes without trusting the ledger.
"""

from __future__ import annotations

import os
import sys

import openai

import toolstitch as ts


def toolbox(effects: str) -> ts.Toolbox:
    """The tools of the run (the parent builds the same ones)."""

    @ts.tool
    def get_weather(city: str) -> str:
        """The weather in a city (a side effect per run: it must never run twice)."""
        fd = os.open(effects, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, f"get_weather {city} {os.getpid()}\n".encode())
        finally:
            os.close(fd)
        return f"sunny in {city}"

    return ts.Toolbox([get_weather])


def main(base_url: str, ledger_path: str, effects: str) -> None:
    client = openai.OpenAI(base_url=base_url, api_key="test", max_retries=0)
    with ts.SQLiteLedger(ledger_path, scope="conv") as ledger:
        ts.run(
            client,
            model="m",
            input="Weather in Paris?",
            toolbox=toolbox(effects),
            api="responses",
            background=True,
            ledger=ledger,
        )


if __name__ == "__main__":
    main(*sys.argv[1:4])
