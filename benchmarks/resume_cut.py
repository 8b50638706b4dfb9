"""What a dropped connection costs a tool-loop step, with and without resuming the stream.

Run: ``.venv/bin/python benchmarks/resume_cut.py`` (``--runs N``, ``--delay S``, ``--cut F``).

The model is ``toolstitch.testing.LocalServer``, pacing a Responses stream as a model generates it:
two function calls and a reasoning summary, ``--delay`` seconds between events (default 5 ms, about
0.6 s for the whole response). The connection drops at ``--cut`` of the body (default 0.6: inside
the second call's arguments). One step of ``ts.run(..., api="responses")`` then runs three ways:

* ``unbroken``              no cut: the floor;
* ``cut, no resume``        the loop's retry sends the request again (``RetryPolicy`` without
  waits): the model generates the whole response a second time;
* ``cut, resume``           ``background=True``: the wrapped stream asks
  ``responses.retrieve(id, stream=True, starting_after=N)`` for the rest and goes on.

For each: the requests the server saw (``create`` and ``retrieve``), the events it streamed (what
the model generated and sent), and the median time to the finished step (every call run, the answer
received), with the ratio to ``unbroken``; each tool must have run once per run in every row.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import toolstitch as ts
from toolstitch.loop._run import RetryPolicy
from toolstitch.testing import LocalServer, StreamScript, response_events, sse_body

CALLS = [
    ("call_1", "get_weather", '{"city": "Zürich", "unit": "celsius", "detail": "hourly"}'),
    ("call_2", "get_time", '{"tz": "Europe/Zurich", "format": "iso-8601", "precision": "seconds"}'),
]
ran: list[str] = []


@ts.tool
def get_weather(city: str, unit: str, detail: str) -> str:
    """The weather (not read-only: a second run would be a second side effect)."""
    ran.append("get_weather")
    return f"14 {unit} in {city}"


@ts.tool
def get_time(tz: str, format: str, precision: str) -> str:
    """The time in a time zone."""
    ran.append("get_time")
    return "12:00:00"


BOX = ts.Toolbox([get_weather, get_time])


def one_run(delay: float, cut: float | None, background: bool) -> tuple[float, int, int, int]:
    """One run of two steps (calls, then the answer): seconds, creates, retrieves, events sent."""
    first = response_events(CALLS, reasoning="Two lookups.", id="resp_1", background=background, pieces=24)
    answer = response_events(text="14 degrees at noon.", id="resp_2", background=background)
    where = None if cut is None else int(len(sse_body(first, done=False)) * cut)
    scripts = [StreamScript.responses(first, delay=delay, cut_after_bytes=where)]
    if cut is not None and not background:
        scripts.append(StreamScript.responses(first, delay=delay))  # the second generation
    scripts.append(StreamScript.responses(answer, delay=delay))
    sent = sum(len(s.items()) if s.cut_after_bytes is None else 0 for s in scripts)
    with LocalServer() as server:
        server.enqueue(*scripts)
        extra: dict[str, Any] = {"background": True} if background else {}
        ran.clear()
        t0 = time.perf_counter()
        result = ts.run(
            server.client(),
            model="m",
            input="Weather and time?",
            toolbox=BOX,
            api="responses",
            retry=RetryPolicy(attempts=3, initial=0.0, maximum=0.0, jitter=0.0),
            **extra,
        )
        elapsed = time.perf_counter() - t0
        assert result.output_text == "14 degrees at noon.", result.stop_reason
        assert sorted(ran) == ["get_time", "get_weather"], ran
        creates, retrieves = len(server.requests), len(server.retrieves)
        if where is not None:  # the events of the cut stream that got through, and what a resume sent
            got = len(sse_body(first, done=False)[:where].split(b"\n\n")) - 1
            sent += got
            if background:
                after = int(server.retrieves[0]["starting_after"])
                sent += len(first) - after - 1
    return elapsed, creates, retrieves, sent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--delay", type=float, default=0.005, help="seconds between events")
    parser.add_argument("--cut", type=float, default=0.6, help="where the connection drops (0-1)")
    args = parser.parse_args()
    rows = [("unbroken", None, False), ("cut, no resume", args.cut, False), ("cut, resume", args.cut, True)]
    times: dict[str, list[float]] = {name: [] for name, _, _ in rows}
    counts: dict[str, tuple[int, int, int]] = {}
    for _ in range(args.runs):
        for name, cut, background in rows:
            elapsed, creates, retrieves, sent = one_run(args.delay, cut, background)
            times[name].append(elapsed)
            counts[name] = (creates, retrieves, sent)
    base = statistics.median(times["unbroken"])
    print(
        f"one two-step ts.run(api='responses'), {args.delay * 1000:g} ms between events, cut at "
        f"{args.cut:.0%} of the first response; median of {args.runs} runs"
    )
    print(f"{'':<16} {'create':>6} {'retrieve':>8} {'events sent':>11} {'time (s)':>9} {'/ unbroken':>10}")
    for name, _, _ in rows:
        creates, retrieves, sent = counts[name]
        median = statistics.median(times[name])
        print(f"{name:<16} {creates:>6} {retrieves:>8} {sent:>11} {median:>9.3f} {median / base:>10.2f}")
    print(
        f"command: .venv/bin/python benchmarks/resume_cut.py --runs {args.runs} --delay {args.delay:g} "
        f"--cut {args.cut:g}"
    )


if __name__ == "__main__":
    main()
